"""The model part of a batch run's run.json, and the check that a resumed run uses the same
model file.

A model given by path (`--llm /path/model.gguf`) has no pinned checksum. Its sha256, computed on
its first use and remembered per file identity (path, device, inode, size, mtime, ctime: see
engine/llm/models.py, so a resume does not hash it again), is recorded in run.json as
`model.sha256`, beside `model.path` (resolved) and `model.size`. A later command in the same run
folder that finds another file under that path (replaced, re-quantised, damaged) is refused:
its records would mix two models. `--restart` starts the run again with the new file instead
(the old records are moved aside).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from engine.llm.model_registry import REGISTRY
from engine.llm.models import resolve_local
from engine.runs.handout import BatchError

_SHA256 = re.compile(r"[0-9a-f]{64}")


def given_by_path(llm: str | None) -> bool:
    """Whether `--llm` names a model file by its path (not a registry name, server or script)."""
    return bool(llm) and not str(llm).startswith(("http://", "https://", "scripted:")) and llm not in REGISTRY


def model_identity(llm: str | None, fingerprint: str) -> dict[str, Any]:
    """run.json's `model`: what was asked for and the fingerprint, and for a file given by path
    its resolved path, size and sha256."""
    entry: dict[str, Any] = {"llm": llm, "fingerprint": fingerprint}
    if llm is not None and given_by_path(llm):
        local = resolve_local(llm)  # remembered by file identity: not hashed again
        entry.update(path=str(local.path.resolve()), size=local.path.stat().st_size, sha256=local.sha256)
    return entry


def refuse_other_model_file(out: Path, previous: dict[str, Any], model: dict[str, Any], restart: bool) -> None:
    """BatchError when the run in `out` used a model file at the path `model` names whose sha256
    differs from the file there now; nothing to check for other models, or with `restart`."""
    path = model.get("path")
    if path is None or restart:
        return
    before = previous.get("model") or {}
    if (before.get("path") or _resolved(before.get("llm"))) != path:
        return
    recorded = before.get("sha256") or _fingerprint_sha(before.get("fingerprint"))
    if recorded is None or recorded == model["sha256"]:
        return
    raise BatchError(
        f"{path} is not the model file the run in {out} used: its sha256 is {model['sha256']}, run.json "
        f"recorded {recorded} (the file was replaced or damaged). Put that file back (check it with "
        f"`python cli.py models verify {path} --sha256 {recorded}`), or use --restart to move the run's "
        "records aside and start again with this file, or another --out"
    )


def _resolved(llm: Any) -> str | None:
    """The resolved path of an `--llm` recorded by a run.json without `model.path` (older runs)."""
    if not isinstance(llm, str) or not given_by_path(llm):
        return None
    return str(Path(llm).expanduser().resolve())


def _fingerprint_sha(fingerprint: Any) -> str | None:
    """The sha256 in a llama.cpp fingerprint (`llama.cpp-VERSION:SHA256`) of an older run.json."""
    if not isinstance(fingerprint, str):
        return None
    sha = fingerprint.rpartition(":")[2]
    return sha if _SHA256.fullmatch(sha) else None
