"""Sharded and Ray batch runs against one run, on the same questions with a real small model.

The same `batch` command, as a user runs it (a subprocess each), five ways:
- 1 run x 1 worker, with 1 and with 2 llama.cpp threads (the baselines);
- 1 run x 2 workers (local processes, 1 thread each);
- 2 shards x 1 worker (`--shard 1/2`, `--shard 2/2` started together, 1 thread each; wall time
  until both end), then `eval` of the shards' folder as one run;
- `--ray local --workers 2` (a fresh local Ray cluster, 2 actors of 1 thread; skipped without ray).

Method `io` (one LLM call per question) with smollm2-135m, greedy, response cache off, on the
first `LOCALKG_BENCH_SHARD_QUESTIONS` (default 40) PathQuestion 2-hop questions over an index of
their KB built in a temp folder. Reports questions/s (model loading included: it is part of
what a shard job costs) and checks that every way gives the same prediction for every question,
and that `eval` of the merged shards has the single run's Hits@1.

Usage: python -m bench.run_all shards   (or python -m bench.bench_shards)
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
QUESTIONS = SHARED / "pathquestion" / "PQ-2H.txt"
KB = SHARED / "pathquestion" / "2H-kb.txt"
MODEL = "smollm2-135m"


def _questions() -> int:
    return int(os.environ.get("LOCALKG_BENCH_SHARD_QUESTIONS", "40"))


def _batch(index: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, str(REPO / "cli.py"), "batch", "--index", str(index), "--questions", str(QUESTIONS),
            "--methods", "io", "--llm", MODEL, "--no-cache", "--limit", str(_questions()), "--out", str(out), *extra]


def _timed(commands: list[list[str]], threads: int) -> float:
    """Start the commands together; seconds until the last one ends (each must succeed)."""
    env = {**os.environ, "LOCALKG_LLM_THREADS": str(threads), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    procs = [subprocess.Popen(c, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in commands]
    for proc, command in zip(procs, commands, strict=True):
        _, stderr = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {stderr[-2000:]}")
    return time.perf_counter() - started


def _predictions(folders: list[Path]) -> dict[str, str]:
    found: dict[str, str] = {}
    for folder in folders:
        for line in (folder / "io.jsonl").read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            assert record["id"] not in found, f"{record['id']} recorded twice"
            found[record["id"]] = record.get("prediction") or ""
    return found


def run(results_dir: Path) -> dict[str, Any]:
    """Time the five ways; writes `results_dir/shards.json`."""
    from engine.runs.shards import evaluate_paths

    results: dict[str, Any] = {
        "command": "python -m bench.run_all shards",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_average_at_start": round(os.getloadavg()[0], 2)},
        "model": MODEL, "method": "io", "questions": _questions(), "ways": {}, "skipped": {},
    }
    if not QUESTIONS.exists():
        results["skipped"]["all"] = f"{QUESTIONS} not found (../shared/data)"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        index = work / "pq2h"
        if not results["skipped"]:
            from index.build import build_index
            from index.kg_stage import KgSource

            build_index(index, [KgSource(KB, "tsv")], [])
        ways: dict[str, tuple[list[list[str]], int, list[Path]]] = {
            "1 run x 1 worker (1 thread)": ([_batch(index, work / "one")], 1, [work / "one"]),
            "1 run x 1 worker (2 threads)": ([_batch(index, work / "one-2t")], 2, [work / "one-2t"]),
            "1 run x 2 workers": ([_batch(index, work / "two", "--workers", "2")], 1, [work / "two"]),
            "2 shards x 1 worker": ([_batch(index, work / "sharded" / f"shard-{k}", "--shard", f"{k}/2")
                                     for k in (1, 2)], 1, [work / "sharded" / f"shard-{k}" for k in (1, 2)]),
            "Ray local, 2 actors": ([_batch(index, work / "ray", "--ray", "local", "--workers", "2")], 1,
                                    [work / "ray"]),
        }
        if importlib.util.find_spec("ray") is None:
            results["skipped"]["Ray local, 2 actors"] = "ray is not installed (pip install ray==2.60.0)"
        reference: dict[str, str] | None = None
        for name, (commands, threads, folders) in ways.items():
            if results["skipped"].get("all") or name in results["skipped"]:
                continue
            print(f"   {name} ...", file=sys.stderr)
            seconds = _timed(commands, threads)
            predictions = _predictions(folders)
            reference = reference if reference is not None else predictions
            results["ways"][name] = {
                "seconds": round(seconds, 2), "questions_per_s": round(len(predictions) / seconds, 3),
                "records": len(predictions), "same_predictions_as_first": predictions == reference,
            }
        if "2 shards x 1 worker" in results["ways"]:
            merged = evaluate_paths([work / "sharded"], write=False)[0]
            single = evaluate_paths([work / "one"], write=False)[0]
            results["merged_eval"] = {"status": merged["status"],
                                      "hits1": merged["methods"]["io"]["hits1"],
                                      "single_run_hits1": single["methods"]["io"]["hits1"],
                                      "missing": merged["methods"]["io"]["missing"]}
    add_speed_ups(results)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "shards.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    results["markdown"] = _markdown(results)
    return results


def add_speed_ups(results: dict[str, Any]) -> None:
    """Each way's `speed_up`: its questions/s over the first way's (1 run x 1 worker, 1 thread),
    two decimals (the docs' table and the summary print it)."""
    first = next(iter(results["ways"].values()), None)
    for row in results["ways"].values():
        row["speed_up"] = round(row["questions_per_s"] / first["questions_per_s"], 2) if first else 0.0


def _markdown(results: dict[str, Any]) -> str:
    lines = [f"`batch --methods io --llm {results['model']} --no-cache --limit {results['questions']}` on "
             f"PathQuestion 2-hop, {results['machine']['cpus']} CPUs (load {results['machine']['load_average_at_start']} "
             "at start); wall time includes loading the model in every process.", "",
             "| way | seconds | questions/s | speed-up | records | same predictions |", "|---|---:|---:|---:|---:|---|"]
    for name, row in results["ways"].items():
        lines.append(f"| {name} | {row['seconds']:.1f} | {row['questions_per_s']:.2f} | {row['speed_up']:.2f}x | "
                     f"{row['records']} | {'yes' if row['same_predictions_as_first'] else 'NO'} |")
    for name, why in results["skipped"].items():
        lines.append(f"| {name} | skipped: {why} | | | | |")
    merged = results.get("merged_eval")
    if merged:
        lines += ["", f"`eval` of the two shard folders as one run: {merged['status']}, {merged['missing']} missing, "
                      f"Hits@1 {100 * merged['hits1']:.1f} (the single run: {100 * merged['single_run_hits1']:.1f})."]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run(REPO / "bench" / "results")["markdown"])
