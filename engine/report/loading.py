"""Reading runs for the report: `eval`'s summary of each run and its records, method by method.

A RUN argument is what `eval` takes: a run folder, a folder holding shard folders (scored and
read as one run), or several shard folders named one by one (one run together). Records are
read per method and folder with `run_folder.read_records`; like `eval`, the first record of an id is
kept and ids outside the run's question selection are left out. Transcripts (`calls/`) are read
per method only when asked, since they are the bulk of a run's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.runs.eval_tables import run_labels
from engine.runs.evaluate import evaluate_run, question_groups
from engine.runs.run_folder import read_records, read_run, record_path
from engine.runs.shards import evaluate_shards, shard_folders_under, shard_run
from engine.runs.transcripts import read_transcripts
from ingest.base.errors import InputError


@dataclass
class RunSource:
    """One run of the report: its label (the dataset column), folders and `eval` summary."""

    label: str
    folders: list[Path]
    summary: dict[str, Any]
    question_ids: list[str] = field(default_factory=list)  # the run's selection, in order
    groups: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> {hops: "2", ...}

    @property
    def methods(self) -> list[str]:
        return list(self.summary.get("methods") or {})


def _run_folders(paths: list[Path]) -> list[list[Path]]:
    """The folders of each run, grouped as `eval` groups them (`shards.evaluate_paths`)."""
    named_shards = [p for p in paths if shard_run(p) is not None]
    groups: list[list[Path]] = []
    for path in paths:
        if path in named_shards and len(named_shards) > 1:
            if path == named_shards[0]:
                groups.append(named_shards)
            continue
        groups.append(shard_folders_under(path) or [path])
    return groups


def open_runs(paths: list[Path]) -> list[RunSource]:
    """Score every RUN with `eval`'s code (nothing written) and name them as `eval` does."""
    if not paths:
        raise InputError("no run folder given")
    paths = [Path(p) for p in paths]
    for path in paths:
        if not path.is_dir():
            raise InputError(f"{path}: no such run folder")
    sources: list[RunSource] = []
    for path, folders in zip(paths, _run_folders(paths), strict=False):
        if shard_folders_under(path):
            summary = evaluate_shards(folders, label=path, write=False)
        elif len(folders) > 1:
            summary = evaluate_shards(folders, write=False)
        else:
            summary = evaluate_run(path, write=False)
        runs = [read_run(f) or {} for f in folders]
        ids = [str(i) for run in runs for i in (run.get("questions") or {}).get("ids") or []]
        groups = question_groups(((runs[0] if runs else {}).get("questions") or {}).get("path"))
        sources.append(RunSource("", folders, summary, list(dict.fromkeys(ids)), groups))
    for source, label in zip(sources, run_labels([s.summary for s in sources]), strict=True):
        source.label = label
    return sources


def method_records(source: RunSource, method: str) -> tuple[list[dict[str, Any]], list[str]]:
    """A method's records over the run's folders (first record of an id kept, ids outside the
    selection left out when the selection is known) and the problems met reading them."""
    seen: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for folder in source.folders:
        path = record_path(folder, method)
        if not path.exists():
            continue
        found, file_problems = read_records(path)
        problems += [f"{folder.name}/{p}" if len(source.folders) > 1 else p for p in file_problems]
        for record in found:
            seen.setdefault(str(record["id"]), record)
    if source.question_ids:
        wanted = set(source.question_ids)
        seen = {k: v for k, v in seen.items() if k in wanted}
    return list(seen.values()), problems


def method_transcripts(source: RunSource, method: str) -> dict[str, list[dict[str, Any]]]:
    """{question id: its LLM calls (stage, messages, reply, error, cache_hit)} of a method."""
    calls: dict[str, list[dict[str, Any]]] = {}
    for folder in source.folders:
        for qid, line in read_transcripts(folder, method).items():
            if isinstance(line.get("calls"), list):
                calls[qid] = line["calls"]
    return calls
