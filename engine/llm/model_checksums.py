"""sha256 of model files, with a remembered result per file identity (path, device, inode, size,
mtime, ctime) in `<models>/.verified/`, so an unchanged file is hashed once (see the docstring of
engine/llm/models.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from engine.llm.gguf_header import check_gguf
from ingest.base import hashing
from ingest.base.errors import ModelError
from ingest.base.home import models_dir
from ingest.base.progress import progress_bar

_CHUNK = 8 * 1024 * 1024



def _record_path(path: Path) -> Path:
    key = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:20]
    return models_dir() / ".verified" / f"{key}.json"


IDENTITY_KEYS = ("path", "device", "inode", "size", "mtime_ns", "ctime_ns")


def _stat_key(path: Path) -> dict[str, Any]:
    """The file's identity: a file with the same one has not been written since it was hashed
    (ctime moves with every write, and with every utime that sets an mtime back)."""
    st = path.stat()
    return {"path": str(path.resolve()), "device": st.st_dev, "inode": st.st_ino, "size": st.st_size,
            "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}


def _read_record(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(_record_path(path).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _remembered_sha(path: Path) -> str | None:
    """The sha256 of a file checked before, if its identity is unchanged since (see _stat_key);
    a record of an older format (path, size, mtime only) does not count."""
    record = _read_record(path)
    if {k: record.get(k) for k in IDENTITY_KEYS} != _stat_key(path):
        return None
    sha = record.get("sha256")
    return sha if isinstance(sha, str) else None


def _check_silent_change(path: Path, sha: str, repair: str) -> None:
    """ModelError when the bytes differ from the last check although path, size and mtime do not:
    a file that was damaged in place (a model given as a path has no pinned checksum, so this is
    how its corruption shows)."""
    record = _read_record(path)
    now = _stat_key(path)
    if (record.get("sha256") not in (None, sha)
            and all(record.get(k) == now[k] for k in ("path", "size", "mtime_ns"))):
        raise ModelError(
            f"model file {path} is corrupt: its content changed (sha256 {sha[:12]}…, was "
            f"{str(record['sha256'])[:12]}…) although its size and mtime did not; {repair}"
        )


def _remembered(path: Path) -> dict[str, Any]:
    """The record of the last check of `path` when its identity is unchanged since; else {}."""
    record = _read_record(path)
    return record if {k: record.get(k) for k in IDENTITY_KEYS} == _stat_key(path) else {}


def _remember(path: Path, sha: str, **extra: Any) -> None:
    record = {**_stat_key(path), "sha256": sha, **extra}
    target = _record_path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, target)
    except OSError:
        pass  # a read-only cache only costs a re-hash next time


def file_sha256(path: Path, *, repair: str, force: bool = False) -> str:
    """sha256 of a GGUF file after the header/size check; remembered while the file is unchanged.

    `force` ignores the remembered result and re-reads the whole file.
    """
    known = None if force else _remembered_sha(path)
    if known is not None:
        return known
    check_gguf(path, repair)
    with progress_bar(f"checking {path.name}", path.stat().st_size, unit="bytes") as bar:
        sha = hashing.file_sha256(path, bar)
    _check_silent_change(path, sha, repair)
    _remember(path, sha)
    return sha
