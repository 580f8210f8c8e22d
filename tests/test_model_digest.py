"""Model files given by path (issue 24, item 6).

- A batch run records the file's sha256 (with its resolved path and size) in run.json; the digest
  is computed on the file's first use and remembered per file identity, so a resume does not
  hash it again.
- A resumed run refuses another file under the same path, with a message that says what to do
  (before: an interrupted run started again by itself on the other file); --restart starts again.
- `models verify PATH [--sha256 HEX]` re-reads the file and compares it with the given digest,
  else the one recorded on its first use.
- A .gguf with damaged tensor data (random bytes) used to load and print garbage; llama.cpp's
  own tensor check (`check_tensors`) now refuses it on first use and in `models verify`.

Uses copies of the real test model (smollm2-135m, 98 MB) in a temp folder; the batch answers with
a plugin method that never calls the model, so no model is loaded.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import cli
from engine.llm import model_checksums, models
from engine.llm.gguf_header import check_gguf
from engine.llm.model_registry import REGISTRY
from engine.runs.batch import BatchOptions, run_batch
from engine.runs.handout import BatchError
from index.build import build_index
from index.kg_stage import KgSource
from ingest.base.errors import ModelError

REPO = Path(__file__).resolve().parents[1]
PLUGIN = "fake_methods_for_model_digest"
PLUGIN_SOURCE = '''
from engine.methods.registry import register
from engine.methods.spec import MethodSpec
from engine.questions.record import AnswerRecord


def run(question, ctx, config):
    prediction = question.answers[0] if question.answers else "nobody"
    return AnswerRecord(id=question.id, question=question.question, answers=question.answers,
                        method="digest-oracle", prediction=prediction, predictions=[prediction])


register(MethodSpec("digest-oracle", run, {}, "answers without calling the model"))
'''


@pytest.fixture
def model_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of smollm2-135m under a temp path; its checks are remembered in a temp folder."""
    source = models.model_path(REGISTRY["smollm2-135m"])
    if not source.is_file():
        pytest.skip("smollm2-135m is not installed")
    monkeypatch.setenv("LOCALKG_MODELS_DIR", str(tmp_path / "models"))
    target = tmp_path / "weights" / "model.gguf"
    target.parent.mkdir()
    shutil.copyfile(source, target)
    return target


def _rename_model(path: Path) -> None:
    """Another valid GGUF under the same path: one letter of `general.name` changed in place."""
    with path.open("r+b") as handle:
        head = handle.read(1 << 18)
        at = head.index(b"Smollm2 135M")
        handle.seek(at + len("Smollm2 135"))
        handle.write(b"X")


def _damage_tensors(path: Path) -> None:
    """4 KB of random bytes in the middle of the tensor data (header and size intact)."""
    with path.open("r+b") as handle:
        handle.seek(60_000_000)
        handle.write(os.urandom(4096))


@pytest.fixture
def small_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(plugins))
    out = tmp_path / "index"
    build_index(out, [KgSource(REPO / "data" / "demo" / "kg.ttl", "turtle")], [])
    return out


def _batch(index: Path, out: Path, llm: Path, **kwargs: object) -> BatchOptions:
    return BatchOptions(index=index, questions=REPO / "data" / "demo" / "questions.jsonl", methods=["digest-oracle"],
                        out=out, llm=str(llm), limit=3, plugins=[PLUGIN], **kwargs)


def _interrupt(run_dir: Path) -> None:
    """Make the finished run look like one stopped after its first question."""
    records = run_dir / "digest-oracle.jsonl"
    records.write_text(records.read_text().splitlines(keepends=True)[0])
    run = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps(run | {"status": "interrupted"}))


