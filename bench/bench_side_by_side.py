"""Two batches side by side against the same two one after the other: the thread policy's
target (issue 25, item 2; engine/llm/threads.py).

Each batch is `cli.py batch --methods tog` with the 0.5B model, response cache off, on N demo
questions of its own (A: the first N, B: the next N) and its own --out folder. Measured, each
configuration after a look at the machine's load:

- policy, one after the other: A, then B (threads by the policy; $LOCALKG_LLM_THREADS unset);
- policy, side by side: A and B started together. Target: <= 1.2x one after the other;
- `--workers 2`: one batch answering A's and B's questions with two workers;
- the old default (every CPU: LOCALKG_LLM_THREADS=<cpus>), one after the other and side by
  side: what the policy replaces (llama.cpp's threads waiting for each other);
- a lone run, the policy against the old default: batch A alone, the two in turn (old, policy,
  policy, old, ...; `LONE_PAIRS` pairs), the median of the pairs' ratios. The policy should be
  no slower than the old default.

Usage:
    python -m bench.bench_side_by_side [--questions N] [--no-old]
    python -m bench.run_all side-by-side    (N from $LOCALKG_BENCH_SIDE_QUESTIONS, default 4)
Writes bench/results/side_by_side.json and SUMMARY-side-by-side.md. Every wall time includes
each batch's start (imports, index, model load): what a user waits for.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.summary import missing_input, skipped_lines, write_summary
from engine.llm.threads import LoadMonitor, usable_cpus

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
INDEX = REPO / "data" / "indexes" / "demo"
QUESTIONS = REPO / "data" / "demo" / "questions.jsonl"
MODEL = "qwen2.5-coder-0.5b"
TARGET = 1.2
TIMEOUT_S = 900
LONE_PAIRS = 3


def _env(threads: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LOCALKG_LLM_THREADS", "LOCALKG_LLM_WORKERS")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    if threads is not None:
        env["LOCALKG_LLM_THREADS"] = str(threads)
    return env


def _start(questions: Path, out: Path, threads: int | None, workers: int = 1) -> subprocess.Popen[bytes]:
    command = [sys.executable, str(REPO / "cli.py"), "batch", "--index", str(INDEX), "--questions",
               str(questions), "--methods", "tog", "--llm", MODEL, "--no-cache", "--out", str(out),
               "--workers", str(workers)]
    return subprocess.Popen(command, cwd=REPO, env=_env(threads), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _wait(processes: list[subprocess.Popen[bytes]], started: float) -> dict[str, Any]:
    """Wall seconds until every process ended (None: a failure or the timeout)."""
    failed = []
    for process in processes:
        try:
            _, err = process.communicate(timeout=max(1.0, TIMEOUT_S - (time.perf_counter() - started)))
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            failed.append("timed out")
            continue
        if process.returncode != 0:
            failed.append(err.decode("utf-8", "replace")[-300:])
    wall = time.perf_counter() - started
    return {"wall_s": round(wall, 1) if not failed else None, "failed": failed}


def _configuration(name: str, files: dict[str, Path], work: Path, threads: int | None,
                   mode: str) -> dict[str, Any]:
    """One configuration: `mode` sequential (A then B), parallel (A and B) or workers (A+B, 2)."""
    busy = LoadMonitor().others_busy(wait_s=1.0)  # nothing of this bench runs now
    load = os.getloadavg()[0]
    print(f"side-by-side: {name} (other processes busy: {busy:.2f} CPUs)", file=sys.stderr, flush=True)
    row: dict[str, Any] = {"threads": threads or "policy", "mode": mode, "others_busy_cpus_before": round(busy, 2),
                           "load_average_before": round(load, 2)}
    if mode == "sequential":
        row["runs_s"] = []
        for label in ("A", "B"):
            started = time.perf_counter()
            result = _wait([_start(files[label], work / f"{name}-{label}", threads)], started)
            row["runs_s"].append(result["wall_s"])
            row.setdefault("failed", []).extend(result["failed"])
        row["wall_s"] = round(sum(row["runs_s"]), 1) if None not in row["runs_s"] else None
    elif mode == "parallel":
        started = time.perf_counter()
        processes = [_start(files[label], work / f"{name}-{label}", threads) for label in ("A", "B")]
        row.update(_wait(processes, started))
    else:
        started = time.perf_counter()
        row.update(_wait([_start(files["AB"], work / name, threads, workers=2)], started))
    return row


def _lone_runs(files: dict[str, Path], work: Path, cpus: int) -> dict[str, Any]:
    """Batch A alone with the policy and with the old default, in turn, order swapped each pair."""
    print("side-by-side: lone runs, policy and old default in turn", file=sys.stderr, flush=True)
    runs: dict[str, list[float | None]] = {"policy": [], "old": []}
    for pair in range(LONE_PAIRS):
        order = ("old", "policy") if pair % 2 == 0 else ("policy", "old")
        for label in order:
            started = time.perf_counter()
            result = _wait([_start(files["A"], work / f"lone-{label}-{pair}", None if label == "policy" else cpus)],
                           started)
            runs[label].append(result["wall_s"])
    ratios = [round(p / o, 3) for p, o in zip(runs["policy"], runs["old"], strict=True) if p and o]
    return {"runs_s": runs, "pair_ratios": ratios,
            "median_ratio": round(statistics.median(ratios), 2) if ratios else None}


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def run(results_dir: Path, *, questions: int | None = None, old_default: bool = True) -> dict[str, Any]:
    """Time the configurations; writes `results_dir/side_by_side.json`."""
    n = questions or int(os.environ.get("LOCALKG_BENCH_SIDE_QUESTIONS", "4"))
    cpus = usable_cpus()
    results: dict[str, Any] = {
        "machine": {"cpus": cpus, "platform": platform.platform(),
                    "load_average_at_start": [round(x, 2) for x in os.getloadavg()]},
        "settings": {"model": MODEL, "method": "tog", "questions_per_batch": n, "index": "data/indexes/demo",
                     "response_cache": False, "old_default_threads": cpus},
        "target": f"side by side <= {TARGET}x one after the other",
        "configurations": {}, "skipped": {},
    }
    if why := missing_input(MODEL, INDEX, "`make index` builds it"):
        results["skipped"]["all"] = why
    started = time.perf_counter()
    if not results["skipped"]:
        lines = QUESTIONS.read_text(encoding="utf-8").splitlines()[: 2 * n]
        with tempfile.TemporaryDirectory(prefix="side-by-side-") as tmp:
            work = Path(tmp)
            files = {"A": lines[:n], "B": lines[n:], "AB": lines}
            paths = {k: work / f"{k}.jsonl" for k in files}
            for k, v in files.items():
                paths[k].write_text("\n".join(v) + "\n", encoding="utf-8")
            plan = [("policy_sequential", None, "sequential"), ("policy_side_by_side", None, "parallel"),
                    ("policy_workers_2", None, "workers")]
            if old_default:
                plan += [("old_sequential", cpus, "sequential"), ("old_side_by_side", cpus, "parallel")]
            for name, threads, mode in plan:
                results["configurations"][name] = _configuration(name, paths, work, threads, mode)
            if old_default:
                results["lone"] = _lone_runs(paths, work, cpus)
    c = results["configurations"]

    def wall(name: str) -> float | None:
        return c.get(name, {}).get("wall_s")

    results["ratios"] = {
        "policy_side_by_side_over_sequential": _ratio(wall("policy_side_by_side"), wall("policy_sequential")),
        "policy_workers_2_over_sequential": _ratio(wall("policy_workers_2"), wall("policy_sequential")),
        "old_side_by_side_over_sequential": _ratio(wall("old_side_by_side"), wall("old_sequential")),
        "lone_run_policy_over_old": results.get("lone", {}).get("median_ratio"),
    }
    ratio = results["ratios"]["policy_side_by_side_over_sequential"]
    results["meets_target"] = ratio is not None and ratio <= TARGET
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "side_by_side.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    results["markdown"] = _markdown(results)
    return results


def _markdown(results: dict[str, Any]) -> str:
    m, s = results["machine"], results["settings"]
    lines = [
        f"Two `batch --methods tog` runs ({s['questions_per_batch']} demo questions each, {s['model']}, cache off) "
        f"side by side vs one after the other, on {m['cpus']} CPUs (load average at start "
        f"{m['load_average_at_start']}, at end {m.get('load_average_at_end')}). Target: {results['target']}.",
    ]
    lines += skipped_lines(results)
    if not results["configurations"]:
        return "\n".join(lines)
    lines += ["", "| configuration | threads | wall s | runs s | other processes' busy CPUs before | failed |",
              "|---|---|---:|---|---:|---|"]
    for name, row in results["configurations"].items():
        lines.append(f"| {name} | {row['threads']} | {row['wall_s']} | {row.get('runs_s', '')} "
                     f"| {row['others_busy_cpus_before']} | {len(row.get('failed') or [])} |")
    r = results["ratios"]
    lines += ["", f"Side by side / one after the other: policy {r['policy_side_by_side_over_sequential']}x "
              f"(target <= {TARGET}x: {'met' if results['meets_target'] else 'NOT met'}), "
              f"old default {r['old_side_by_side_over_sequential']}x; `--workers 2` / one after the other: "
              f"{r['policy_workers_2_over_sequential']}x; a lone run, policy / old default: "
              f"{r['lone_run_policy_over_old']}x (median of {LONE_PAIRS} pairs in turn)."]
    lone = results.get("lone")
    if lone:
        lines += ["", f"Lone runs of batch A (wall s): policy {lone['runs_s']['policy']}, old default "
                  f"{lone['runs_s']['old']}; ratios by pair {lone['pair_ratios']}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_side_by_side", description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=None, help="questions per batch (default 4)")
    parser.add_argument("--no-old", action="store_true", help="skip the old default's runs")
    args = parser.parse_args(argv)
    results = run(RESULTS, questions=args.questions, old_default=not args.no_old)
    command = "python -m bench.bench_side_by_side " + " ".join(argv if argv is not None else sys.argv[1:])
    write_summary(RESULTS, "side-by-side", "Side by side", command, results["markdown"])
    print(results["markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
