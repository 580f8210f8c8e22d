"""Answering a batch's pending questions in this process or in a pool of worker processes.

`workers > 1` starts that many spawned processes, each opening its own context (index + model;
its llama.cpp threads are the CPUs divided among the workers, engine/llm/threads.py); the
parent is the only writer and hands out one question at a time, so it knows what each
worker holds. A worker that dies (kill -9, a crash in native code) is replaced and its question
is answered again; a question that kills two workers gets an error record (`DeathRule`).
Workers exit when the parent dies.
"""

from __future__ import annotations

import contextlib
import os
import queue
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.llm.threads import WORKERS_ENV, model_users
from engine.methods import registry
from engine.questions.record import Question
from engine.runs.answer import FATAL_ERRORS
from engine.runs.context import open_context
from engine.runs.handout import BatchError, DeathRule, Sink, WorkerSetup, answer_one
from ingest.base.errors import IndexError_, ModelError

Pending = list[tuple[str, Question]]


def _die_with_parent() -> None:
    """Linux: have the kernel end this worker when the parent dies (kill -9 included), so a
    resumed run never races a worker still busy with a long question. Elsewhere the worker
    notices between questions."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _worker(plugins: list[str], index: str, llm: str | None, cache: bool, configs: dict[str, dict[str, Any]],
            inbox: Any, results: Any, parent_pid: int, kg_endpoint: str | None = None, slot: int = 0,
            workers: int = 1) -> None:
    """A spawned worker: opens its own context, answers the tasks of its inbox (one at a time,
    handed out by the parent) until the sentinel or parent death."""
    _die_with_parent()
    # the thread policy shares the CPUs among the models computing at once (engine/llm/threads.py)
    os.environ[WORKERS_ENV] = str(model_users() * workers)
    try:
        registry.load_plugins(plugins)
        ctx = open_context(Path(index), llm, cache=cache, kg_endpoint=kg_endpoint)
        while True:
            if os.getppid() != parent_pid:
                return  # the parent was killed: stop, the rerun resumes
            try:
                task = inbox.get(timeout=0.5)
            except queue.Empty:
                continue
            if task is None:
                return
            position, method, question_dict = task
            question = Question(**question_dict)
            results.put(("record", slot, position, answer_one(method, question, ctx, configs[method])))
    except FATAL_ERRORS as exc:
        results.put(("fatal", type(exc).__name__, str(exc)))
    except Exception as exc:
        results.put(("fatal", type(exc).__name__, f"worker failed: {type(exc).__name__}: {exc}"))


def run_serial(setup: WorkerSetup, configs: dict[str, dict[str, Any]], pending: Pending, sink: Sink) -> None:
    """Answer `pending` in this process, one question after the other."""
    ctx = open_context(Path(setup.index), setup.llm, cache=setup.cache, kg_endpoint=setup.kg_endpoint)
    try:
        for method, question in pending:
            sink(method, answer_one(method, question, ctx, configs[method]))
    finally:
        ctx.close()


@dataclass
class _Slot:
    """One worker process, its inbox and the position of the task it holds (None: idle)."""

    process: Any
    inbox: Any
    position: int | None = None
    retired: bool = False  # sent the sentinel: nothing left to hand out


def run_parallel(setup: WorkerSetup, workers: int, configs: dict[str, dict[str, Any]], pending: Pending,
                 sink: Sink) -> int:
    """Answer `pending` with `workers` processes; returns how many questions were handed out
    again because their worker died."""
    pool = _Pool(setup, workers, configs, pending, sink)
    for slot in range(min(workers, len(pending))):
        pool.start(slot)
        pool.assign(slot)
    try:
        pool.wait()
    finally:
        pool.stop()
    return pool.rule.requeued


class _Pool:
    """The parent's view of its workers: who holds which task, what is left and what is done."""

    def __init__(self, setup: WorkerSetup, workers: int, configs: dict[str, dict[str, Any]], pending: Pending,
                 sink: Sink) -> None:
        import multiprocessing as mp

        self.setup, self.workers, self.configs, self.pending, self.sink = setup, workers, configs, pending, sink
        self.context = mp.get_context("spawn")
        self.results = self.context.Queue()
        self.todo = deque(range(len(pending)))
        self.done: set[int] = set()
        self.rule = DeathRule(pending, configs, workers)
        self.slots: dict[int, _Slot] = {}

    def start(self, slot: int) -> None:
        setup = self.setup
        inbox = self.context.Queue()
        process = self.context.Process(target=_worker, daemon=True, args=(
            list(setup.plugins), str(setup.index), setup.llm, setup.cache, self.configs,
            inbox, self.results, os.getpid(), setup.kg_endpoint, slot, self.workers))
        process.start()
        self.slots[slot] = _Slot(process, inbox)

    def assign(self, slot: int) -> None:
        holder = self.slots[slot]
        holder.position = self.todo.popleft() if self.todo else None
        if holder.position is None:
            holder.retired = True
            holder.inbox.put(None)
            return
        method, question = self.pending[holder.position]
        holder.inbox.put((holder.position, method, asdict(question)))

    def handle(self, message: tuple[Any, ...]) -> None:
        if message[0] == "fatal":
            _, name, text = message
            error_type = {"ModelError": ModelError, "IndexError_": IndexError_}.get(name, BatchError)
            raise error_type(text)
        _, slot, position, record = message
        if position not in self.done:  # a dead worker's record may arrive after its task was handed out again
            self.done.add(position)
            self.sink(self.pending[position][0], record)
        if slot in self.slots and self.slots[slot].position == position:
            self.assign(slot)

    def bury(self, slot: int) -> None:
        holder = self.slots.pop(slot)
        code = holder.process.exitcode
        position = holder.position
        if holder.retired:
            pass  # it was told to stop
        elif position is None or position in self.done:
            self.rule.died_idle(code)
        elif self.rule.died_holding(position, code, self.sink):
            self.todo.appendleft(position)
        else:
            self.done.add(position)  # recorded as an error
        if len(self.done) < len(self.pending) and (self.todo or not self.slots):
            self.start(slot)
            self.assign(slot)

    def wait(self) -> None:
        """Take records and replace dead workers until every task is done."""
        while len(self.done) < len(self.pending):
            try:
                self.handle(self.results.get(timeout=1.0))
                continue
            except queue.Empty:
                pass
            dead = [slot for slot, holder in self.slots.items() if not holder.process.is_alive()]
            if not dead:
                continue
            with contextlib.suppress(queue.Empty):  # first take what the dead left
                while True:
                    self.handle(self.results.get(timeout=0.2))
            for slot in dead:
                if slot in self.slots and not self.slots[slot].process.is_alive():
                    self.bury(slot)

    def stop(self) -> None:
        """Tell every worker to stop; end those that do not."""
        for holder in self.slots.values():
            with contextlib.suppress(Exception):
                holder.inbox.put(None)
        for holder in self.slots.values():
            holder.process.join(timeout=2)
            if holder.process.is_alive():
                holder.process.terminate()
                holder.process.join(timeout=5)
        for holder in self.slots.values():
            holder.inbox.cancel_join_thread()
        self.results.cancel_join_thread()
