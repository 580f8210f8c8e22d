"""`batch --ray`: a real local Ray cluster of two worker processes (actors) answers a batch.

- one actor is killed with kill -9 from outside while the batch runs: its question is handed
  out again to a new actor, and every question ends with exactly one record;
- a question that kills two actors gets an error record and the run completes;
- without the ray package, --ray says how to install it.

The method is a scripted plugin (`scripted:` LLM): control flow, not answers. Skipped when ray
is not installed (it is an optional dependency).
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

from engine.runs.batch import BatchOptions, run_batch
from engine.runs.run_folder import read_records
from ingest.base.errors import InputError

REPO = Path(__file__).resolve().parents[1]
PLUGIN = "ray_methods_for_tests"
PLUGIN_SOURCE = '''
"""Scripted methods for tests/test_batch_ray.py."""
import os
import time

from engine.methods.registry import register
from engine.methods.spec import MethodSpec
from engine.questions.record import AnswerRecord


def steady(question, ctx, config):
    time.sleep(float(os.environ.get("RAY_TEST_DELAY", "0")))
    with open(os.environ["RAY_TEST_PIDS"], "a") as handle:
        handle.write(f"{os.getpid()}\\n")
    return AnswerRecord(id=question.id, question=question.question, answers=question.answers, method="steady",
                        prediction=question.answers[0], predictions=[question.answers[0]])


def deadly(question, ctx, config):
    if question.id == os.environ["RAY_TEST_VICTIM"]:
        os.kill(os.getpid(), 9)
    return AnswerRecord(id=question.id, question=question.question, answers=question.answers, method="deadly",
                        prediction=question.answers[0], predictions=[question.answers[0]])


register(MethodSpec("steady", steady, {}, "answers right, slowly, logging its process"))
register(MethodSpec("deadly", deadly, {}, "kills its own process on one question, every time"))
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    # Ray's workers (and the CLI's subprocess) inherit the environment: they find the plugin too.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(REPO)]))
    monkeypatch.setenv("RAY_TEST_PIDS", str(tmp_path / "pids.txt"))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # a throwaway local cluster: no token to set up
    return tmp_path


def _ids(path: Path) -> list[str]:
    records, problems = read_records(path)
    assert not problems, problems
    return [str(r["id"]) for r in records]


def _descendants(root: int) -> set[int]:
    """Process ids below `root`, from /proc (a local Ray cluster's processes descend from its driver)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _actor_pids(driver: int) -> list[int]:
    pids = []
    for pid in _descendants(driver):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if command.startswith(b"ray::QuestionActor"):
            pids.append(pid)
    return pids


def test_a_local_ray_cluster_answers_and_survives_a_killed_actor(plugin: Path, pq2h_index: Path, pq2h_questions: Path,
                                                                tmp_path: Path) -> None:
    pytest.importorskip("ray")
    out = tmp_path / "run"
    command = [sys.executable, str(REPO / "cli.py"), "batch", "--index", str(pq2h_index), "--questions",
               str(pq2h_questions), "--methods", "steady", "--out", str(out), "--limit", "24", "--ray", "local",
               "--workers", "2", "--llm", "scripted:", "--plugin", PLUGIN]
    proc = subprocess.Popen(command, cwd=REPO, env={**os.environ, "RAY_TEST_DELAY": "0.2"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    records = out / "steady.jsonl"
    killed = None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and killed is None:
            assert proc.poll() is None, proc.communicate()
            actors = _actor_pids(proc.pid)
            pids = plugin / "pids.txt"
            # an actor that has answered already (on a busy machine one actor may answer the first four)
            answered = {int(p) for p in pids.read_text().split()} if pids.exists() else set()
            ready = [a for a in actors if a in answered]
            if len(actors) == 2 and ready and records.exists() and records.read_bytes().count(b"\n") >= 4:
                killed = ready[0]
                os.kill(killed, signal.SIGKILL)  # mid-run: both actors are busy answering
            time.sleep(0.05)
        assert killed is not None, "the two actors never showed up"
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert "24 answered now" in stdout and "1 questions answered again after their worker died" in stdout

    ids = _ids(records)
    assert sorted(ids) == sorted(f"PQ-2H-{i}" for i in range(1, 25)) and len(ids) == len(set(ids))
    answered_by = {int(p) for p in (plugin / "pids.txt").read_text().split()}
    assert killed in answered_by and len(answered_by) == 3  # two actors, then the one that replaced it
    assert os.getpid() not in answered_by  # the driver only wrote
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "complete" and run["ray"] == "local" and run["last_session"]["requeued"] == 1


def test_a_question_that_kills_two_actors_is_an_error_record(plugin: Path, pq2h_index: Path, pq2h_questions: Path,
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_TEST_VICTIM", "PQ-2H-3")
    options = BatchOptions(index=pq2h_index, questions=pq2h_questions, methods=["deadly"], out=tmp_path / "run",
                           llm="scripted:", plugins=[PLUGIN], limit=6, workers=2, ray="local")
    report = run_batch(options)
    records = {r["id"]: r for r in read_records(tmp_path / "run" / "deadly.jsonl")[0]}
    assert sorted(records) == [f"PQ-2H-{i}" for i in range(1, 7)]
    assert records["PQ-2H-3"]["error"].startswith("WorkerDied") and "Ray actor died" in records["PQ-2H-3"]["error"]
    assert not any(r.get("error") for rid, r in records.items() if rid != "PQ-2H-3")
    assert report.errors == 1 and report.requeued == 1


def test_without_ray_the_option_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.runs import ray_runner

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now fails
    with pytest.raises(InputError, match=r"--ray needs the ray package: pip install"):
        ray_runner.import_ray()
