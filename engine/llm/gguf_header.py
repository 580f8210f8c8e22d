"""Reading a GGUF file's header and tensor table, and the header/size check every model file
gets before use (a truncated or partial file fails it without a known checksum)."""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingest.base.errors import ModelError

GGUF_MAGIC = b"GGUF"

# ggml type id -> (elements per block, bytes per block); ids from ggml.h
_GGML_BLOCKS: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
    14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98),
    19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1),
    25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2),
    34: (256, 54), 35: (256, 66), 39: (32, 17),
}  # fmt: skip
# GGUF value type -> struct format of a scalar
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GGUFInfo:
    """What the header of a GGUF file says."""

    version: int
    n_tensors: int
    metadata: dict[str, Any]  # scalar values only (arrays are skipped)
    expected_size: int | None  # None when a tensor type is unknown to this table


class _Reader:
    def __init__(self, buf: Any) -> None:
        self.buf = buf
        self.pos = 0

    def unpack(self, fmt: str) -> Any:
        value = struct.unpack_from("<" + fmt, self.buf, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.unpack("Q")
        raw = bytes(self.buf[self.pos : self.pos + n])
        if len(raw) != n:
            raise struct.error("string runs past the end of the file")
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            item_type, count = self.unpack("I"), self.unpack("Q")
            if item_type in _SCALARS:  # skip without decoding
                self.pos += count * struct.calcsize(_SCALARS[item_type])
            else:
                for _ in range(count):
                    self.value(item_type)
            return None
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_gguf_header(path: Path) -> GGUFInfo:
    """Parse the header and tensor table of a GGUF file (arrays such as the vocabulary skipped).

    Raises ModelError when the file is not GGUF or its header is cut short.
    """
    size = path.stat().st_size
    if size < 24:
        raise ModelError(f"{path} is not a GGUF model file ({size} bytes)")
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != GGUF_MAGIC:
            raise ModelError(f"{path} is not a GGUF model file (its first bytes are {buf[:4]!r})")
        r = _Reader(buf)
        r.pos = 4
        try:
            version, n_tensors, n_kv = r.unpack("I"), r.unpack("Q"), r.unpack("Q")
            metadata: dict[str, Any] = {}
            for _ in range(n_kv):
                key = r.string()
                value = r.value(r.unpack("I"))
                if value is not None:
                    metadata[key] = value
            tensor_end = 0
            known = True
            for _ in range(n_tensors):
                r.string()
                dims = [r.unpack("Q") for _ in range(r.unpack("I"))]
                ggml_type, offset = r.unpack("I"), r.unpack("Q")
                if ggml_type not in _GGML_BLOCKS:
                    known = False
                    continue
                per_block, block_bytes = _GGML_BLOCKS[ggml_type]
                n = 1
                for d in dims:
                    n *= d
                tensor_end = max(tensor_end, offset + n // per_block * block_bytes)
        except (struct.error, ValueError, MemoryError) as exc:
            raise ModelError(f"{path} has a damaged or cut-off GGUF header ({exc})") from None
    alignment = int(metadata.get("general.alignment", 32))
    data_start = -(-r.pos // alignment) * alignment
    expected = data_start + tensor_end if known else None
    return GGUFInfo(version, n_tensors, metadata, expected)


def check_gguf(path: Path, repair: str) -> GGUFInfo:
    """Header parses and the length matches the tensor table; else ModelError naming `repair`."""
    info = read_gguf_header(path)
    size = path.stat().st_size
    if info.expected_size is not None and size != info.expected_size:
        what = "truncated (a partial file)" if size < info.expected_size else "too long"
        raise ModelError(
            f"model file {path} is {what}: {size} bytes, its GGUF tensor table needs "
            f"{info.expected_size}; {repair}"
        )
    return info
