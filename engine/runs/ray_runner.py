"""`batch --ray ADDRESS`: Ray actors answer the questions; the driver (the batch process) writes.

ADDRESS is one of:
- `local`: a fresh Ray cluster on this machine with `--workers` CPUs, ended with the run;
- `auto`: the Ray cluster this machine belongs to (`ray start --head` / `ray start --address`);
- `ray://HOST:10001` (Ray Client) or `HOST:6379` (the head's GCS address).

Each actor (one CPU each, `--workers` of them) opens its own context, as a local worker process
does: every node needs localkg installed, the index folder at the same path and the model. With
many workers, give `--llm http://HOST:PORT/v1` so that all of them share one OpenAI-compatible
server instead of loading a model each.

The driver hands each actor one question at a time and is the only writer of the records, so
the batch keeps its guarantees: resumable at any moment, run.json, the folder's lock. An actor
that dies (its node lost, kill -9, a crash in native code) is replaced and its question handed
out again; a question that kills two actors gets an error record (`handout.DeathRule`). Actors
are owned by the driver, so Ray ends them when the driver dies.

Ray is optional (`pip install ray==2.60.0`); without it `--ray` says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import deque
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine.methods import registry
from engine.questions.record import Question
from engine.runs.answer import FATAL_ERRORS
from engine.runs.context import open_context
from engine.runs.handout import BatchError, DeathRule, Sink, WorkerSetup, answer_one
from ingest.base.errors import IndexError_, InputError, ModelError

# A local cluster only carries records between processes: a small object store is plenty, and
# it keeps Ray from claiming a third of the machine's memory.
LOCAL_OBJECT_STORE_BYTES = 200 * 1024**2
WAIT_SECONDS = 1.0


def import_ray() -> Any:
    """The `ray` module, or an InputError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs the ray package: pip install 'ray==2.60.0' "
                         "(or leave out --ray to use local worker processes)") from None
    return ray


class QuestionActor:
    """One Ray worker: its own context (index + model); answers one question per call.

    Failures that end the batch (a ModelError, an unusable index) come back as a ("fatal", type,
    text) reply instead of an exception, so the driver can tell them from a dead actor."""

    def __init__(self, plugins: list[str], index: str, llm: str | None, cache: bool,
                 kg_endpoint: str | None, configs: dict[str, dict[str, Any]]) -> None:
        self.configs = configs
        self.fatal: tuple[str, str] | None = None
        self.ctx: Any = None
        try:
            registry.load_plugins(plugins)
            self.ctx = open_context(Path(index), llm, cache=cache, kg_endpoint=kg_endpoint)
        except FATAL_ERRORS as exc:
            self.fatal = (type(exc).__name__, str(exc))
        except Exception as exc:
            self.fatal = (type(exc).__name__, f"worker failed: {type(exc).__name__}: {exc}")

    def pid(self) -> int:
        """This actor's process id (tests kill it)."""
        return os.getpid()

    def answer(self, method: str, question: dict[str, Any]) -> tuple[Any, ...]:
        if self.fatal is not None:
            return ("fatal", *self.fatal)
        try:
            return ("record", answer_one(method, Question(**question), self.ctx, self.configs[method]))
        except FATAL_ERRORS as exc:
            return ("fatal", type(exc).__name__, str(exc))
        except Exception as exc:
            return ("fatal", type(exc).__name__, f"worker failed: {type(exc).__name__}: {exc}")


def connect(ray: Any, address: str, workers: int) -> bool:
    """Join (or start, for `local`) the cluster. Returns whether this call connected, so that
    the caller disconnects again; a process already connected keeps its connection."""
    address = address.strip()
    if not address:
        raise InputError("--ray: give an address: local, auto, ray://HOST:PORT or HOST:PORT")
    if ray.is_initialized():
        return False
    quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
    try:
        if address == "local":
            ray.init(address="local", num_cpus=workers, object_store_memory=LOCAL_OBJECT_STORE_BYTES, **quiet)
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise BatchError(f"--ray {address}: cannot connect to the Ray cluster ({exc})") from None
    return True


