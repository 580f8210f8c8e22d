"""Opening input files (plain, .gz, .bz2) with clear errors, and fingerprinting them."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import zlib
from pathlib import Path
from typing import BinaryIO

from ingest.base.errors import InputError
from ingest.base.hashing import file_sha256

# Above this size a source is fingerprinted by size + mtime only (hashing a 100 GB dump twice
# would cost more than the incremental build saves).
HASH_LIMIT_BYTES = 256 * 1024 * 1024

# What reading a damaged compressed stream raises: EOFError (truncated), OSError and its
# gzip.BadGzipFile (bad header, CRC), zlib.error (corrupt deflate data, not an OSError).
STREAM_ERRORS: tuple[type[Exception], ...] = (EOFError, OSError, zlib.error)


def check_file(path: Path) -> Path:
    """Return `path` if it is a readable, non-empty file; raise InputError naming it otherwise."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a file")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: file is empty")
    return path


def check_text(path: Path, probe_bytes: int = 8192) -> Path:
    """`check_file`, and the first `probe_bytes` (after decompression) hold no NUL byte: a text
    dump never does, a binary file (an image, a database, a model) almost always does."""
    check_file(path)
    stream, _ = open_input(path)
    try:
        head = stream.read(probe_bytes)
    except STREAM_ERRORS as exc:
        raise InputError(f"{path}: compressed stream is truncated or corrupt ({exc})") from exc
    finally:
        stream.close()
    if b"\x00" in head:
        offset = head.index(b"\x00")
        raise InputError(
            f"{path}: is a binary file, not a text dump (a NUL byte at offset {offset}); "
            "give an RDF, JSON or TSV/CSV file in UTF-8 (plain, .gz or .bz2)"
        )
    return path


class CountingReader(io.RawIOBase):
    """Wraps the raw file so progress can report compressed bytes read out of the file size."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.bytes_read += n
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def open_input(path: Path) -> tuple[BinaryIO, CountingReader]:
    """Open a plain, gzip or bzip2 file for binary streaming.

    Returns the decompressed stream and the counter of raw bytes consumed (for progress bars).
    """
    check_file(path)
    counter = CountingReader(path.open("rb"))
    raw = io.BufferedReader(counter, buffer_size=1 << 20)
    head = raw.peek(3)[:3]
    if path.suffix == ".gz" or head[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb"), counter  # type: ignore[return-value]
    if path.suffix == ".bz2" or head == b"BZh":
        return bz2.BZ2File(raw, mode="rb"), counter  # type: ignore[return-value]
    return raw, counter  # type: ignore[return-value]


def iter_lines(path: Path, batch_bytes: int = 4 << 20):  # type: ignore[no-untyped-def]
    """Yield (first_line_number, [raw lines], raw_bytes_read) batches of a text file, in order.

    A truncated or corrupt compressed file raises InputError naming it, after every complete
    batch before the damage has been yielded; so does a compressed file that holds no data.
    """
    stream, counter = open_input(path)
    line_no = 1
    try:
        while True:
            try:
                lines = stream.readlines(batch_bytes)
            except STREAM_ERRORS as exc:
                raise InputError(f"{path}: compressed stream is truncated or corrupt ({exc})") from exc
            if not lines:
                if line_no == 1:
                    raise InputError(f"{path}: file is empty (no data after decompression)")
                return
            yield line_no, lines, counter.bytes_read
            line_no += len(lines)
    finally:
        stream.close()


def fingerprint(path: Path) -> dict[str, object]:
    """Identify a source file's content: sha256 for files up to HASH_LIMIT_BYTES, else size+mtime."""
    stat = path.stat()
    result: dict[str, object] = {
        "path": str(path.resolve()),
        "size": stat.st_size,
        "mtime": stat.st_mtime,
    }
    if path.is_dir():
        # A folder is identified by its files' names and contents; past HASH_LIMIT_BYTES in all
        # (a WikiExtractor folder of many GB) by names, sizes and mtimes, so that an unchanged
        # source costs a directory listing, not a re-read.
        children = sorted(p for p in path.rglob("*") if p.is_file())
        stats = [c.stat() for c in children]
        by_content = sum(st.st_size for st in stats) <= HASH_LIMIT_BYTES
        digest = hashlib.sha256()
        for child, st in zip(children, stats, strict=True):
            digest.update(str(child.relative_to(path)).encode())
            digest.update((file_sha256(child) if by_content else f"{st.st_size}:{st.st_mtime_ns}").encode())
        result["sha256" if by_content else "listing"] = digest.hexdigest()
    elif stat.st_size <= HASH_LIMIT_BYTES:
        result["sha256"] = file_sha256(path)
    return result


def same_content(old: dict[str, object], new: dict[str, object]) -> bool:
    """Whether two fingerprints describe the same content."""
    for key in ("sha256", "listing"):
        if key in old and key in new:
            return old[key] == new[key]
    return (old.get("size"), old.get("mtime")) == (new.get("size"), new.get("mtime"))

