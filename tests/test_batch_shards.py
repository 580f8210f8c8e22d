"""Sharded batch runs (`batch --shard K/N`) and `eval` over their folders as one run.

- the partition: disjoint, covering, stable across processes (not Python's salted hash), and
  taken after --sample/--limit, so the shards together are exactly the unsharded selection;
- bad specs and a folder resumed with another shard are refused, saying why;
- the shards' folders, scored together, give the unsharded run's numbers and records;
- a shard killed with kill -9 resumes with no record lost or doubled;
- eval refuses folders of different runs, a shard given twice and a question recorded in two
  folders, and reports missing shards with their questions.

The method is a scripted plugin (`scripted:` LLM): this checks control flow, not a method.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from engine.questions.datasets import read_questions
from engine.runs.batch import (
    BatchOptions,
    ShardSpec,
    parse_shard,
    run_batch,
    select_questions,
    shard_of,
    take_shard,
)
from engine.runs.evaluate import evaluate_run
from engine.runs.handout import BatchError
from engine.runs.run_folder import read_records
from engine.runs.shards import evaluate_paths, evaluate_shards
from ingest.base.errors import InputError

REPO = Path(__file__).resolve().parents[1]
PLUGIN = "shard_methods_for_tests"
PLUGIN_SOURCE = '''
"""A scripted method for tests/test_batch_shards.py: right unless the id ends in 7."""
import os
import time

from engine.methods.registry import register
from engine.methods.spec import MethodSpec
from engine.questions.record import AnswerRecord


def answer(question, ctx, config):
    time.sleep(float(os.environ.get("SHARD_DELAY", "0")))
    good = question.answers and not question.id.endswith("7")
    prediction = question.answers[0] if good else "nobody"
    return AnswerRecord(id=question.id, question=question.question, answers=question.answers,
                        method="half-right", prediction=prediction, predictions=[prediction])


register(MethodSpec("half-right", answer, {"beam": 3}, "scripted: right unless the id ends in 7"))
'''
# Metrics that measure this run's wall time, which differs between any two runs.
TIMES = {"seconds", "llm_seconds"}


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("shard-plugin")
    (folder / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
    return folder


@pytest.fixture
def plugin(plugin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(plugin_dir))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(plugin_dir), str(REPO)]))  # subprocesses
    return plugin_dir


def _options(index: Path, questions: Path, out: Path, **kwargs: Any) -> BatchOptions:
    return BatchOptions(index=index, questions=questions, methods=["half-right"], out=out, llm="scripted:",
                        plugins=[PLUGIN], **kwargs)


def _ids(path: Path) -> list[str]:
    records, problems = read_records(path)
    assert not problems, problems
    return [str(r["id"]) for r in records]


def _without_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k not in TIMES}
    return value


# ---- the partition ---------------------------------------------------------------------------


def test_shards_are_disjoint_covering_and_balanced() -> None:
    ids = [f"q{i}" for i in range(3000)]
    for count in (1, 2, 3, 7):
        parts = [[i for i in ids if shard_of(i, count) == k] for k in range(1, count + 1)]
        assert sorted(i for part in parts for i in part) == sorted(ids)  # covering, nothing twice
        assert min(map(len, parts)) > 0.8 * len(ids) / count  # a hash spreads them evenly


def test_the_partition_is_the_same_in_every_process() -> None:
    """Python's hash() is salted per process; the shard of an id must not be."""
    ids = ["PQ-2H-1", "WebQTest-12", "q42", "ünïcode-id"]
    here = [shard_of(i, 5) for i in ids]
    code = ("import json, sys; from engine.runs.batch import shard_of; "
            f"print(json.dumps([shard_of(i, 5) for i in {ids!r}]))")
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)})
        assert json.loads(out.stdout) == here
    # Pinned: a change of the hash would split old runs' shards differently. The definition is
    # simple enough to redo anywhere: blake2b (8-byte digest) of the UTF-8 id, big-endian, mod N, + 1.
    assert [shard_of("PQ-2H-1", 3), shard_of("q42", 3), shard_of("q43", 3)] == [3, 3, 1]
    for i in ids:
        digest = hashlib.blake2b(i.encode("utf-8"), digest_size=8).digest()
        assert shard_of(i, 5) == int.from_bytes(digest, "big") % 5 + 1


def test_shards_split_the_sampled_selection(pq2h_questions: Path) -> None:
    questions = read_questions(pq2h_questions, "pathquestion")
    chosen = select_questions(questions, sample=40, seed=3, limit=30)
    parts = [take_shard(chosen, ShardSpec(k, 4)) for k in range(1, 5)]
    assert sorted(q.id for part in parts for q in part) == sorted(q.id for q in chosen)
    assert all([q.id for q in part] == [q.id for q in chosen if q in part] for part in parts)  # file order kept


