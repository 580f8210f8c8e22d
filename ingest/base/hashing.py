"""sha256 of a file, read in blocks (models of GB, question files, source dumps)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

_BLOCK = 8 * 1024 * 1024


def file_sha256(path: Path, reporter: Any = None) -> str:
    """The hex sha256 of the file's bytes; `reporter.advance(n)` is called after each block read
    (a progress bar), when given."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
            if reporter is not None:
                reporter.advance(len(block))
    return digest.hexdigest()
