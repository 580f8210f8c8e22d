"""Batch runs: records, resumability under a real kill -9, workers, config guard, errors.

The methods are a scripted fake backend (written to a temp folder and named by
LOCALKG_TEST_METHODS); it checks the batch's control flow, not any method. The index is a real
one built from PathQuestion's 2H KB, and the questions are PathQuestion's real file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.batch import (
    TEST_METHODS_ENV,
    BatchError,
    BatchOptions,
    read_records,
    repair_records,
    run_batch,
    select_questions,
)
from engine.record import Question
from ingest.errors import InputError, ModelError

REPO = Path(__file__).resolve().parents[1]
FAKE_MODULE = "fake_methods_for_batch"
FAKE_SOURCE = '''
"""Scripted methods backend for tests/test_batch.py (the engine.methods.base interface)."""
import os
import time
from dataclasses import dataclass
from pathlib import Path

from engine.record import AnswerRecord, EvidencePath
from ingest.errors import ModelError

METHODS = {"oracle": None, "slow": None, "flaky": None, "broken-model": None}


@dataclass
class FakeLLM:
    fingerprint: str


@dataclass
class Context:
    index: Path
    llm: FakeLLM


def model_fingerprint(llm):
    return "fake:" + (llm or "default")


def open_context(index, llm, *, cache=True):
    log = os.environ.get("FAKE_PID_LOG")
    if log:
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()}\\n")
    return Context(Path(index), FakeLLM(model_fingerprint(llm)))


def default_config(method):
    return {"beam": 3, "temperature": 0.0}


def run_question(method, question, ctx, config=None):
    time.sleep(float(os.environ.get("FAKE_DELAY", "0")))
    if method == "flaky" and question.id.endswith("3"):
        raise RuntimeError("scripted failure")
    if method == "broken-model":
        raise ModelError("model file vanished")
    good = method == "oracle" and question.answers
    prediction = question.answers[0] if good else "nobody"
    relation = (question.gold_relations or ["r"])[0]
    return AnswerRecord(
        id=question.id, question=question.question, answers=question.answers, method=method,
        prediction=prediction, predictions=[prediction], answer_source="kg" if good else "llm",
        paths=[EvidencePath(source="kg", triples=[[question.topic_entities[0], relation, prediction]],
                            relation_ids=[relation])],
        llm_calls=[{"stage": "answer", "prompt_tokens": 100, "cached_tokens": 20, "completion_tokens": 5,
                    "seconds": 0.01, "cache_hit": False}],
        seconds=0.01, config_hash="fake",
    )
'''


@pytest.fixture(scope="module")
def fake_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fake-methods")
    (folder / f"{FAKE_MODULE}.py").write_text(FAKE_SOURCE, encoding="utf-8")
    return folder


@pytest.fixture
def fake_backend(fake_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(fake_dir))
    monkeypatch.setenv(TEST_METHODS_ENV, FAKE_MODULE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake_dir), str(REPO)]))  # for spawned workers
    return fake_dir


@pytest.fixture(scope="module")
def pq_index(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    from index.build import build_index
    from index.kg_stage import KgSource

    out = tmp_path_factory.mktemp("indexes") / "pq2h"
    build_index(out, [KgSource(shared_data / "pathquestion" / "2H-kb.txt", "tsv")], [])
    return out


@pytest.fixture(scope="module")
def pq_questions(shared_data: Path) -> Path:
    return shared_data / "pathquestion" / "PQ-2H.txt"


def _ids(path: Path) -> list[str]:
    records, problems = read_records(path)
    assert not problems, problems
    return [r["id"] for r in records]


def _options(index: Path, questions: Path, out: Path, methods: list[str], **kwargs: object) -> BatchOptions:
    return BatchOptions(index=index, questions=questions, methods=methods, out=out, **kwargs)  # type: ignore[arg-type]


def test_batch_writes_records_and_run_json(fake_backend: Path, pq_index: Path, pq_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    report = run_batch(_options(pq_index, pq_questions, out, ["oracle", "flaky"], limit=12))
    assert report.ran == 24 and report.errors == 1 and report.already_done == 0
    oracle = [json.loads(line) for line in (out / "oracle.jsonl").read_text().splitlines()]
    assert [r["id"] for r in oracle] == [f"PQ-2H-{i}" for i in range(1, 13)]
    first = oracle[0]
    assert first["method"] == "oracle" and first["prediction"] == "united_kingdom"
    assert first["correct"]["hits1"] is True and first["correct"]["paper_em"] is True
    assert first["extra"]["gold"]["relations"] == ["spouse", "nationality"]
    assert first["llm_calls"][0]["prompt_tokens"] == 100
    flaky = {r["id"]: r for r in map(json.loads, (out / "flaky.jsonl").read_text().splitlines())}
    assert flaky["PQ-2H-3"]["error"] == "RuntimeError: scripted failure"  # recorded, batch went on
    assert len(flaky) == 12
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "complete"
    assert run["model"]["fingerprint"] == "fake:default"
    assert len(run["index"]["fingerprint"]) == 16
    assert run["questions"]["count"] == 12 and run["questions"]["ids"][0] == "PQ-2H-1"
    assert run["methods"]["oracle"]["config"] == {"beam": 3, "temperature": 0.0}
    assert "python" in run["versions"] and run["command"]
    # Running again is a no-op: everything is done.
    again = run_batch(_options(pq_index, pq_questions, out, ["oracle", "flaky"], limit=12))
    assert again.ran == 0 and again.already_done == 24


def test_retry_errors_answers_failed_questions_again(fake_backend: Path, pq_index: Path, pq_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_batch(_options(pq_index, pq_questions, out, ["flaky"], limit=5))
    report = run_batch(_options(pq_index, pq_questions, out, ["flaky"], limit=5, retry_errors=True))
    assert report.ran == 1 and report.already_done == 4
    assert sorted(_ids(out / "flaky.jsonl")) == sorted(f"PQ-2H-{i}" for i in range(1, 6))


def test_config_change_is_refused_unless_forced(fake_backend: Path, pq_index: Path, pq_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_batch(_options(pq_index, pq_questions, out, ["oracle"], limit=3))
    with pytest.raises(BatchError, match=r"oracle config \(beam\).*--force-config"):
        run_batch(_options(pq_index, pq_questions, out, ["oracle"], limit=3, settings=["beam=5"]))
    with pytest.raises(BatchError, match="questions limit"):
        run_batch(_options(pq_index, pq_questions, out, ["oracle"], limit=4))
    with pytest.raises(BatchError, match="model"):
        run_batch(_options(pq_index, pq_questions, out, ["oracle"], limit=3, llm="other"))
    # A new method may join the run; a forced change is recorded.
    run_batch(_options(pq_index, pq_questions, out, ["oracle", "slow"], limit=3))
    run_batch(_options(pq_index, pq_questions, out, ["oracle"], limit=3, settings=["oracle.beam=5"], force_config=True))
    run = json.loads((out / "run.json").read_text())
    assert run["methods"]["oracle"]["config"]["beam"] == 5 and "slow" in run["methods"]
    assert "oracle config (beam)" in run["history"][0]["forced"][0]


def test_settings_and_methods_are_checked(fake_backend: Path, pq_index: Path, pq_questions: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown method nope"):
        run_batch(_options(pq_index, pq_questions, tmp_path / "a", ["oracle", "nope"]))
    with pytest.raises(InputError, match="no such config key; known keys: beam, temperature"):
        run_batch(_options(pq_index, pq_questions, tmp_path / "b", ["oracle"], settings=["bean=2"]))


def test_fatal_model_error_stops_the_batch(fake_backend: Path, pq_index: Path, pq_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with pytest.raises(ModelError, match="vanished"):
        run_batch(_options(pq_index, pq_questions, out, ["oracle", "broken-model"], limit=3))
    assert json.loads((out / "run.json").read_text())["status"] == "failed"
    assert _ids(out / "oracle.jsonl") == ["PQ-2H-1"]  # what was answered before the stop is kept


def test_select_questions_is_seeded_and_ordered() -> None:
    questions = [Question(id=str(i), question=f"q{i}") for i in range(100)]
    a = select_questions(questions, sample=10, seed=3)
    assert [q.id for q in a] == [q.id for q in select_questions(questions, sample=10, seed=3)]
    assert [int(q.id) for q in a] == sorted(int(q.id) for q in a)
    assert a != select_questions(questions, sample=10, seed=4)
    assert [q.id for q in select_questions(questions, sample=10, seed=3, limit=2)] == [q.id for q in a[:2]]
    assert len(select_questions(questions, limit=5)) == 5


def test_repair_cuts_only_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_bytes(b'{"id": "a"}\n{"id": "b"}\n{"id": "c", "pred')
    assert repair_records(path) == len(b'{"id": "c", "pred')
    assert path.read_bytes() == b'{"id": "a"}\n{"id": "b"}\n'
    assert repair_records(path) == 0
    path.write_bytes(b'{"id": "only", "torn')
    repair_records(path)
    assert path.read_bytes() == b""


# ---- real processes --------------------------------------------------------------------------


def _batch_command(index: Path, questions: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, str(REPO / "cli.py"), "batch", "--index", str(index), "--questions", str(questions),
            "--methods", "oracle,slow", "--out", str(out), "--limit", "40", *extra]


def _wait_for_records(out: Path, count: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = sum(len(p.read_bytes().splitlines()) for p in out.glob("*.jsonl"))
        if done >= count:
            return
        if proc.poll() is not None:
            raise AssertionError(f"batch ended early: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.05)
    raise AssertionError("batch wrote too few records in time")


def _assert_complete(out: Path, expected: list[str]) -> None:
    for method in ("oracle", "slow"):
        ids = _ids(out / f"{method}.jsonl")
        assert sorted(ids) == sorted(expected), method  # exactly one record per question


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state


@pytest.mark.parametrize("workers", [1, 2])
def test_kill_9_then_resume_gives_exactly_one_record_each(
    fake_backend: Path, pq_index: Path, pq_questions: Path, tmp_path: Path, workers: int
) -> None:
    out = tmp_path / "run"
    pid_log = tmp_path / "pids.txt"
    env = {**os.environ, "FAKE_DELAY": "0.04", "FAKE_PID_LOG": str(pid_log)}
    command = _batch_command(pq_index, pq_questions, out, "--workers", str(workers))
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for_records(out, 12, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    # Workers notice their parent is gone and stop.
    worker_pids = [int(p) for p in pid_log.read_text().split()] if workers > 1 else []
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in worker_pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in worker_pids), "orphaned workers still running"
    # (the kill may itself have torn a line: count only whole records)
    partial = {m: len(read_records(out / f"{m}.jsonl")[0]) for m in ("oracle", "slow")}
    assert 0 < sum(partial.values()) < 80
    # Simulate the worst moment for the kill: in the middle of writing a line.
    with (out / "oracle.jsonl").open("ab") as handle:
        handle.write(b'{"id": "PQ-2H-39", "method": "oracle", "predic')

    done = subprocess.run(command, cwd=REPO, env={**env, "FAKE_DELAY": "0"}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "already done" in done.stdout
    expected = [f"PQ-2H-{i}" for i in range(1, 41)]
    _assert_complete(out, expected)
    assert json.loads((out / "run.json").read_text())["status"] == "complete"

    # And eval reads the finished run.
    evaluated = subprocess.run([sys.executable, str(REPO / "cli.py"), "eval", str(out), "--json"], cwd=REPO,
                               env=env, capture_output=True, text=True, timeout=60)
    assert evaluated.returncode == 0, evaluated.stderr
    summary = json.loads(evaluated.stdout)
    assert summary["methods"]["oracle"]["hits1"] == 1.0 and summary["methods"]["oracle"]["missing"] == 0
    assert summary["methods"]["slow"]["hits1"] == 0.0


def test_a_second_writer_is_refused(fake_backend: Path, pq_index: Path, pq_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = {**os.environ, "FAKE_DELAY": "0.05"}
    proc = subprocess.Popen(_batch_command(pq_index, pq_questions, out), cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for_records(out, 1, proc)
        second = subprocess.run(_batch_command(pq_index, pq_questions, out), cwd=REPO, env=env,
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert "another batch is writing to this run folder" in second.stderr
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.slow
def test_real_io_method_end_to_end(pq_index: Path, pq_questions: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real engine.methods.base with the default GGUF model: records carry real LLM costs."""
    from engine.evaluate import evaluate_run
    from engine.models import resolve_local

    monkeypatch.delenv(TEST_METHODS_ENV, raising=False)
    pytest.importorskip("llama_cpp")
    try:
        resolve_local(None)
    except ModelError as exc:
        pytest.skip(f"default model not installed: {exc}")
    out = tmp_path / "run"
    report = run_batch(_options(pq_index, pq_questions, out, ["io"], limit=2))
    assert report.ran == 2 and report.errors == 0
    records = [json.loads(line) for line in (out / "io.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ["PQ-2H-1", "PQ-2H-2"]
    assert all(r["prediction"] and r["llm_calls"][0]["prompt_tokens"] > 0 for r in records)
    assert json.loads((out / "run.json").read_text())["model"]["fingerprint"].startswith("llama.cpp-")
    scores = evaluate_run(out)["methods"]["io"]
    assert scores["scored"] == 2 and scores["llm_calls"] >= 1 and scores["missing"] == 0
