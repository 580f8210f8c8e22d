"""Batch runs after a failure (issue 10, item 3 and the run holes of item 10):

- a failed or interrupted run starts again with the same command once its inputs are fixed
  (old records moved aside, nothing deleted, what changed said); a complete one is refused
  unless `--restart`;
- run.json's status is always true: a run that fails while starting says "failed", SIGTERM
  gives "interrupted", and a "running" left by kill -9 is reported stale, then corrected;
- a worker that dies (kill -9 of itself, in a plugin method) has its question answered again,
  and a question that kills two workers ends as an error record instead of stalling the run.

The methods are a plugin (scripted, no model; `scripted:` LLM): control flow, not answers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine.runs.batch import BatchOptions, run_batch
from engine.runs.handout import BatchError
from engine.runs.run_folder import read_records, run_status
from index.build import build_index
from index.kg_stage import KgSource
from ingest.base.errors import ModelError

REPO = Path(__file__).resolve().parents[1]
PLUGIN = "recovery_methods_for_tests"
PLUGIN_SOURCE = '''
"""Scripted methods for tests/test_batch_recovery.py."""
import os
import time
from pathlib import Path

from engine.methods.registry import register
from engine.methods.spec import MethodSpec
from engine.questions.record import AnswerRecord
from ingest.base.errors import ModelError


def answer(question, method):
    return AnswerRecord(id=question.id, question=question.question, answers=question.answers, method=method,
                        prediction=(question.answers or ["x"])[0], predictions=[])


def needs_fix(question, ctx, config):
    if os.environ.get("RECOVERY_BROKEN") and Path(os.environ["RECOVERY_BROKEN"]).exists():
        raise ModelError("the index is broken (scripted)")
    time.sleep(float(os.environ.get("RECOVERY_DELAY", "0")))
    return answer(question, "needs-fix")


def dies_once(question, ctx, config):
    marker = Path(os.environ["RECOVERY_MARKER"])
    if question.id == os.environ["RECOVERY_VICTIM"] and not marker.exists():
        marker.write_text(str(os.getpid()))
        os.kill(os.getpid(), 9)
    time.sleep(0.05)
    return answer(question, "dies-once")


def dies_always(question, ctx, config):
    if question.id == os.environ["RECOVERY_VICTIM"]:
        os._exit(70)
    return answer(question, "dies-always")


register(MethodSpec("needs-fix", needs_fix, {"beam": 3}, "fails while a marker file exists"))
register(MethodSpec("dies-once", dies_once, {}, "kills its own process once, on one question"))
register(MethodSpec("dies-always", dies_always, {}, "exits on one question, every time"))
'''


@pytest.fixture
def plugin(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path_factory.mktemp("recovery-plugin")
    (folder / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), str(REPO)]))  # spawned workers
    return folder


@pytest.fixture
def kb(tmp_path: Path, shared_data: Path) -> Path:
    copy = tmp_path / "kb.tsv"
    copy.write_bytes((shared_data / "pathquestion" / "2H-kb.txt").read_bytes())
    return copy


@pytest.fixture
def questions(shared_data: Path) -> Path:
    return shared_data / "pathquestion" / "PQ-2H.txt"


def _index(kb: Path, out: Path) -> Path:
    build_index(out, [KgSource(kb, "tsv")], [])
    return out


def _options(index: Path, questions: Path, out: Path, methods: list[str], **kwargs: Any) -> BatchOptions:
    return BatchOptions(index=index, questions=questions, methods=methods, out=out, llm="scripted:",
                        plugins=[PLUGIN], **kwargs)


def _run_json(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "run.json").read_text()))


def test_a_failed_run_starts_again_after_its_index_is_fixed(plugin: Path, kb: Path, questions: Path,
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    index, out = _index(kb, tmp_path / "ix"), tmp_path / "run"
    broken = tmp_path / "broken"
    broken.touch()
    monkeypatch.setenv("RECOVERY_BROKEN", str(broken))
    with pytest.raises(ModelError):
        run_batch(_options(index, questions, out, ["needs-fix"], limit=4))
    failed = _run_json(out)
    assert failed["status"] == "failed"
    (out / "needs-fix.jsonl").write_text('{"id": "PQ-2H-1", "prediction": "from the broken index"}\n')

    kb.write_text(kb.read_text() + "extra_entity\tfixed_relation\tother_entity\n")  # the fix
    _index(kb, index)
    broken.unlink()
    report = run_batch(_options(index, questions, out, ["needs-fix"], limit=4))  # the same command

    assert report.ran == 4 and report.already_done == 0  # the old record is not reused ...
    assert any(c.startswith("index fingerprint (") for c in report.restarted)
    assert report.backup is not None and report.backup.parent == out
    assert "from the broken index" in (report.backup / "needs-fix.jsonl").read_text()  # ... but kept
    assert json.loads((report.backup / "run.json").read_text())["status"] == "failed"
    run = _run_json(out)
    assert run["status"] == "complete" and run["index"]["fingerprint"] != failed["index"]["fingerprint"]
    assert run["history"][-1]["previous_status"] == "failed"
    assert "index fingerprint" in capsys.readouterr().err
    assert sorted(r["id"] for r in read_records(out / "needs-fix.jsonl")[0]) == [f"PQ-2H-{i}" for i in range(1, 5)]


def test_a_complete_run_is_refused_unless_restart(plugin: Path, kb: Path, questions: Path, tmp_path: Path) -> None:
    index, out = _index(kb, tmp_path / "ix"), tmp_path / "run"
    run_batch(_options(index, questions, out, ["needs-fix"], limit=3))
    with pytest.raises(BatchError, match=r"complete run .*needs-fix config \(beam 3 -> 4\).*--restart"):
        run_batch(_options(index, questions, out, ["needs-fix"], limit=3, settings=["beam=4"]))
    assert _run_json(out)["status"] == "complete"  # the refusal changed nothing
    report = run_batch(_options(index, questions, out, ["needs-fix"], limit=3, settings=["beam=4"], restart=True))
    assert report.ran == 3 and report.backup is not None
    assert len(read_records(report.backup / "needs-fix.jsonl")[0]) == 3
    assert _run_json(out)["methods"]["needs-fix"]["config"]["beam"] == 4


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_killed_runs_running_is_reported_stale_and_corrected(plugin: Path, kb: Path, questions: Path,
                                                               tmp_path: Path) -> None:
    index, out = _index(kb, tmp_path / "ix"), tmp_path / "run"
    run_batch(_options(index, questions, out, ["needs-fix"], limit=3))
    killed = _run_json(out) | {"status": "running", "writer": {"pid": _dead_pid(), "host": os.uname().nodename}}
    (out / "run.json").write_text(json.dumps(killed))  # what kill -9 leaves
    assert str(run_status(out)).startswith("interrupted (stale")
    # The next command fails while starting (a damaged record file): run.json still tells the truth.
    (out / "needs-fix.jsonl").write_text('{"id": "PQ-2H-1"}\nnot json\n{"id": "PQ-2H-2"}\n')
    with pytest.raises(BatchError, match="not a JSON record"):
        run_batch(_options(index, questions, out, ["needs-fix"], limit=3))
    run = _run_json(out)
    assert run["status"] == "failed" and run_status(out) == "failed"
    assert any("stale" in h for h in run["history"])


def test_sigterm_ends_the_run_as_interrupted(plugin: Path, kb: Path, questions: Path, tmp_path: Path) -> None:
    index, out = _index(kb, tmp_path / "ix"), tmp_path / "run"
    command = [sys.executable, str(REPO / "cli.py"), "batch", "--index", str(index), "--questions", str(questions),
               "--methods", "needs-fix", "--out", str(out), "--limit", "40", "--llm", "scripted:",
               "--plugin", PLUGIN]
    env = {**os.environ, "RECOVERY_DELAY": "0.05"}
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                (out / "needs-fix.jsonl").exists() and (out / "needs-fix.jsonl").read_bytes().count(b"\n") >= 2):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2
    assert _run_json(out)["status"] == "interrupted"


def test_a_dead_workers_question_is_answered_again(plugin: Path, kb: Path, questions: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    index, out = _index(kb, tmp_path / "ix"), tmp_path / "run"
    marker = tmp_path / "died"
    monkeypatch.setenv("RECOVERY_MARKER", str(marker))
    monkeypatch.setenv("RECOVERY_VICTIM", "PQ-2H-3")
    report = run_batch(_options(index, questions, out, ["dies-once"], limit=6, workers=2))
    assert marker.exists()  # a worker did die (kill -9 of itself) on PQ-2H-3
    records, problems = read_records(out / "dies-once.jsonl")
    assert not problems
    assert sorted(r["id"] for r in records) == [f"PQ-2H-{i}" for i in range(1, 7)]
    assert not any(r.get("error") for r in records)
    assert report.requeued == 1 and _run_json(out)["status"] == "complete"


def test_a_question_that_kills_two_workers_is_an_error_record(plugin: Path, kb: Path, questions: Path,
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index, out = _index(kb, tmp_path / "ix"), tmp_path / "run"
    monkeypatch.setenv("RECOVERY_VICTIM", "PQ-2H-2")
    report = run_batch(_options(index, questions, out, ["dies-always"], limit=4, workers=2))
    records = {r["id"]: r for r in read_records(out / "dies-always.jsonl")[0]}
    assert sorted(records) == [f"PQ-2H-{i}" for i in range(1, 5)]
    assert records["PQ-2H-2"]["error"].startswith("WorkerDied") and "70" in records["PQ-2H-2"]["error"]
    assert report.errors == 1 and report.requeued == 1
    assert _run_json(out)["status"] == "complete"
