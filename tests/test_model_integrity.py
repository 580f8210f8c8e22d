"""A model damaged in place is caught on its first use, also when its size and mtime were kept
(issue 10, the model-integrity hole): the remembered check is keyed by the file's identity
(device, inode, size, mtime, ctime), and a write moves the ctime, which no user can set back.

Uses a copy of the real test model (smollm2-135m, 98 MB) under a temp models folder, registered
as a split model so that it is looked up there; the user's cache is never touched."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from engine.llm import model_checksums, models
from engine.llm.model_registry import REGISTRY, ModelSpec, Part
from ingest.base.errors import ModelError
from ingest.base.home import models_dir


@pytest.fixture
def model_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ModelSpec, Path]:
    tiny = REGISTRY["smollm2-135m"]
    source = models.model_path(tiny)
    if not source.is_file():
        pytest.skip("smollm2-135m is not installed")
    monkeypatch.setenv("LOCALKG_MODELS_DIR", str(tmp_path / "models"))
    spec = ModelSpec(name="tiny-copy", role="tests", filename="tiny-copy.gguf",
                     parts=(Part("p1", "0", "no_such_part1", "a"), Part("p2", "0", "no_such_part2", "b")),
                     sha256=tiny.sha256, size=tiny.size)
    monkeypatch.setitem(REGISTRY, spec.name, spec)
    target = models_dir() / spec.filename
    target.parent.mkdir(parents=True)
    shutil.copyfile(source, target)
    return spec, target


def _flip_middle_byte_keep_mtime(path: Path) -> None:
    st = path.stat()
    with path.open("r+b") as handle:
        handle.seek(st.st_size // 2)
        byte = handle.read(1)
        handle.seek(st.st_size // 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def test_corrupted_registry_model_fails_on_first_use(model_copy: tuple[ModelSpec, Path]) -> None:
    spec, path = model_copy
    assert models.resolve_local(spec.name).path == path  # what chat/ask/batch call: hashed once
    record = json.loads(next((models_dir() / ".verified").glob("*.json")).read_text())
    assert {"device", "inode", "size", "mtime_ns", "ctime_ns"} <= set(record)
    _flip_middle_byte_keep_mtime(path)
    with pytest.raises(ModelError, match=r"is corrupt.*models install tiny-copy"):
        models.resolve_local(spec.name)


def test_corrupted_path_model_fails_on_next_use(model_copy: tuple[ModelSpec, Path]) -> None:
    _, path = model_copy
    first = models.resolve_local(str(path))  # a model given as a path: no pinned checksum
    _flip_middle_byte_keep_mtime(path)
    with pytest.raises(ModelError, match=r"content changed .* although its size and mtime did not"):
        models.resolve_local(str(path))
    assert first.sha256 == REGISTRY["smollm2-135m"].sha256


def test_an_unchanged_file_is_hashed_once(model_copy: tuple[ModelSpec, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    spec, path = model_copy
    models.resolve_local(spec.name)
    hashed: list[Path] = []
    monkeypatch.setattr(model_checksums.hashing, "file_sha256", lambda p, reporter=None: hashed.append(p) or "x")
    models.resolve_local(spec.name)  # same identity: the remembered check holds
    assert hashed == []
    copy = path.with_name("moved.gguf")
    shutil.copy2(path, copy)  # same size and mtime, another inode
    os.replace(copy, path)
    with pytest.raises(ModelError):
        models.resolve_local(spec.name)  # re-hashed (the stub's "x" is no match)
    assert hashed == [path]
