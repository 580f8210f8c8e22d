"""The llama.cpp thread policy (engine/llm/threads.py): the pure rule, where its inputs come
from, and a real model following it between calls without its replies changing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.llm import threads
from engine.llm.llama_cpp_backend import LlamaCppLLM, default_threads
from engine.llm.model_registry import REGISTRY
from engine.llm.models import model_path
from engine.llm.protocol import enum_array
from engine.llm.threads import ActiveModels, LoadMonitor, ThreadPolicy, choose_threads

TINY = REGISTRY["smollm2-135m"]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALKG_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LOCALKG_LLM_THREADS", raising=False)
    monkeypatch.delenv("LOCALKG_LLM_WORKERS", raising=False)
    monkeypatch.setenv("LOCALKG_LLM_REGISTER", str(tmp_path / "register"))


@pytest.mark.parametrize(("cpus", "busy", "users", "expected"), [
    (2, 0.0, 1, 2),  # a quiet machine: every CPU, as before
    (2, 0.4, 1, 2),  # a little other work is not worth a thread
    (2, 0.6, 1, 1),  # a core mostly taken: one thread, out of the waiting trap
    (2, 1.0, 1, 1),
    (2, 3.5, 1, 1),  # never below one
    (2, 0.0, 2, 1),  # batch --workers 2 on 2 CPUs: one each
    (2, 1.0, 2, 1),
    (16, 0.0, 1, 16),
    (16, 0.0, 4, 4),  # the CPUs divided among the workers ...
    (16, 13.0, 4, 3),  # ... and fewer when other work leaves less
    (16, 4.5, 1, 12),  # 4.5 busy CPUs round to 4 (half a CPU of other work is tolerated)
    (16, 4.51, 1, 11),
    (3, 0.0, 2, 1),
    (1, 0.0, 1, 1),
    (0, 0.0, 0, 1),  # nonsense in, one thread out
])
def test_choose_threads(cpus: int, busy: float, users: int, expected: int) -> None:
    assert choose_threads(cpus, busy, users) == expected


def test_never_more_threads_than_cpus_nor_fewer_than_one() -> None:
    for cpus in range(1, 33):
        for users in range(1, 9):
            counts = [choose_threads(cpus, busy / 4, users) for busy in range(0, 4 * cpus + 8)]
            assert all(1 <= c <= max(1, cpus // users) for c in counts)
            assert counts == sorted(counts, reverse=True)  # more load, never more threads


def test_the_override_and_the_workers_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALKG_LLM_THREADS", "3")
    assert default_threads() == 3 and threads.default_threads() == 3
    monkeypatch.setenv("LOCALKG_LLM_THREADS", "zero")  # not a count: the policy decides
    assert threads.thread_override() is None
    monkeypatch.delenv("LOCALKG_LLM_THREADS")
    assert threads.model_users() == 1
    monkeypatch.setenv("LOCALKG_LLM_WORKERS", "64")
    assert threads.model_users() == 64
    assert default_threads() == max(1, threads.usable_cpus() // 64)


def test_the_monitor_counts_other_processes_not_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Busy CPU seconds of the machine, less this process's own, per second of wall time."""
    samples = iter([threads._Sample(wall=100.0, busy_s=50.0, own_s=4.0),
                    threads._Sample(wall=102.0, busy_s=54.0, own_s=6.0),  # 4 busy, 2 of them ours
                    threads._Sample(wall=104.0, busy_s=55.0, own_s=7.0)])  # only ours
    monkeypatch.setattr(threads, "_read_sample", lambda: next(samples))
    monkeypatch.setattr(threads, "usable_cpus", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monitor = LoadMonitor()
    assert monitor.exact
    assert monitor.others_busy() == pytest.approx(1.0)
    assert monitor.others_busy() == pytest.approx(0.0)


def test_the_monitor_on_this_machine() -> None:
    monitor = LoadMonitor()
    others = monitor.others_busy(wait_s=0.05)
    assert 0.0 <= others <= max(threads.usable_cpus(), os.getloadavg()[0] + 1)


def test_without_proc_stat_the_load_average_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "_read_sample", lambda: None)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.2, 1.0, 0.9))
    monitor = LoadMonitor()
    assert not monitor.exact and monitor.others_busy() == 1.2


@pytest.fixture(scope="module")
def tiny() -> Iterator[LlamaCppLLM]:
    llm = LlamaCppLLM(model_path(TINY), sha256=TINY.sha256 or "", name=TINY.name, n_ctx=1024)
    yield llm
    llm.close()


