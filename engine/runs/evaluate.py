"""Scoring a batch run's folder: reads `RUN_DIR/<method>.jsonl` (+ `run.json` and its questions
file), scores each method (`engine/runs/method_scores.py`, where the metrics are defined) and
writes `eval.json`. The Markdown tables are in `engine/runs/eval_tables.py`.

Missing records (a question of run.json without a record), records for ids not in the run,
duplicates and unreadable lines are counted and listed, never hidden.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.runs.method_scores import score_method
from engine.runs.run_folder import (
    RUN_FILE,
    read_records,
    read_run,
    record_files,
    record_path,
    run_status,
    write_eval,
)
from ingest.base.errors import InputError

GROUP_FIELDS = ("needs", "hops", "kind", "type", "level")


def question_groups(path: str | None) -> dict[str, dict[str, str]]:
    """Question id -> its grouping fields (`GROUP_FIELDS`, scalar values) from a JSONL questions
    file; empty for other formats or a file that is gone (the breakdown is then left out)."""
    if not path or not str(path).endswith(".jsonl") or not Path(path).is_file():
        return {}
    groups: dict[str, dict[str, str]] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(item, dict) or "id" not in item:
                continue
            fields_ = {k: str(item[k]) for k in GROUP_FIELDS
                       if isinstance(item.get(k), (str, int)) and not isinstance(item.get(k), bool)}
            if fields_:
                groups[str(item["id"])] = fields_
    return groups


def evaluate_run(run_dir: Path, *, write: bool = True) -> dict[str, Any]:
    """Score every `<method>.jsonl` in a run folder; writes `eval.json` there unless `write=False`."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: no such run folder")
    run = read_run(run_dir)
    files = record_files(run_dir)
    listed = list((run or {}).get("methods", {}))
    methods = list(dict.fromkeys([*(m for m in listed if record_path(run_dir, m).exists()), *(p.stem for p in files)]))
    if not methods:
        raise InputError(f"{run_dir}: no record files (<method>.jsonl) to evaluate")
    problems: list[str] = []
    if run is None:
        problems.append(f"no {RUN_FILE}: the expected question set is unknown, so missing records cannot be counted")
    for method in listed:
        if method not in methods:
            problems.append(f"{method}: listed in {RUN_FILE} but has no record file")
    expected = (run or {}).get("questions", {}).get("ids")
    groups = question_groups((run or {}).get("questions", {}).get("path"))
    results = {}
    for method in methods:
        records, file_problems = read_records(record_path(run_dir, method))
        results[method] = score_method(method, records, expected, file_problems, groups).to_dict()
    summary = {
        "run_dir": str(run_dir),
        "questions": {k: v for k, v in (run or {}).get("questions", {}).items() if k != "ids"},
        "index": (run or {}).get("index"),
        "model": (run or {}).get("model"),
        "status": run_status(run_dir, run) if run else None,  # a killed run's "running" shows as stale
        "methods": results,
        "problems": problems,
    }
    if write:
        write_eval(run_dir, summary)
    return summary


def evaluate_runs(run_dirs: list[Path], *, write: bool = True) -> list[dict[str, Any]]:
    """`evaluate_run` for each folder, in order (each writes its own eval.json)."""
    if not run_dirs:
        raise InputError("no run folder given")
    return [evaluate_run(Path(d), write=write) for d in run_dirs]