def test_run_json_records_the_sha256_of_a_model_given_by_path(model_file: Path, small_index: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    run_batch(_batch(small_index, run_dir, model_file))
    model = json.loads((run_dir / "run.json").read_text())["model"]
    assert model["path"] == str(model_file.resolve())
    assert model["sha256"] == REGISTRY["smollm2-135m"].sha256
    assert model["size"] == model_file.stat().st_size
    # a resume: the same file identity is not hashed (nor tensor-checked) again
    _interrupt(run_dir)
    monkeypatch.setattr(model_checksums.hashing, "file_sha256", lambda *a, **k: pytest.fail("hashed again"))
    monkeypatch.setattr(models, "check_tensor_data", lambda *a, **k: pytest.fail("checked again"))
    report = run_batch(_batch(small_index, run_dir, model_file))
    assert (report.already_done, report.ran) == (1, 2)


def test_a_resumed_run_refuses_another_file_under_the_same_path(model_file: Path, small_index: Path,
                                                               tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_batch(_batch(small_index, run_dir, model_file))
    recorded = json.loads((run_dir / "run.json").read_text())["model"]["fingerprint"].rpartition(":")[2]
    _interrupt(run_dir)
    _rename_model(model_file)  # another model, same path (and a new mtime)
    with pytest.raises(BatchError, match=r"model.gguf is not the model file the run in .* used: its sha256 is "
                                         r"[0-9a-f]{64}, run.json recorded " + recorded + r".*--restart"):
        run_batch(_batch(small_index, run_dir, model_file))
    assert len((run_dir / "digest-oracle.jsonl").read_text().splitlines()) == 1  # nothing moved or added
    assert json.loads((run_dir / "run.json").read_text())["model"]["fingerprint"].endswith(recorded)
    # the CLI says the same in one line, exit 2
    result = CliRunner().invoke(cli.main, [
        "batch", "--index", str(small_index), "--questions", str(REPO / "data" / "demo" / "questions.jsonl"),
        "--methods", "digest-oracle", "--plugin", PLUGIN, "--out", str(run_dir), "--llm", str(model_file),
        "--limit", "3",
    ])
    assert result.exit_code == 2, result.output
    assert "is not the model file the run" in result.output and "Traceback" not in result.output
    # --restart: a new run with this file, the old records moved aside
    report = run_batch(_batch(small_index, run_dir, model_file, restart=True))
    assert report.backup is not None and report.ran == 3
    assert json.loads((run_dir / "run.json").read_text())["model"]["sha256"] not in (None, recorded)


def test_models_verify_path_against_the_recorded_or_given_digest(model_file: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(cli.main, ["models", "verify", str(model_file)])
    assert first.exit_code == 0, first.output
    assert "no digest was recorded before" in first.output
    pinned = REGISTRY["smollm2-135m"].sha256
    assert pinned is not None and pinned in first.output
    again = runner.invoke(cli.main, ["models", "verify", str(model_file)])
    assert again.exit_code == 0 and "matches the sha256 recorded on its first use" in again.output
    given = runner.invoke(cli.main, ["models", "verify", str(model_file), "--sha256", pinned.upper()])
    assert given.exit_code == 0 and "matches the given sha256" in given.output
    wrong = runner.invoke(cli.main, ["models", "verify", str(model_file), "--sha256", "0" * 64])
    assert wrong.exit_code == 2 and "does not match the given sha256" in wrong.output
    bad_hex = runner.invoke(cli.main, ["models", "verify", str(model_file), "--sha256", "xyz"])
    assert bad_hex.exit_code == 2 and "64 hexadecimal digits" in bad_hex.output
    # damaged in place with its size and mtime kept (bit rot looks like this): the recorded digest
    st = model_file.stat()
    _rename_model(model_file)
    os.utime(model_file, ns=(st.st_atime_ns, st.st_mtime_ns))
    rotten = runner.invoke(cli.main, ["models", "verify", str(model_file)])
    assert rotten.exit_code == 2, rotten.output
    assert "does not match the sha256 recorded on its first use" in rotten.output
    assert "Traceback" not in rotten.output
    missing = runner.invoke(cli.main, ["models", "verify", str(model_file.with_name("gone.gguf"))])
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_damaged_tensor_data_is_refused_on_first_use(model_file: Path) -> None:
    _damage_tensors(model_file)
    check_gguf(model_file, "x")  # header and size are intact: only the tensor check sees it
    with pytest.raises(ModelError, match=r"model.gguf has damaged tensor data \(llama.cpp's tensor check: .*nan"):
        models.resolve_local(str(model_file))
    with pytest.raises(ModelError, match="damaged tensor data"):  # not remembered as checked
        models.resolve_local(str(model_file))
    result = CliRunner().invoke(cli.main, ["models", "verify", str(model_file)])
    assert result.exit_code == 2 and "damaged tensor data" in result.output
