"""The llama.cpp thread policy (engine/llm/threads.py): the pure rule, where its inputs come
from, and a real model following it between calls without its replies changing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.llm import threads
from engine.llm.backends import LlamaCppLLM, default_threads, enum_array
from engine.llm.models import REGISTRY, model_path
from engine.llm.threads import LoadMonitor, choose_threads

TINY = REGISTRY["smollm2-135m"]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALKG_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LOCALKG_LLM_THREADS", raising=False)
    monkeypatch.delenv("LOCALKG_LLM_WORKERS", raising=False)


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
    monkeypatch.setattr("engine.llm.backends.usable_cpus", lambda: 2)
    messages = [{"role": "system", "content": "You pick relations of a knowledge graph. Reply with JSON only."},
                {"role": "user", "content": "Question: who directed Heat?\nRelations: film.directed_by, film.genre"}]
    schema = {"type": "object", "properties": {"relations": enum_array(["film.directed_by", "film.genre"], max_items=2)},
              "required": ["relations"]}
    tiny._ensure_loaded()
    assert tiny.n_threads >= 1  # decided by the policy when it loaded
    replies = {}
    for busy, expected in ((0.0, 2), (1.0, 1), (0.0, 2)):
        tiny._monitor = _Load(busy)  # type: ignore[assignment]
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
    llm._adapt_threads()  # no monitor: nothing to follow, nothing loaded
    assert llm.n_threads == 1 and llm._model is None