@pytest.mark.parametrize(("spec", "message"), [
    ("0/3", "between 1 and N"), ("4/3", "between 1 and N"), ("1/0", "between 1 and N"),
    ("a/b", "expected K/N"), ("3", "expected K/N"), ("-1/3", "expected K/N"), ("1/2/3", "expected K/N"),
])
def test_bad_shard_specs_are_refused(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_shard(spec)
    assert parse_shard(" 2/8 ") == ShardSpec(2, 8)


# ---- sharded runs ----------------------------------------------------------------------------


def test_sharded_runs_merged_by_eval_equal_the_unsharded_run(plugin: Path, pq2h_index: Path, pq2h_questions: Path,
                                                             tmp_path: Path) -> None:
    select = {"sample": 40, "seed": 1, "limit": 30}
    whole = tmp_path / "whole"
    run_batch(_options(pq2h_index, pq2h_questions, whole, **select))
    for k in (1, 2, 3):
        report = run_batch(_options(pq2h_index, pq2h_questions, tmp_path / "sharded" / f"shard-{k}",
                                    shard=f"{k}/3", **select))
        run = json.loads((report.out / "run.json").read_text())
        assert run["shard"]["index"] == k and run["shard"]["count"] == 3 and run["shard"]["selected"] == 30
        assert run["questions"]["ids"] == _ids(report.out / "half-right.jsonl")

    merged = evaluate_paths([tmp_path / "sharded"])
    assert len(merged) == 1 and merged[0]["status"] == "complete" and merged[0]["problems"] == []
    unsharded = evaluate_run(whole)
    assert merged[0]["questions"]["count"] == unsharded["questions"]["count"] == 30
    assert _without_times(merged[0]["methods"]) == _without_times(unsharded["methods"])
    assert 0 < merged[0]["methods"]["half-right"]["hits1"] < 1  # the metric is not trivially equal
    assert (tmp_path / "sharded" / "eval.json").exists()

    def answers(folder: Path) -> dict[str, Any]:
        return {str(r["id"]): (r["prediction"], r.get("correct")) for r in read_records(folder)[0]}

    by_shard: dict[str, Any] = {}
    for k in (1, 2, 3):
        by_shard |= answers(tmp_path / "sharded" / f"shard-{k}" / "half-right.jsonl")
    assert by_shard == answers(whole / "half-right.jsonl")

    # The same through the command line, the shard folders named one by one.
    result = CliRunner().invoke(__import__("cli").main, ["eval", *(str(tmp_path / "sharded" / f"shard-{k}")
                                                                  for k in (1, 2, 3))])
    assert result.exit_code == 0, result.output
    assert "Shards 1, 2, 3 of 3 merged (complete)" in result.output and "| half-right | 30 | 0 |" in result.output

    # A look at two of the three shards reports the third missing, and leaves the parent's eval.json alone.
    partial = evaluate_paths([tmp_path / "sharded" / "shard-1", tmp_path / "sharded" / "shard-3"])[0]
    assert partial["status"] == "incomplete" and partial["shards"]["missing"] == [2]
    assert partial["methods"]["half-right"]["missing"] == sum(1 for i in by_shard if shard_of(i, 3) == 2) > 0
    assert json.loads((tmp_path / "sharded" / "eval.json").read_text())["status"] == "complete"


def test_a_folder_keeps_its_shard(plugin: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "shard-1"
    run_batch(_options(pq2h_index, pq2h_questions, out, limit=10, shard="1/2"))
    for other in ("2/2", "1/3", None):
        with pytest.raises(BatchError, match=r"holds shard 1/2 of a run, and this command asks for"):
            run_batch(_options(pq2h_index, pq2h_questions, out, limit=10, shard=other, restart=True))
    whole = tmp_path / "whole"
    run_batch(_options(pq2h_index, pq2h_questions, whole, limit=10))
    with pytest.raises(BatchError, match=r"holds an unsharded run, and this command asks for --shard 1/2"):
        run_batch(_options(pq2h_index, pq2h_questions, whole, limit=10, shard="1/2"))
    assert run_batch(_options(pq2h_index, pq2h_questions, out, limit=10, shard="1/2")).ran == 0  # same spec: resumes


def test_an_empty_shard_completes(plugin: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path) -> None:
    """A Slurm array of more shards than questions: the empty ones succeed, and eval still merges."""
    ids = [q.id for q in read_questions(pq2h_questions, "pathquestion")[:2]]
    empty = next(k for k in range(1, 9) if all(shard_of(i, 8) != k for i in ids))
    for k in range(1, 9):
        run_batch(_options(pq2h_index, pq2h_questions, tmp_path / "runs" / f"s{k}", limit=2, shard=f"{k}/8"))
    assert json.loads((tmp_path / "runs" / f"s{empty}" / "run.json").read_text())["status"] == "complete"
    summary = evaluate_paths([tmp_path / "runs"])[0]
    assert summary["status"] == "complete" and summary["methods"]["half-right"]["records"] == 2


def test_a_killed_shard_resumes_without_loss_or_duplication(plugin: Path, pq2h_index: Path, pq2h_questions: Path,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "runs" / "shard-2"
    command = [sys.executable, str(REPO / "cli.py"), "batch", "--index", str(pq2h_index), "--questions",
               str(pq2h_questions), "--methods", "half-right", "--out", str(out), "--limit", "60",
               "--shard", "2/3", "--llm", "scripted:", "--plugin", PLUGIN]
    env = {**os.environ, "SHARD_DELAY": "0.1"}
    records = out / "half-right.jsonl"
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (records.exists() and records.read_bytes().count(b"\n") >= 3):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = _ids(records)
    expected = [q.id for q in take_shard(read_questions(pq2h_questions, "pathquestion")[:60], ShardSpec(2, 3))]
    assert 3 <= len(before) < len(expected)  # killed part way

    summary = evaluate_paths([out.parent])[0]  # eval sees the killed shard for what it is
    assert summary["status"] == "incomplete"
    assert any("shard 2/3" in p and "interrupted (stale" in p for p in summary["problems"])
    assert any("shards missing: 1/3, 3/3" in p for p in summary["problems"])

    done = subprocess.run(command, cwd=REPO, env={**os.environ, "SHARD_DELAY": "0"}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    after = _ids(records)
    assert sorted(after) == sorted(expected) and len(after) == len(set(after))
    assert after[:len(before)] == before  # the killed run's records kept as they were


# ---- eval refuses what is not one run ----------------------------------------------------------


def test_eval_refuses_shards_of_different_runs_and_duplicates(plugin: Path, pq2h_index: Path, pq2h_questions: Path,
                                                              tmp_path: Path) -> None:
    a1, a2 = tmp_path / "a" / "shard-1", tmp_path / "a" / "shard-2"
    run_batch(_options(pq2h_index, pq2h_questions, a1, limit=12, shard="1/2"))
    run_batch(_options(pq2h_index, pq2h_questions, a2, limit=12, shard="2/2"))
    other = tmp_path / "b" / "shard-2"
    run_batch(_options(pq2h_index, pq2h_questions, other, limit=13, shard="2/2"))
    with pytest.raises(InputError, match=r"b/shard-2 is not a shard of the same run as .*questions limit \(12 .* 13\)"):
        evaluate_shards([a1, other])
    beam = tmp_path / "c" / "shard-2"
    run_batch(_options(pq2h_index, pq2h_questions, beam, limit=12, shard="2/2", settings=["beam=4"]))
    with pytest.raises(InputError, match=r"half-right ran with another config in .*c/shard-2"):
        evaluate_shards([a1, beam])

    copy = tmp_path / "a" / "shard-1-again"
    shutil.copytree(a1, copy)
    with pytest.raises(InputError, match=r"shard 1/2 is given twice: .*shard-1 and .*shard-1-again"):
        evaluate_paths([tmp_path / "a"])
    shutil.rmtree(copy)

    # A record of shard 1's question slipped into shard 2's file: in two folders, refused.
    stray = (a1 / "half-right.jsonl").read_text().splitlines()[0]
    with (a2 / "half-right.jsonl").open("a") as handle:
        handle.write(stray + "\n")
    stray_id = json.loads(stray)["id"]
    with pytest.raises(InputError, match=rf"question {stray_id} has a record in .*shard-1 and in .*shard-2"):
        evaluate_paths([tmp_path / "a"])

    result = CliRunner().invoke(__import__("cli").main, ["eval", str(tmp_path / "a")])
    assert result.exit_code != 0 and f"question {stray_id} has a record in" in result.output


def test_eval_of_a_plain_run_is_unchanged(plugin: Path, pq2h_index: Path, pq2h_questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "plain"
    run_batch(_options(pq2h_index, pq2h_questions, out, limit=5))
    assert evaluate_paths([out], write=False) == [evaluate_run(out, write=False)]