class _Load:
    """A monitor whose reading the test sets."""

    exact = True

    def __init__(self, busy: float) -> None:
        self.busy = busy

    def seconds_since_look(self) -> float:
        return float("inf")

    def others_busy(self, *, wait_s: float = 0.0) -> float:
        return self.busy


@pytest.mark.slow
def test_a_model_follows_the_load_between_calls_and_answers_the_same(tiny: LlamaCppLLM,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "usable_cpus", lambda: 2)
    messages = [{"role": "system", "content": "You pick relations of a knowledge graph. Reply with JSON only."},
                {"role": "user", "content": "Question: who directed Heat?\nRelations: film.directed_by, film.genre"}]
    schema = {"type": "object", "properties": {"relations": enum_array(["film.directed_by", "film.genre"], max_items=2)},
              "required": ["relations"]}
    tiny._ensure_loaded()
    assert tiny.n_threads >= 1  # decided by the policy when it loaded
    replies = {}
    assert tiny._policy is not None
    for busy, expected in ((0.0, 2), (1.0, 1), (0.0, 2)):
        tiny._policy.monitor = _Load(busy)  # type: ignore[assignment]
        with tiny.recording() as calls:
            result = tiny.chat(messages, schema=schema, max_tokens=24)
        assert tiny.n_threads == expected and calls[0].timings is not None
        assert calls[0].timings.threads == expected
        replies.setdefault(result.text, []).append(expected)
    assert len(replies) == 1, replies  # the thread count never changes a reply


def test_a_fixed_thread_count_is_never_adapted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALKG_LLM_THREADS", "1")
    llm = LlamaCppLLM(model_path(TINY), sha256="", n_ctx=512)
    assert llm.n_threads == 1
    llm._adapt_threads()  # no policy: nothing to follow, nothing loaded
    assert llm.n_threads == 1 and llm._model is None


# -- the register of active models ----------------------------------------------------------

def test_the_register_counts_active_models_and_forgets_them(tmp_path: Path) -> None:
    folder = tmp_path / "reg"
    first, second = ActiveModels(folder), ActiveModels(folder)
    assert first.count() == 0  # no folder yet
    first.join()
    first.touch()
    assert first.count() == 1
    second.join()
    second.touch()
    assert first.count() == second.count() == 2
    second.leave()
    assert first.count() == 1 and len(list(folder.iterdir())) == 1
    assert first.path is not None
    old = first.path.stat().st_mtime - threads.ACTIVE_S - 5
    os.utime(first.path, (old, old))  # idle: held but untouched
    assert first.count() == 0
    first.touch()
    assert first.count() == 1
    first.leave()
    assert first.count() == 0 and not list(folder.iterdir())


def test_a_dead_holders_file_does_not_count_and_is_removed(tmp_path: Path) -> None:
    folder = tmp_path / "reg"
    folder.mkdir()
    (folder / "999999-1").write_text("")  # nobody holds a lock on it: its process died
    live = ActiveModels(folder)
    live.join()
    assert live.count() == 1
    assert sorted(p.name for p in folder.iterdir()) == [live.path.name if live.path else ""]
    live.leave()


def test_another_process_holding_a_file_counts(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    folder = tmp_path / "reg"
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from engine.llm.threads import ActiveModels
        a = ActiveModels(Path({str(folder)!r})); a.join(); a.touch()
        print("joined", flush=True); sys.stdin.readline()
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             cwd=Path(__file__).resolve().parents[1], text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "joined"
        me = ActiveModels(folder)
        me.join()
        me.touch()
        assert me.count() == 2
    finally:
        child.kill()
        child.wait()
    assert me.count() == 1  # the kernel dropped the dead child's lock
    me.leave()


def test_two_active_models_on_two_cpus_take_one_thread_each(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The side-by-side case: two batches started together see each other from their first call."""
    monkeypatch.setattr(threads, "usable_cpus", lambda: 2)
    folder = tmp_path / "reg"
    a, b = ThreadPolicy(ActiveModels(folder)), ThreadPolicy(ActiveModels(folder))
    for policy in (a, b):
        policy.monitor = _Load(0.0)  # type: ignore[assignment]
    assert a.start() == 2  # alone on a quiet machine: every CPU
    assert b.start() == 1
    assert a.before_call() == 1  # sees b at its next call
    b.stop()
    assert a.before_call() == 2  # and takes both CPUs again when b ends
    a.stop()
