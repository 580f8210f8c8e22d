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
from ingest.errors import IndexError_, InputError, ModelError

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
    actor_class = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(QuestionActor)
    todo = deque(range(len(pending)))
    done: set[int] = set()
    rule = DeathRule(pending, configs, workers)
    actors: dict[int, Any] = {}  # slot -> actor handle
    holding: dict[int, int] = {}  # slot -> position of the question it answers
    in_flight: dict[Any, int] = {}  # object ref -> slot

    def start(slot: int) -> None:
        actors[slot] = actor_class.remote(setup.plugins, setup.index, setup.llm, setup.cache, setup.kg_endpoint,
                                          configs)

    def stop(slot: int) -> None:
        with contextlib.suppress(Exception):  # it may be gone already
            ray.kill(actors.pop(slot))

    def assign(slot: int) -> None:
        if not todo:
            stop(slot)  # frees its CPU for an actor still waiting to be placed
            return
        position = todo.popleft()
        holding[slot] = position
        method, question = pending[position]
        in_flight[actors[slot].answer.remote(method, asdict(question))] = slot

    def died(slot: int, exc: Exception) -> None:
        position = holding.pop(slot)
        stop(slot)
        cause = f"Ray actor died: {type(exc).__name__}"
        if rule.died_holding(position, cause, sink):
            todo.appendleft(position)
        else:
            done.add(position)  # recorded as an error
        if todo:
            start(slot)
            assign(slot)

    for slot in range(min(workers, len(pending))):
        start(slot)
        assign(slot)
    try:
        while len(done) < len(pending):
            if not in_flight:
                raise BatchError("Ray: no actor is left answering, yet questions remain; rerun to resume")
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=WAIT_SECONDS)
            for ref in ready:
                slot = in_flight.pop(ref)
                try:
                    reply = ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    died(slot, exc)
                    continue
                if reply[0] == "fatal":
                    _, name, text = reply
                    raise {"ModelError": ModelError, "IndexError_": IndexError_}.get(name, BatchError)(text)
                position = holding.pop(slot)
                done.add(position)
                sink(pending[position][0], reply[1])
                assign(slot)
    finally:
        for slot in list(actors):
            stop(slot)
    return rule.requeued
