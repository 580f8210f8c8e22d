"""Streaming readers for N-Triples, N-Quads (line-based) and Turtle, with per-line rejects.

Line-based input is parsed in batches by pyoxigraph (fast path); a batch that fails is re-parsed
line by line, so one bad line costs one reject, never the batch. A line that fails can first be
offered to a `mend` function (the Freebase dump's known literal quirks) before it is rejected.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pyoxigraph as ox

from ingest.errors import InputError
from ingest.kg_batch import KgBatch
from ingest.kg_profiles import Profile
from ingest.rejects import Reject
from ingest.sources import STREAM_ERRORS, iter_lines, open_input

Mend = Callable[[bytes], bytes | None]
_TURTLE_BATCH = 50_000
_MAX_CONSECUTIVE_ERRORS = 10_000


def read_line_rdf(
    path: Path,
    fmt: ox.RdfFormat,
    profile: Profile,
    mend: Mend | None = None,
    batch_bytes: int = 16 << 20,
) -> Iterator[KgBatch]:
    """Read an N-Triples / N-Quads file (plain, .gz, .bz2) as batches routed by `profile`."""
    name = str(path)
    for first_line, lines, bytes_read in iter_lines(path, batch_bytes):
        batch = KgBatch(lines=len(lines), bytes_read=bytes_read)
        data = b"".join(lines)
        try:
            quads = list(ox.parse(data, fmt))
            if fmt == ox.RdfFormat.N_TRIPLES:
                batch.raw = data
        except (SyntaxError, ValueError):
            quads = _parse_lines_one_by_one(lines, first_line, name, fmt, mend, batch)
        if batch.raw is not None and profile.all_facts(data):
            batch.facts = quads  # plain N-Triples without metadata: nothing to route
        else:
            profile.route(quads, batch)
        yield batch


def _parse_lines_one_by_one(
    lines: list[bytes],
    first_line: int,
    name: str,
    fmt: ox.RdfFormat,
    mend: Mend | None,
    batch: KgBatch,
) -> list[ox.Quad]:
    quads: list[ox.Quad] = []
    for offset, line in enumerate(lines):
        if not line.strip() or line.lstrip().startswith(b"#"):
            continue
        try:
            quads.extend(ox.parse(line, fmt))
            continue
        except (SyntaxError, ValueError) as exc:
            error = exc
        mended = mend(line) if mend is not None else None
        if mended is not None:
            try:
                quads.extend(ox.parse(mended, fmt))
                batch.filtered["mended line"] += 1
                continue
            except (SyntaxError, ValueError):
                pass
        batch.rejects.append(
            Reject(name, first_line + offset, _reason(error, line), line.decode("utf-8", "replace"))
        )
    return quads


def _reason(error: Exception, line: bytes) -> str:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"invalid UTF-8 at byte {exc.start}"
    message = str(error).split(": ", 1)[-1] if isinstance(error, SyntaxError) else str(error)
    return re.sub(r" \(line \d+\)$", "", message)


def read_turtle(path: Path, profile: Profile, fmt: ox.RdfFormat = ox.RdfFormat.TURTLE) -> Iterator[KgBatch]:
    """Stream a Turtle (or TriG) file; syntax errors are recorded and the parser resumes after them.

    A truncated or corrupt compressed file raises InputError naming it (the build then leaves
    no index behind); invalid UTF-8 is a syntax error like any other: rejected with its line.
    """
    name = str(path)
    stream, counter = open_input(path)
    parser = ox.parse(stream, fmt)
    pending: list[ox.Quad] = []
    batch = KgBatch()
    consecutive_errors = 0
    last_rejected: int | None = None
    try:
        while True:
            try:
                quad = next(parser)
                consecutive_errors = 0
            except StopIteration:
                break
            except SyntaxError as exc:
                consecutive_errors += 1
                if consecutive_errors > _MAX_CONSECUTIVE_ERRORS:
                    raise InputError(f"{name}: too many consecutive syntax errors, giving up") from exc
                line = exc.lineno if isinstance(exc.lineno, int) else None
                if line is not None and line == last_rejected:
                    continue  # the parser can report one bad line twice (invalid UTF-8 does)
                last_rejected = line
                batch.rejects.append(Reject(name, line, exc.msg if hasattr(exc, "msg") else str(exc)))
                continue
            except STREAM_ERRORS as exc:
                raise InputError(f"{name}: compressed stream is truncated or corrupt ({exc})") from exc
            pending.append(quad)
            if len(pending) >= _TURTLE_BATCH:
                profile.route(pending, batch)
                batch.bytes_read = counter.bytes_read
                yield batch
                pending, batch = [], KgBatch()
        profile.route(pending, batch)
        batch.bytes_read = counter.bytes_read
        yield batch
    finally:
        stream.close()
