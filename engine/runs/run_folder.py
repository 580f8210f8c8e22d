"""The run folder's format: what a batch run writes and what eval, shards, report and bench read.

    RUN/run.json                 the run: command, selection, configs, fingerprints, status
                                 (`localkg_run`: the schema version), written atomically
    RUN/<method>.jsonl           the records, one JSON line per answered question, appended
                                 and fsync'd (`RecordWriter`); run.json's `methods` name them
    RUN/calls/<method>.jsonl     the prompts and raw replies (engine/runs/transcripts.py)
    RUN/eval.json                the scores `eval` wrote (engine/runs/evaluate.py)
    RUN/.batch.lock              the writer's lock (`run_lock`)
    RUN/previous-<UTC time>/     records moved aside by a restart, with a copy of run.json

Reading never modifies a file (eval may read a run still being written): a torn last line (a
kill in the middle of a write) is reported and left out (`read_records`). Writing repairs it
first, so a resumed run appends to whole lines only. Every record is written as a line that
reads back (text UTF-8 cannot hold becomes U+FFFD; a record JSON cannot hold becomes an error
record naming its question), so no question makes a run unresumable.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.questions.record import AnswerRecord
from engine.questions.text import Repairs, repair_strings, repair_text
from engine.runs.handout import BatchError
from engine.runs.transcripts import json_line, transcript_path
from index.build_lock import pid_alive

RUN_SCHEMA = 1  # run.json's `localkg_run`
RUN_FILE = "run.json"
LOCK_FILE = ".batch.lock"
EVAL_FILE = "eval.json"


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
UNWRITABLE = (ValueError, TypeError, RecursionError)


def record_line(record: dict[str, Any]) -> bytes:
    """One record as a JSONL line: UTF-8 bytes ending in its only newline. Raises what
    json.dumps raises (`UNWRITABLE`) for what JSON or UTF-8 cannot hold."""
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
    except UNWRITABLE:
        pass
    return value, 0


def note_replaced(record: dict[str, Any], count: int) -> dict[str, Any]:
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
            written = note_replaced(written, replaced)
        try:
            line = record_line(written)
        except UNWRITABLE as exc:
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


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


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


def move_aside(out: Path, previous: dict[str, Any], methods: list[str] | None) -> Path:
    """Move the record and call files of `methods` (None: the whole run, with eval.json) into
    `out/previous-<UTC time>/`, with a copy of run.json; nothing is deleted."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    backup, suffix = out / f"previous-{stamp}", 1
    while backup.exists():
        suffix += 1
        backup = out / f"previous-{stamp}-{suffix}"
    backup.mkdir()
    chosen = list(previous.get("methods", {})) if methods is None else methods
    moving = [record_path(Path(), m, previous) for m in chosen]
    moving += [transcript_path(Path(), m) for m in chosen]
    if methods is None:
        moving.append(Path(EVAL_FILE))
    for name in moving:
        if (out / name).exists():
            (backup / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(out / name, backup / name)
    shutil.copy2(out / RUN_FILE, backup / RUN_FILE)  # what the moved records were made with
    return backup


@contextlib.contextmanager
def run_lock(out: Path) -> Iterator[None]:
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


# ---- layout --------------------------------------------------------------------------------


def record_file_name(method: str) -> str:
    """The name of a method's record file in a run folder (what run.json's `file` holds)."""
    return f"{method}.jsonl"


def record_path(folder: Path, method: str, run: dict[str, Any] | None = None) -> Path:
    """`folder/<method>.jsonl`, or the file `run` (a run.json) names for the method."""
    entry = ((run or {}).get("methods") or {}).get(method) or {}
    return Path(folder) / entry.get("file", record_file_name(method))


def record_files(folder: Path) -> list[Path]:
    """The record files of a run folder (`<method>.jsonl`), sorted by name."""
    return sorted(p for p in Path(folder).glob("*.jsonl") if p.is_file())


def has_run(folder: Path) -> bool:
    """Whether `folder` holds a run.json."""
    return (Path(folder) / RUN_FILE).is_file()


def write_eval(folder: Path, summary: dict[str, Any]) -> None:
    """Write `folder/eval.json` (a temp file renamed over it, so a reader never sees half)."""
    tmp = Path(folder) / (EVAL_FILE + ".tmp")
    tmp.write_text(json.dumps(summary, ensure_ascii=False, indent=2), encoding="utf-8")
    tmp.replace(Path(folder) / EVAL_FILE)


def latest_records(path: Path) -> dict[str, dict[str, Any]]:
    """{question id: its last record} of a record file (a resumed run may hold earlier tries)."""
    records, _ = read_records(path)
    return {str(record["id"]): record for record in records}