def run_on_ray(address: str, workers: int, setup: WorkerSetup, configs: dict[str, dict[str, Any]],
               pending: list[tuple[str, Question]], sink: Sink) -> int:
    """Answer `pending` with `workers` Ray actors on the cluster at `address`; returns how many
    questions were handed out again because their actor died."""
    ray = import_ray()
    connected = connect(ray, address, workers)
    try:
        return _drive(ray, workers, setup, configs, pending, sink)
    finally:
        if connected:
            ray.shutdown()


def _drive(ray: Any, workers: int, setup: WorkerSetup, configs: dict[str, dict[str, Any]],
           pending: list[tuple[str, Question]], sink: Sink) -> int:
    driver = _Driver(ray, workers, setup, configs, pending, sink)
    for slot in range(min(workers, len(pending))):
        driver.start(slot)
        driver.assign(slot)
    try:
        driver.collect()
    finally:
        for slot in list(driver.actors):
            driver.stop(slot)
    return driver.rule.requeued


class _Driver:
    """The driver's side of a Ray batch: one actor per slot, the question each slot holds, the
    replies in flight, and what is left to hand out."""

    def __init__(self, ray: Any, workers: int, setup: WorkerSetup, configs: dict[str, dict[str, Any]],
                 pending: list[tuple[str, Question]], sink: Sink) -> None:
        self.ray = ray
        self.setup = setup
        self.configs = configs
        self.pending = pending
        self.sink = sink
        self.actor_class = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(QuestionActor)
        self.todo = deque(range(len(pending)))
        self.done: set[int] = set()
        self.rule = DeathRule(pending, configs, workers)
        self.actors: dict[int, Any] = {}  # slot -> actor handle
        self.holding: dict[int, int] = {}  # slot -> position of the question it answers
        self.in_flight: dict[Any, int] = {}  # object ref -> slot

    def start(self, slot: int) -> None:
        setup = self.setup
        self.actors[slot] = self.actor_class.remote(setup.plugins, setup.index, setup.llm, setup.cache,
                                                    setup.kg_endpoint, self.configs)

    def stop(self, slot: int) -> None:
        with contextlib.suppress(Exception):  # it may be gone already
            self.ray.kill(self.actors.pop(slot))

    def assign(self, slot: int) -> None:
        if not self.todo:
            self.stop(slot)  # frees its CPU for an actor still waiting to be placed
            return
        position = self.todo.popleft()
        self.holding[slot] = position
        method, question = self.pending[position]
        self.in_flight[self.actors[slot].answer.remote(method, asdict(question))] = slot

    def died(self, slot: int, exc: Exception) -> None:
        position = self.holding.pop(slot)
        self.stop(slot)
        cause = f"Ray actor died: {type(exc).__name__}"
        if self.rule.died_holding(position, cause, self.sink):
            self.todo.appendleft(position)
        else:
            self.done.add(position)  # recorded as an error
        if self.todo:
            self.start(slot)
            self.assign(slot)

    def collect(self) -> None:
        """Wait for replies until every question is done, handing out the next question as each
        reply comes in."""
        while len(self.done) < len(self.pending):
            if not self.in_flight:
                raise BatchError("Ray: no actor is left answering, yet questions remain; rerun to resume")
            ready, _ = self.ray.wait(list(self.in_flight), num_returns=1, timeout=WAIT_SECONDS)
            for ref in ready:
                self.receive(ref)

    def receive(self, ref: Any) -> None:
        """Take one reply: a record (written), a dead actor (replaced) or a fatal error (raised)."""
        slot = self.in_flight.pop(ref)
        try:
            reply = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as exc:
            self.died(slot, exc)
            return
        if reply[0] == "fatal":
            _, name, text = reply
            raise {"ModelError": ModelError, "IndexError_": IndexError_}.get(name, BatchError)(text)
        position = self.holding.pop(slot)
        self.done.add(position)
        self.sink(self.pending[position][0], reply[1])
        self.assign(slot)
