"""Batch runs: records, resumability under a real kill -9, workers, config guard, errors.

The methods are scripted ones that a plugin module (written to a temp folder, passed as
`plugins` / `--plugin`) registers, and the LLM is `scripted:` (no model); this checks the
batch's control flow, not any method. The index is a real
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
from typing import Any

import pytest
from click.testing import CliRunner, Result

from engine.questions.record import Question
from engine.runs.batch import BatchOptions, run_batch, select_questions
from engine.runs.handout import BatchError
from engine.runs.run_folder import read_records, repair_records
from ingest.base.errors import InputError, ModelError

REPO = Path(__file__).resolve().parents[1]
FAKE_MODULE = "fake_methods_for_batch"
FAKE_SOURCE = '''
"""A plugin for tests/test_batch.py: registers scripted methods (oracle, slow, flaky, broken-model)."""
import os
import time

from engine.access.graph import EvidencePath
from engine.methods.registry import register
from engine.methods.spec import MethodSpec
from engine.questions.record import AnswerRecord
from ingest.base.errors import ModelError


def run(question, ctx, config, method):
    log = os.environ.get("FAKE_PID_LOG")
    if log:
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()}\\n")
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
    )


for _name in ("oracle", "slow", "flaky", "broken-model"):
    register(MethodSpec(_name, lambda q, c, cfg, _m=_name: run(q, c, cfg, _m),
                        {"beam": 3, "temperature": 0.0}, "scripted test method"))
'''


@pytest.fixture(scope="module")
def fake_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fake-methods")
    (folder / f"{FAKE_MODULE}.py").write_text(FAKE_SOURCE, encoding="utf-8")
    return folder


@pytest.fixture
def fake_backend(fake_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(fake_dir))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake_dir), str(REPO)]))  # for spawned workers
    return fake_dir


def _ids(path: Path) -> list[str]:
    records, problems = read_records(path)
    assert not problems, problems
    return [r["id"] for r in records]


def _options(index: Path, questions: Path, out: Path, methods: list[str], **kwargs: Any) -> BatchOptions:
    kwargs.setdefault("llm", "scripted:")
    kwargs.setdefault("plugins", [FAKE_MODULE])
    return BatchOptions(index=index, questions=questions, methods=methods, out=out, **kwargs)


def test_batch_writes_records_and_run_json(fake_backend: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    report = run_batch(_options(pq2h_index, pq2h_questions, out, ["oracle", "flaky"], limit=12))
    assert report.ran == 24 and report.errors == 1 and report.already_done == 0
    oracle = [json.loads(line) for line in (out / "oracle.jsonl").read_text().splitlines()]
    assert [r["id"] for r in oracle] == [f"PQ-2H-{i}" for i in range(1, 13)]
    first = oracle[0]
    assert first["method"] == "oracle" and first["prediction"] == "united_kingdom"
    assert first["correct"]["hits1"] is True and first["correct"]["paper_em"] is True
    assert first["extra"]["gold"]["relations"] == ["spouse", "nationality"]
    assert first["llm_calls"] == [] and first["extra"]["llm_summary"]["calls"] == 0  # no model asked
    flaky = {r["id"]: r for r in map(json.loads, (out / "flaky.jsonl").read_text().splitlines())}
    assert flaky["PQ-2H-3"]["error"] == "RuntimeError: scripted failure"  # recorded, batch went on
    assert len(flaky) == 12
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "complete"
    assert run["model"]["fingerprint"] == "scripted:none"
    assert len(run["index"]["fingerprint"]) == 16
    assert run["questions"]["count"] == 12 and run["questions"]["ids"][0] == "PQ-2H-1"
    assert run["methods"]["oracle"]["config"] == {"beam": 3, "temperature": 0.0}
    assert run["methods"]["oracle"]["config_hash"] == first["config_hash"]  # one hash, record and run
    assert "python" in run["versions"] and run["command"]
    # Running again is a no-op: everything is done.
    again = run_batch(_options(pq2h_index, pq2h_questions, out, ["oracle", "flaky"], limit=12))
    assert again.ran == 0 and again.already_done == 24


def test_retry_errors_answers_failed_questions_again(fake_backend: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_batch(_options(pq2h_index, pq2h_questions, out, ["flaky"], limit=5))
    report = run_batch(_options(pq2h_index, pq2h_questions, out, ["flaky"], limit=5, retry_errors=True))
    assert report.ran == 1 and report.already_done == 4
    assert sorted(_ids(out / "flaky.jsonl")) == sorted(f"PQ-2H-{i}" for i in range(1, 6))


def test_config_change_is_refused_unless_forced(fake_backend: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_batch(_options(pq2h_index, pq2h_questions, out, ["oracle"], limit=3))
    with pytest.raises(BatchError, match=r"oracle config \(beam 3 -> 5\).*--restart.*--force-config"):
        run_batch(_options(pq2h_index, pq2h_questions, out, ["oracle"], limit=3, settings=["beam=5"]))
    with pytest.raises(BatchError, match="questions limit"):
        run_batch(_options(pq2h_index, pq2h_questions, out, ["oracle"], limit=4))
    replies = tmp_path / "replies.json"
    replies.write_text("[]")
    with pytest.raises(BatchError, match="model"):
        run_batch(_options(pq2h_index, pq2h_questions, out, ["oracle"], limit=3, llm=f"scripted:{replies}"))
    # A new method may join the run; a forced change is recorded.
    run_batch(_options(pq2h_index, pq2h_questions, out, ["oracle", "slow"], limit=3))
    run_batch(_options(pq2h_index, pq2h_questions, out, ["oracle"], limit=3, settings=["oracle.beam=5"], force_config=True))
    run = json.loads((out / "run.json").read_text())
    assert run["methods"]["oracle"]["config"]["beam"] == 5 and "slow" in run["methods"]
    assert "oracle config (beam 3 -> 5)" in run["history"][0]["forced"][0]


def test_a_config_change_of_a_method_without_records_needs_no_flag(fake_backend: Path, pq2h_index: Path,
                                                                   pq2h_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_batch(_options(pq2h_index, pq2h_questions, out, ["oracle", "slow"], limit=3))
    (out / "slow.jsonl").write_text("")  # its records moved away by hand: nothing left to mix
    report = run_batch(_options(pq2h_index, pq2h_questions, out, ["slow"], limit=3, settings=["slow.beam=5"]))
    assert report.ran == 3
    run = json.loads((out / "run.json").read_text())
    assert run["methods"]["slow"]["config"]["beam"] == 5 and run["methods"]["oracle"]["config"]["beam"] == 3
    with pytest.raises(BatchError, match=r"slow config \(beam 5 -> 7\)"):  # now it has records again
        run_batch(_options(pq2h_index, pq2h_questions, out, ["slow"], limit=3, settings=["slow.beam=7"]))


def test_settings_and_methods_are_checked(fake_backend: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown method nope"):
        run_batch(_options(pq2h_index, pq2h_questions, tmp_path / "a", ["oracle", "nope"]))
    with pytest.raises(InputError, match="no such config key; known keys: beam, temperature"):
        run_batch(_options(pq2h_index, pq2h_questions, tmp_path / "b", ["oracle"], settings=["bean=2"]))
    with pytest.raises(InputError, match="plugin module 'no_such_plugin' not found"):
        run_batch(_options(pq2h_index, pq2h_questions, tmp_path / "c", ["oracle"], plugins=["no_such_plugin"]))


def test_fatal_model_error_stops_the_batch(fake_backend: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with pytest.raises(ModelError, match="vanished"):
        run_batch(_options(pq2h_index, pq2h_questions, out, ["oracle", "broken-model"], limit=3))
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
            "--methods", "oracle,slow", "--out", str(out), "--limit", "40", "--llm", "scripted:",
            "--plugin", FAKE_MODULE, *extra]


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
    fake_backend: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path, workers: int
) -> None:
    out = tmp_path / "run"
    pid_log = tmp_path / "pids.txt"
    env = {**os.environ, "FAKE_DELAY": "0.04", "FAKE_PID_LOG": str(pid_log)}
    command = _batch_command(pq2h_index, pq2h_questions, out, "--workers", str(workers))
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


def test_a_second_writer_is_refused(fake_backend: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = {**os.environ, "FAKE_DELAY": "0.05"}
    proc = subprocess.Popen(_batch_command(pq2h_index, pq2h_questions, out), cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for_records(out, 1, proc)
        second = subprocess.run(_batch_command(pq2h_index, pq2h_questions, out), cwd=REPO, env=env,
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert "another batch is writing to this run folder" in second.stderr
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.slow
def test_real_io_method_end_to_end(pq2h_index: Path, pq2h_questions: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real io method with the default GGUF model: records carry real LLM costs."""
    from engine.llm.models import resolve_local
    from engine.runs.evaluate import evaluate_run

    pytest.importorskip("llama_cpp")
    try:
        resolve_local(None)
    except ModelError as exc:
        pytest.skip(f"default model not installed: {exc}")
    out = tmp_path / "run"
    report = run_batch(_options(pq2h_index, pq2h_questions, out, ["io"], limit=2, llm=None, plugins=[]))
    assert report.ran == 2 and report.errors == 0
    records = [json.loads(line) for line in (out / "io.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ["PQ-2H-1", "PQ-2H-2"]
    assert all(r["prediction"] and r["llm_calls"][0]["prompt_tokens"] > 0 for r in records)
    assert json.loads((out / "run.json").read_text())["model"]["fingerprint"].startswith("llama.cpp-")
    scores = evaluate_run(out)["methods"]["io"]
    assert scores["scored"] == 2 and scores["llm_calls"] >= 1 and scores["missing"] == 0


# ---- the CLI: --format, --sample/--seed, --limit, resume (scripted methods, in process) --------


def _cli_batch(index: Path, questions: Path, out: Path, *extra: str, methods: str = "oracle") -> Result:
    from cli import main

    return CliRunner().invoke(main, ["batch", "--index", str(index), "--questions", str(questions),
                                     "--methods", methods, "--out", str(out), "--llm", "scripted:",
                                     "--plugin", FAKE_MODULE, *extra])


def _selection(out: Path, method: str = "oracle") -> dict[str, Any]:
    """run.json's record of the questions selected; the record file holds exactly those, in order."""
    questions: dict[str, Any] = json.loads((out / "run.json").read_text())["questions"]
    assert _ids(out / f"{method}.jsonl") == questions["ids"]
    assert questions["count"] == len(questions["ids"])
    return questions


def _pq_lines(pq2h_questions: Path, count: int) -> str:
    return "".join(pq2h_questions.read_text(encoding="utf-8").splitlines(keepends=True)[:count])


def test_cli_format_can_be_forced(fake_backend: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path) -> None:
    # PathQuestion lines in a file named like JSONL: detection goes by the name and fails...
    misnamed = tmp_path / "pq.jsonl"
    misnamed.write_text(_pq_lines(pq2h_questions, 4), encoding="utf-8")
    auto = _cli_batch(pq2h_index, misnamed, tmp_path / "auto")
    assert auto.exit_code == 2
    assert f"{misnamed}:1: not valid JSON" in auto.output
    assert not (tmp_path / "auto").exists()  # refused before the run folder was made
    # ...and --format reads it as what it is.
    out = tmp_path / "forced"
    forced = _cli_batch(pq2h_index, misnamed, out, "--format", "pathquestion")
    assert forced.exit_code == 0, forced.output
    assert ": 4 answered now" in forced.output
    selection = _selection(out)
    assert selection["format"] == "pathquestion" and selection["ids"] == [f"pq-{i}" for i in range(1, 5)]
    first = read_records(out / "oracle.jsonl")[0][0]
    assert first["prediction"] == "united_kingdom" and first["correct"]["hits1"] is True
    assert first["extra"]["gold"]["relations"] == ["spouse", "nationality"]  # PathQuestion's gold path
    # run.json keeps the format that was used, so a resume that says it again (or that detects
    # the same format) is the same run.
    again = _cli_batch(pq2h_index, misnamed, out, "--format", "pathquestion")
    assert again.exit_code == 0 and ": 0 answered now" in again.output and "), 4 already done" in again.output
    same = _cli_batch(pq2h_index, pq2h_questions, tmp_path / "same", "--format", "pathquestion", "--limit", "2")
    assert same.exit_code == 0, same.output
    detected = _cli_batch(pq2h_index, pq2h_questions, tmp_path / "same", "--limit", "2")
    assert detected.exit_code == 0, detected.output
    assert ": 0 answered now" in detected.output and "), 2 already done" in detected.output


@pytest.mark.parametrize(("fmt", "problem"), [
    ("metaqa", ":1: expected 'question<TAB>answers', got 3 fields"),
    ("json", ": not valid JSON"),
    ("jsonl", ":1: not valid JSON"),
])
def test_cli_wrong_format_names_the_file(fake_backend: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path,
                                         fmt: str, problem: str) -> None:
    out = tmp_path / "run"
    result = _cli_batch(pq2h_index, pq2h_questions, out, "--format", fmt)
    assert result.exit_code == 2
    assert f"Error: {pq2h_questions}{problem}" in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_cli_metaqa_file_as_pathquestion_names_file_and_line(fake_backend: Path, pq2h_index: Path, shared_data: Path,
                                                            tmp_path: Path) -> None:
    questions = shared_data / "metaqa" / "questions" / "1-hop" / "qa_dev.txt"
    result = _cli_batch(pq2h_index, questions, tmp_path / "run", "--format", "pathquestion")
    assert result.exit_code == 2
    assert f"{questions}:1: expected 'question<TAB>answer(...)<TAB>path', got 2 fields" in result.output
    unknown = _cli_batch(pq2h_index, questions, tmp_path / "run", "--format", "csv")
    assert unknown.exit_code == 2 and "'csv' is not one of" in unknown.output


def test_cli_sample_seed_and_limit(fake_backend: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path) -> None:
    def batch(name: str, *args: str) -> dict[str, Any]:
        result = _cli_batch(pq2h_index, pq2h_questions, tmp_path / name, *args)
        assert result.exit_code == 0, result.output
        return _selection(tmp_path / name)

    a = batch("a", "--sample", "5", "--seed", "1")
    b = batch("b", "--sample", "5", "--seed", "1")
    c = batch("c", "--sample", "5", "--seed", "2")
    assert (a["sample"], a["seed"], a["limit"], a["count"]) == (5, 1, None, 5)
    assert b["ids"] == a["ids"]  # same seed, same questions
    assert c["seed"] == 2 and c["ids"] != a["ids"]  # another seed, another sample
    lines = [int(i.rsplit("-", 1)[1]) for i in a["ids"]]
    assert lines == sorted(lines) and len(set(lines)) == 5 and lines != [1, 2, 3, 4, 5]  # file order, not the head
    assert all(1 <= n <= 1908 for n in lines)
    # --limit takes the first N of the sample; alone, the first N of the file.
    d = batch("d", "--sample", "5", "--seed", "1", "--limit", "2")
    assert d["ids"] == a["ids"][:2] and (d["sample"], d["seed"], d["limit"]) == (5, 1, 2)
    e = batch("e", "--limit", "3")
    assert e["ids"] == ["PQ-2H-1", "PQ-2H-2", "PQ-2H-3"] and (e["sample"], e["seed"], e["limit"]) == (None, None, 3)
    # Without --sample the seed selects nothing: not recorded, and no reason to refuse a resume.
    f = batch("e", "--limit", "3", "--seed", "9")
    assert f["ids"] == e["ids"] and f["seed"] is None
    # With --sample it is part of the run: resuming with another seed is refused.
    refused = _cli_batch(pq2h_index, pq2h_questions, tmp_path / "a", "--sample", "5", "--seed", "2")
    assert refused.exit_code == 2
    assert "questions seed (1 -> 2)" in refused.output and "--force-config" in refused.output
    assert _selection(tmp_path / "a")["ids"] == a["ids"]  # untouched
    # A sample at least as large as the file is the whole file.
    small = tmp_path / "small.txt"
    small.write_text(_pq_lines(pq2h_questions, 4), encoding="utf-8")
    result = _cli_batch(pq2h_index, small, tmp_path / "all", "--sample", "10", "--seed", "3")
    assert result.exit_code == 0, result.output
    assert _selection(tmp_path / "all")["ids"] == [f"small-{i}" for i in range(1, 5)]
    for option in ("--sample", "--limit"):
        bad = _cli_batch(pq2h_index, pq2h_questions, tmp_path / "bad", option, "0")
        assert bad.exit_code == 2 and option in bad.output
    assert not (tmp_path / "bad").exists()


def test_cli_resume_writes_no_duplicates(fake_backend: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ("--sample", "6", "--seed", "7")
    first = _cli_batch(pq2h_index, pq2h_questions, out, *args, methods="oracle,flaky")
    assert first.exit_code == 0, first.output
    assert "6 questions x 2 methods: 12 answered now" in first.output and "), 0 already done" in first.output
    ids = _selection(out)["ids"]
    assert _ids(out / "flaky.jsonl") == ids
    files = {m: (out / f"{m}.jsonl").read_bytes() for m in ("oracle", "flaky")}
    created = json.loads((out / "run.json").read_text())["created"]

    # The same command again: nothing left to do, nothing written.
    second = _cli_batch(pq2h_index, pq2h_questions, out, *args, methods="oracle,flaky")
    assert second.exit_code == 0, second.output
    assert ": 0 answered now (oracle 0 (0 errors), flaky 0 (0 errors)), 12 already done" in second.output
    assert {m: (out / f"{m}.jsonl").read_bytes() for m in ("oracle", "flaky")} == files
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "complete" and run["created"] == created
    assert run["last_session"]["ran"] == 0 and run["last_session"]["already_done"] == 12

    # A run that stopped part way (two oracle records kept, a torn third): the rerun answers
    # only what is missing and each question ends with exactly one record per method.
    kept = b"".join(files["oracle"].splitlines(keepends=True)[:2])
    (out / "oracle.jsonl").write_bytes(kept + files["oracle"].splitlines(keepends=True)[2][:25])
    third = _cli_batch(pq2h_index, pq2h_questions, out, *args, methods="oracle,flaky")
    assert third.exit_code == 0, third.output
    assert ": 4 answered now (oracle 4 (0 errors), flaky 0 (0 errors)), 8 already done" in third.output
    assert _ids(out / "oracle.jsonl") == ids and _ids(out / "flaky.jsonl") == ids
    assert (out / "flaky.jsonl").read_bytes() == files["flaky"]
    fourth = _cli_batch(pq2h_index, pq2h_questions, out, *args, methods="oracle,flaky")
    assert fourth.exit_code == 0 and ": 0 answered now" in fourth.output and "), 12 already done" in fourth.output
    assert _ids(out / "oracle.jsonl") == ids
    # eval agrees: no duplicates, nothing missing.
    from engine.runs.evaluate import evaluate_run

    summary = evaluate_run(out, write=False)["methods"]
    for method in ("oracle", "flaky"):
        assert (summary[method]["records"], summary[method]["duplicates"], summary[method]["missing"]) == (6, 0, 0)


def test_cli_out_that_is_a_file_is_a_clear_error(fake_backend: Path, pq2h_index: Path, pq2h_questions: Path,
                                                 tmp_path: Path) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("not a run folder")
    for out, says in ((blocker, "a file is in the way"), (blocker / "run", "got a file")):
        result = _cli_batch(pq2h_index, pq2h_questions, out, methods="oracle")
        assert result.exit_code == 2 and says in result.output and "Traceback" not in result.output
    assert blocker.read_text() == "not a run folder"
