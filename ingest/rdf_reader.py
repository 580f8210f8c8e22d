"""Streaming readers for N-Triples, N-Quads (line-based) and Turtle, with per-line rejects.

Line-based input is parsed in batches by pyoxigraph (fast path); a batch that fails is re-parsed
line by line, so one bad line costs one reject, never the batch. A line that fails can first be
offered to a `mend` function (the Freebase dump's known literal quirks) before it is rejected.

N-Triples can be left unparsed here (`unparsed=True`): under the generic profile,
ingest/nt_scan.py reads degrees and metadata lines from the bytes; under the Wikidata and
Freebase profiles, ingest/profile_scan.py routes the lines with Arrow kernels as the profile
would. The store's `bulk_load` parses what is kept, and a batch that it rejects is parsed by
`KgBatch.reparse`, line by line as above.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pyoxigraph as ox

from ingest.base.errors import InputError
from ingest.kg_batch import KgBatch
from ingest.kg_profiles import META_PREDICATE_IRIS, GenericProfile, Profile
from ingest.nt_scan import MetadataRouting, drop_other_languages, scan_ntriples
from ingest.profile_scan import ProfileScan, profile_scan
from ingest.rejects import Reject
from ingest.sources import STREAM_ERRORS, open_input
from ingest.terms import META_GRAPH

Mend = Callable[[bytes], bytes | None]
# Bytes per line batch. An unparsed batch is larger: the store loads fewer, larger batches
# faster (64 MiB: about 20% less time than 16 MiB on a 2M-triple file) and into fewer, so
# smaller, files (each bulk_load writes its own); it holds bytes and Arrow columns, not Python
# objects (peak about 0.5 GB: the queue's batches and one being scanned). Chunks that start
# small, to start the store sooner, cost more in store size (MetaQA: 174 vs 125 bytes/triple)
# than they gained in time.
BATCH_BYTES = 16 << 20
UNPARSED_BATCH_BYTES = 64 << 20
_TURTLE_BATCH = 50_000
_MAX_CONSECUTIVE_ERRORS = 10_000


def read_line_rdf(
    path: Path,
    fmt: ox.RdfFormat,
    profile: Profile,
    mend: Mend | None = None,
    batch_bytes: int | None = None,
    unparsed: bool = False,
) -> Iterator[KgBatch]:
    """Read an N-Triples / N-Quads file (plain, .gz, .bz2) as batches routed by `profile`.

    With `unparsed`, N-Triples batches in the plain form that the scans read come unparsed (see
    the module docstring); any other batch comes parsed.
    """
    name = str(path)
    lines = unparsed and fmt == ox.RdfFormat.N_TRIPLES
    scan = lines and mend is None and isinstance(profile, GenericProfile)
    routed = profile_scan(profile) if lines else None
    size = batch_bytes or (UNPARSED_BATCH_BYTES if scan or routed else BATCH_BYTES)
    for first_line, data, bytes_read in iter_chunks(path, size):
        batch = _unparsed_batch(data, first_line, name, profile) if scan else None
        if routed is not None:
            batch = _routed_batch(routed, data, first_line, name, mend)
        if batch is None:
            batch = parse_batch(data, first_line, name, fmt, profile, mend)
        batch.lines = data.count(b"\n") + (not data.endswith(b"\n"))
        batch.bytes_read = bytes_read
        yield batch


def iter_chunks(path: Path, batch_bytes: int) -> Iterator[tuple[int, bytes, int]]:
    """Yield (first_line_number, whole lines as one bytes object, raw bytes read) of a text file.

    A truncated or corrupt compressed file raises InputError naming it, after every complete
    chunk before the damage has been yielded; so does a file that holds no data.
    """
    stream, counter = open_input(path)
    line_no, carry = 1, b""
    try:
        while True:
            try:
                block = stream.read(batch_bytes)
            except STREAM_ERRORS as exc:
                raise InputError(f"{path}: compressed stream is truncated or corrupt ({exc})") from exc
            if not block:
                if carry:
                    yield line_no, carry, counter.bytes_read
                elif line_no == 1:
                    raise InputError(f"{path}: file is empty (no data after decompression)")
                return
            data = carry + block
            cut = data.rfind(b"\n") + 1  # a line never straddles two chunks
            if cut == 0:
                carry = data
                continue
            data, carry = data[:cut], data[cut:]
            yield line_no, data, counter.bytes_read
            line_no += data.count(b"\n")
    finally:
        stream.close()


def _split_lines(data: bytes) -> list[bytes]:
    """The lines of `data`, each with its newline (as `readlines` splits them: on b"\\n" only)."""
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def parse_batch(
    data: bytes, first_line: int, name: str, fmt: ox.RdfFormat, profile: Profile, mend: Mend | None
) -> KgBatch:
    """Parse whole lines (first numbered `first_line`) into a routed batch; a line that does not
    parse (nor mend) becomes a reject naming `name` and its line."""
    batch = KgBatch()
    try:
        quads = list(ox.parse(data, fmt))
        # bulk_load renames blank nodes (a new random id per load), so a batch that may hold one
        # is loaded from its parsed quads, which keep the labels the entity table names.
        if fmt == ox.RdfFormat.N_TRIPLES and b"_:" not in data:
            batch.raw = data
    except (SyntaxError, ValueError):
        quads = _parse_lines_one_by_one(_split_lines(data), first_line, name, fmt, mend, batch)
    if batch.raw is not None and profile.all_facts(data):
        batch.facts = quads  # plain N-Triples without metadata: nothing to route
    else:
        profile.route(quads, batch)
    return batch


def _unparsed_batch(data: bytes, first_line: int, name: str, profile: Profile) -> KgBatch | None:
    """The batch left for the store to parse, with its metadata lines routed here; None when the
    scan declines it or a metadata line does not parse (the caller then parses it whole)."""
    assert isinstance(profile, GenericProfile)
    routing = MetadataRouting(META_PREDICATE_IRIS, profile.languages, META_GRAPH)
    scan = scan_ntriples(data, routing)
    if scan is None:
        return None
    facts = scan.facts if scan.facts.endswith(b"\n") or not scan.meta_nquads else scan.facts + b"\n"  # the last line
    batch = KgBatch(raw=facts, unparsed_facts=scan.fact_count, degrees=scan.degrees,
                    unparsed_meta=scan.meta_nquads, unparsed_meta_count=scan.meta_kept)
    meta_lines, dropped = drop_other_languages(scan.meta_lines, routing)
    if dropped:
        batch.filtered["other-language metadata"] += dropped
    if meta_lines:
        try:
            profile.route(ox.parse(meta_lines, ox.RdfFormat.N_TRIPLES), batch)
        except (SyntaxError, ValueError):
            return None
        batch.not_facts = []  # the metadata lines are not in `raw`: nothing to remove
    batch.reparse = partial(parse_batch, data, first_line, name, ox.RdfFormat.N_TRIPLES, profile, None)
    return batch


def _routed_batch(routed: ProfileScan, data: bytes, first_line: int, name: str, mend: Mend | None) -> KgBatch | None:
    """The batch that a profile scan routed, left for the store to parse; None when the scan
    declines it (the caller then parses it whole)."""
    scanned = routed.scan(data)
    if scanned is None:
        return None
    batch, profile = scanned
    batch.reparse = partial(parse_batch, data, first_line, name, ox.RdfFormat.N_TRIPLES, profile, mend)
    return batch


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
