"""`eval` over a sharded run: the folders of `batch --shard K/N` scored as one run.

    python cli.py eval runs/m2                          # a folder holding shard folders
    python cli.py eval runs/m2/shard-1 runs/m2/shard-2  # shard folders named one by one

Folders merge only when they are shards of one run: the same questions (file content, format,
--limit, --sample, --seed and so the same whole selection), index, KG endpoint, model, number
of shards, and the same config for each method they share. Anything else is refused, naming
the folder and what differs; so are a shard that appears twice and a question recorded in two
folders. Shards not there yet and questions without a record are reported: the questions of a
missing shard are found again from the questions file (when it is still there, unchanged), so
they count as missing like any other.

`evaluate_paths` is what `eval` calls: a plain run folder is scored as before
(`evaluate.evaluate_run`), one shard folder alone too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.questions.datasets import read_questions
from engine.runs.batch import file_sha256, select_questions, selection_digest, shard_of
from engine.runs.evaluate import evaluate_run, question_groups
from engine.runs.method_scores import score_method
from engine.runs.run_folder import (
    RUN_FILE,
    has_run,
    read_records,
    read_run,
    record_path,
    run_status,
    write_eval,
)
from ingest.base.errors import InputError


@dataclass
class Shard:
    """One shard folder and its run.json."""

    folder: Path
    run: dict[str, Any]

    @property
    def index(self) -> int:
        return int(self.run["shard"]["index"])

    @property
    def count(self) -> int:
        return int(self.run["shard"]["count"])


def shard_run(folder: Path) -> dict[str, Any] | None:
    """The run.json of `folder` when it is a shard folder, else None."""
    if not has_run(folder):
        return None
    run = read_run(folder)
    return run if run and isinstance(run.get("shard"), dict) else None


def shard_folders_under(folder: Path) -> list[Path]:
    """The shard folders directly inside `folder` (which holds no run itself), sorted by name."""
    if (folder / RUN_FILE).exists() or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and shard_run(p) is not None)


def merge_identity(run: dict[str, Any]) -> dict[str, Any]:
    """What must be equal for two shard folders to belong to one run."""
    questions = run.get("questions") or {}
    shard = run.get("shard") or {}
    return {
        "questions file content": questions.get("sha256"),
        "questions format": questions.get("format"),
        "questions limit": questions.get("limit"),
        "questions sample": questions.get("sample"),
        "questions seed": questions.get("seed"),
        "index fingerprint": (run.get("index") or {}).get("fingerprint"),
        "KG endpoint": (run.get("index") or {}).get("kg_endpoint"),
        "model": (run.get("model") or {}).get("fingerprint"),
        "number of shards": shard.get("count"),
        "whole selection": shard.get("selection_sha256"),
    }


def check_one_run(shards: list[Shard]) -> None:
    """Refuse shards of different runs, a shard given twice, or a method config that differs."""
    first = shards[0]
    reference = merge_identity(first.run)
    for shard in shards[1:]:
        theirs = merge_identity(shard.run)
        differs = [f"{key} ({reference[key]!r} in {first.folder} vs {theirs[key]!r})"
                   for key in reference if reference[key] != theirs[key]]
        if differs:
            raise InputError(f"{shard.folder} is not a shard of the same run as {first.folder}: "
                             f"{'; '.join(differs)}; evaluate them separately")
    seen: dict[int, Path] = {}
    for shard in shards:
        if shard.index in seen:
            raise InputError(f"shard {shard.index}/{shard.count} is given twice: {seen[shard.index]} and "
                             f"{shard.folder}; keep one of them")
        seen[shard.index] = shard.folder
    hashes: dict[str, tuple[str, Path]] = {}
    for shard in shards:
        for method, entry in (shard.run.get("methods") or {}).items():
            known = hashes.setdefault(method, (entry.get("config_hash"), shard.folder))
            if known[0] != entry.get("config_hash"):
                raise InputError(f"{method} ran with another config in {shard.folder} than in {known[1]}; "
                                 "the shards are not one run")


def whole_selection(run: dict[str, Any]) -> list[str] | None:
    """The question ids of the whole (unsharded) selection, read again from the questions file;
    None when that file is gone or changed (then a missing shard's questions are unknown)."""
    questions = run.get("questions") or {}
    path = Path(str(questions.get("path") or ""))
    if not path.is_file() or file_sha256(path) != questions.get("sha256"):
        return None
    chosen = select_questions(read_questions(path, questions.get("format") or "auto"),
                              limit=questions.get("limit"), sample=questions.get("sample"),
                              seed=questions.get("seed") or 0)
    ids = [q.id for q in chosen]
    return ids if selection_digest(ids) == (run.get("shard") or {}).get("selection_sha256") else None


def _merged_records(shards: list[Shard], method: str) -> tuple[list[dict[str, Any]], list[str]]:
    """A method's records from every shard folder, and the problems found in them. A question
    recorded in two folders is refused: one of them is not the shard it claims to be."""
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    where: dict[str, Path] = {}
    for shard in shards:
        path = record_path(shard.folder, method)
        if not path.exists():
            continue
        found, file_problems = read_records(path)
        problems += [f"{shard.folder.name}/{p}" for p in file_problems]
        for record in found:
            rid = str(record["id"])
            if rid in where and where[rid] != shard.folder:
                raise InputError(f"{method}: question {rid} has a record in {where[rid]} and in {shard.folder}; "
                                 "the folders are not disjoint shards of one run")
            where[rid] = shard.folder
            if shard_of(rid, shard.count) != shard.index:
                problems.append(f"{shard.folder.name}: {rid} is not a question of shard {shard.index}/{shard.count}")
        records += found
    return records, problems


def evaluate_shards(folders: list[Path], *, label: Path | None = None, write: bool = True) -> dict[str, Any]:
    """Score shard folders of one run as one run. `label`: the folder named in the report and
    where eval.json goes (default: the shards' common parent, written there only when no shard
    is missing; nothing is written without a common parent)."""
    shards = []
    for folder in folders:
        run = shard_run(folder)
        if run is None:
            raise InputError(f"{folder}: not a shard folder (no run.json with a shard, from `batch --shard K/N`)")
        shards.append(Shard(folder, run))
    check_one_run(shards)
    shards.sort(key=lambda s: s.index)
    first, count = shards[0], shards[0].count
    present = {s.index for s in shards}
    missing_shards = [k for k in range(1, count + 1) if k not in present]
    expected = whole_selection(first.run)
    problems: list[str] = []
    if expected is None:
        expected = [i for s in shards for i in (s.run.get("questions") or {}).get("ids", [])]
        if missing_shards:
            problems.append("the questions file is gone or changed, so the questions of the missing shards "
                            "are unknown and not counted as missing")
    if missing_shards:
        problems.insert(0, f"shards missing: {', '.join(f'{k}/{count}' for k in missing_shards)} "
                           f"(no folder given for them); their questions have no record")
    statuses = {s.index: run_status(s.folder, s.run) for s in shards}
    unfinished = {k: v for k, v in statuses.items() if v != "complete"}
    folder_of = {s.index: s.folder for s in shards}
    problems += [f"shard {k}/{count} ({folder_of[k]}) is {v}" for k, v in unfinished.items()]
    methods = list(dict.fromkeys(m for s in shards for m in (s.run.get("methods") or {})))
    groups = question_groups((first.run.get("questions") or {}).get("path"))
    results = {}
    for method in methods:
        records, file_problems = _merged_records(shards, method)
        results[method] = score_method(method, records, expected, file_problems, groups).to_dict()
    parents = {s.folder.resolve().parent for s in shards}
    home = label or (parents.pop() if len(parents) == 1 else None)
    status = "complete" if not missing_shards and not unfinished else "incomplete"
    questions = {k: v for k, v in (first.run.get("questions") or {}).items() if k != "ids"}
    summary = {
        "run_dir": str(home) if home else ", ".join(str(s.folder) for s in shards),
        "questions": {**questions, "count": len(expected)},
        "index": first.run.get("index"),
        "model": first.run.get("model"),
        "status": status,
        "shards": {"count": count, "present": sorted(present), "missing": missing_shards,
                   "folders": {str(s.index): str(s.folder) for s in shards},
                   "status": {str(k): v for k, v in statuses.items()}},
        "methods": results,
        "problems": problems,
    }
    # Named shard folders write into their parent only when they are the whole run, so that a
    # look at a few shards never replaces the parent's eval.json of all of them.
    if write and home is not None and (label is not None or not missing_shards):
        write_eval(home, summary)
    return summary


def evaluate_paths(paths: list[Path], *, write: bool = True) -> list[dict[str, Any]]:
    """What `eval PATH...` scores, one summary per run, in the order given:
    - a run folder: that run (`evaluate_run`, unchanged), a single shard folder included;
    - a folder holding shard folders: those shards as one run;
    - several shard folders named one by one: together one run (at the first one's place)."""
    if not paths:
        raise InputError("no run folder given")
    named_shards = [Path(p) for p in paths if shard_run(Path(p)) is not None]
    summaries: list[dict[str, Any]] = []
    for path in map(Path, paths):
        if path in named_shards and len(named_shards) > 1:
            if path == named_shards[0]:
                summaries.append(evaluate_shards(named_shards, write=write))
            continue
        inside = shard_folders_under(path)
        if inside:
            summaries.append(evaluate_shards(inside, label=path, write=write))
        else:
            summaries.append(evaluate_run(path, write=write))
    return summaries
