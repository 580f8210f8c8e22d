"""Wall time of `hydra` against `tog` on the same questions, with nothing else running.

The HydraRAG issue's target: a `hydra` question costs no more than 2x the wall time of a `tog`
question on the same questions. The eval runs cannot show it: they record LLM seconds, taken
with one llama.cpp thread while another run shared the cores, and the older `tog` runs used
two. Here both methods run in one process, question by question in turn (tog, hydra, tog, ...),
with the response cache off, so every call reaches the model and both see the same machine;
one warm-up question first (model loads, fixed prompt prefixes) is not counted.

Per MetaQA set: the first `LOCALKG_BENCH_METHOD_QUESTIONS` (default 10) of the seed-0 sample of
50 that `make eval` uses. Needs the MetaQA index (`make eval` builds it) and the default model;
a missing one is reported as skipped, not as a failure.

Usage: python -m bench.run_all methods   (or python -m bench.bench_methods)
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from bench.summary import missing_input
from engine.llm.model_registry import DEFAULT_MODEL
from engine.methods.context import Context
from engine.questions.datasets import detect_format, read_questions
from engine.questions.record import Question
from engine.runs.batch import method_configs, select_questions
from engine.runs.context import open_context
from engine.runs.handout import answer_one
from ingest.base.progress import progress_bar

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
INDEX = REPO / "data" / "indexes" / "metaqa"
SETS = {f"MetaQA {h}-hop": SHARED / "metaqa" / "questions" / f"{h}-hop" / "qa_dev.txt" for h in (1, 2, 3)}
METHODS = ["tog", "hydra"]
TARGET_RATIO = 2.0


def _questions() -> int:
    return int(os.environ.get("LOCALKG_BENCH_METHOD_QUESTIONS", "10"))


def _summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    calls = [r.get("llm_calls") or [] for r in records]
    return {
        "questions": len(records),
        "errors": sum(1 for r in records if r.get("error")),
        "wall_s": round(statistics.fmean(r["seconds"] for r in records), 2),
        "llm_calls": round(statistics.fmean(len(c) for c in calls), 2),
        "prompt_tokens": round(statistics.fmean(sum(x.get("prompt_tokens", 0) for x in c) for c in calls), 1),
        # the prompt tokens the model evaluated: a stage's fixed prefix is loaded from its saved state
        "evaluated_prompt_tokens": round(statistics.fmean(
            sum(x.get("prompt_tokens", 0) - x.get("cached_tokens", 0) for x in c) for c in calls), 1),
        "completion_tokens": round(statistics.fmean(sum(x.get("completion_tokens", 0) for x in c) for c in calls), 1),
        "hits1": round(100 * statistics.fmean(bool((r.get("correct") or {}).get("hits1")) for r in records), 1),
        # where the time goes: the model's seconds per stage, and the rest (search, embeddings, scoring)
        "llm_s_by_stage": {stage: round(sum(x.get("seconds", 0.0) for c in calls for x in c
                                            if x.get("stage") == stage) / len(records), 2)
                           for stage in dict.fromkeys(x.get("stage") for c in calls for x in c)},
        "other_s": round(statistics.fmean(r["seconds"] - sum(x.get("seconds", 0.0) for x in c)
                                          for r, c in zip(records, calls, strict=True)), 2),
    }


def _measure(ctx: Context, name: str, questions: list[Question], configs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    records: dict[str, list[dict[str, Any]]] = {m: [] for m in METHODS}
    with progress_bar(f"bench methods {name}", total=len(questions) * len(METHODS), unit="answers") as bar:
        for question in questions:
            for method in METHODS:  # in turn, so that both see the same machine
                records[method].append(answer_one(method, question, ctx, configs[method]))
                bar.advance(1)
    per_method = {m: _summary(rs) for m, rs in records.items()}
    tog, hydra = per_method["tog"]["wall_s"], per_method["hydra"]["wall_s"]
    return {"ids": [q.id for q in questions], "methods": per_method,
            "hydra_over_tog": round(hydra / tog, 2) if tog else None}


def _sample(path: Path) -> list[Question]:
    return select_questions(read_questions(path, detect_format(path)), sample=50, seed=0)


def run(results_dir: Path) -> dict[str, Any]:
    """Run tog and hydra over each MetaQA set; writes `results_dir/methods.json`."""
    n = _questions()
    results: dict[str, Any] = {
        "machine": {"cpus": len(os.sched_getaffinity(0)), "platform": platform.platform(),
                    "load_average_at_start": round(os.getloadavg()[0], 2),
                    "llm_threads": os.environ.get("LOCALKG_LLM_THREADS", "all CPUs")},
        "settings": {"model": DEFAULT_MODEL, "methods": METHODS, "questions_per_set": n,
                     "sample": "the first N of the seed-0 sample of 50 (make eval's)", "response_cache": False},
        "target": f"hydra wall time per question <= {TARGET_RATIO}x tog's",
        "sets": {},
        "skipped": {},
    }
    if why := missing_input(DEFAULT_MODEL, INDEX, "`make eval` (or its index target) builds it"):
        results["skipped"]["all"] = why
    started = time.perf_counter()
    missing = [str(p) for p in SETS.values() if not p.exists()]
    if missing and not results["skipped"]:
        results["skipped"]["all"] = f"{', '.join(missing)} missing"
    if not results["skipped"]:
        configs = method_configs(METHODS, [])
        ctx = open_context(INDEX, DEFAULT_MODEL, cache=False)
        try:
            # One question outside the measured ones first: the model loads, the embedding
            # model loads and every stage's fixed prefix is evaluated once, for both methods.
            warm = _sample(SETS["MetaQA 2-hop"])[-1]
            for method in METHODS:
                answer_one(method, warm, ctx, configs[method])
            results["warm_up"] = warm.id
            for name, path in SETS.items():
                results["sets"][name] = _measure(ctx, name, _sample(path)[:n], configs)
        finally:
            ctx.close()
    results["seconds"] = round(time.perf_counter() - started, 1)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "methods.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    results["markdown"] = _markdown(results)
    return results


def _markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        f"`tog` and `hydra` with {results['settings']['model']}, {results['settings']['questions_per_set']} "
        f"questions per set, response cache off, one process taking the methods in turn ({m['cpus']} CPUs, "
        f"llama.cpp threads: {m['llm_threads']}; 1-min load average at start {m['load_average_at_start']}). "
        f"Target: {results['target']}.",
        "",
        "| set | method | wall s/q | LLM calls/q | prompt tok/q | evaluated prompt tok/q | generated tok/q "
        "| Hits@1 (%) | hydra / tog wall |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in results["sets"].items():
        for method, s in row["methods"].items():
            ratio = f"{row['hydra_over_tog']}x" if method == "hydra" else ""
            lines.append(f"| {name} | {method} | {s['wall_s']} | {s['llm_calls']} | {s['prompt_tokens']} "
                         f"| {s.get('evaluated_prompt_tokens', '–')} | {s['completion_tokens']} | {s['hits1']} | {ratio} |")
    for name, why in results["skipped"].items():
        lines.append(f"| {name} | skipped: {why} | | | | | | | |")
    lines += ["", "Where the wall time goes (seconds per question: the model's, by stage; the rest is search, "
              "embeddings and scoring):", ""]
    for name, row in results["sets"].items():
        for method, s in row["methods"].items():
            if "llm_s_by_stage" in s:
                stages = ", ".join(f"{k} {v}" for k, v in sorted(s["llm_s_by_stage"].items(), key=lambda kv: -kv[1]))
                lines.append(f"- {name}, {method}: {stages}; other {s['other_s']}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(run(REPO / "bench" / "results")["markdown"])
