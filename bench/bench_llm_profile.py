"""Where a question's seconds go: `io`, `rag`, `tog`, `tog-r`, `tog2`, `hydra` and `chains` with the
0.5B model, split into the model's own work and everything around it (issue 25, item 1), and
each method's questions per hour beside the bound the raw throughput sets (item 4).

One process, response cache off, two warm-up questions per method first (models load, the
stages' fixed prefixes are evaluated; not counted). Per method and question: the LLM seconds,
split by the llama.cpp backend's `CallTimings` (prompt evaluation, generation, sampling under the
grammar, grammar building, chat template, tokenization, prefix KV states, detokenization, the
rest of the LLM layer), and the question's other seconds (retrieval, embeddings, scoring).

The tokens' cost: the evaluated prompt tokens (a stage prefix's first evaluation included) at the
raw prompt throughput, plus the decoded generated tokens at the raw generation throughput, both
measured in the same run and process with llama.cpp's own counters on `bench.bench_llm`'s
prompts (no grammar, one of them after every round of questions, so that the raw rate sees the
machine the questions saw). Target: LLM seconds per question within 1.1x of the tokens' cost.

`--compare` (the default) answers each question twice, in turn and in alternating order, with
the decoding loop of engine/llm/sampling.py and with llama-cpp-python's `create_completion`
(the reference, what the backend did before), and checks that every reply is the same. Compare
the two by LLM seconds: a question's retrieval caches are warm for whichever path ran second.

Usage:
    python -m bench.bench_llm_profile [--questions N] [--methods tog,hydra,chains]
        [--dataset demo|metaqa] [--compare | --reference]
    python -m bench.run_all llm-profile    (N from $LOCALKG_BENCH_PROFILE_QUESTIONS, default 4)
Set LOCALKG_LLM_THREADS=1 on a machine busy with other work. Writes bench/results/llm_profile.json
and SUMMARY-llm-profile.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.bench_llm import GEN_TOKENS, PROMPTS
from bench.summary import skipped_lines, write_summary
from engine.llm.llama_cpp_backend import LlamaCppLLM
from engine.llm.model_registry import REGISTRY
from engine.llm.models import expected_sha256, verify_model
from engine.llm.threads import LoadMonitor
from engine.llm.timings import PARTS, CallTimings
from engine.questions.datasets import detect_format, read_questions
from engine.questions.record import Question
from engine.runs.batch import method_configs, select_questions
from engine.runs.context import open_context
from engine.runs.handout import answer_one
from ingest.base.errors import ModelError

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
MODEL = "qwen2.5-coder-0.5b"
METHODS = ["io", "rag", "tog", "tog-r", "tog2", "hydra", "chains"]
DATASETS = {
    "metaqa": (REPO / "data" / "indexes" / "metaqa",
               REPO.parent / "shared" / "data" / "metaqa" / "questions" / "2-hop" / "qa_dev.txt"),
    "demo": (REPO / "data" / "indexes" / "demo", REPO / "data" / "demo" / "questions.jsonl"),
}
TARGET = 1.1
PATHS = {"fast": True, "reference": False}  # LlamaCppLLM.fast_sampling


def _questions(dataset: str, n: int) -> tuple[list[Question], list[Question]]:
    """(warm-up questions, the N measured): make eval's seed-0 sample of 50 (metaqa), or every
    7th demo question; the warm-up takes the last two."""
    path = DATASETS[dataset][1]
    questions = read_questions(path, detect_format(path))
    chosen = select_questions(questions, sample=50, seed=0) if dataset == "metaqa" else questions[::7]
    return chosen[-2:], chosen[:n]


class _Throughput:
    """Raw prompt / generation throughput from llama.cpp's counters, accumulated over probes."""

    def __init__(self, llm: LlamaCppLLM) -> None:
        self.llm = llm
        self.prompt_ms = self.gen_ms = 0.0
        self.prompt_n = self.gen_n = self.probes = 0

    def probe(self) -> None:
        import llama_cpp

        ctx = self.llm._llm.ctx
        llama_cpp.llama_perf_context_reset(ctx)
        prompt = PROMPTS[self.probes % len(PROMPTS)]
        self.llm.chat([{"role": "user", "content": prompt}], max_tokens=GEN_TOKENS, stage="throughput")
        perf = llama_cpp.llama_perf_context(ctx)
        self.prompt_ms += perf.t_p_eval_ms
        self.prompt_n += perf.n_p_eval
        self.gen_ms += perf.t_eval_ms
        self.gen_n += perf.n_eval
        self.probes += 1

    def rates(self) -> dict[str, Any]:
        return {"probes": self.probes, "prompt_tokens": self.prompt_n, "generated_tokens": self.gen_n,
                "prompt_tokens_per_s": round(self.prompt_n / (self.prompt_ms / 1000), 1) if self.prompt_ms else None,
                "generated_tokens_per_s": round(self.gen_n / (self.gen_ms / 1000), 1) if self.gen_ms else None}


def _one(method: str, question: Question, ctx: Any, config: dict[str, Any]) -> dict[str, Any]:
    """Answer one question; its record's essentials and the summed timings of its LLM calls."""
    with ctx.llm.recording() as calls:
        record = answer_one(method, question, ctx, config)
    timings = CallTimings()
    for call in calls:
        if call.timings is not None:
            timings.add(call.timings)
    llm_s = sum(c.seconds for c in calls)
    return {"id": question.id, "prediction": record["prediction"], "predictions": record["predictions"],
            "hits1": bool((record.get("correct") or {}).get("hits1")), "error": record.get("error"),
            "replies": [c.reply for c in calls], "seconds": record["seconds"], "llm_s": llm_s,
            "calls": len(calls), "completion_tokens": sum(c.completion_tokens for c in calls),
            "timings": timings.to_dict()}


def _summary(rows: list[dict[str, Any]], rates: dict[str, Any]) -> dict[str, Any]:
    """Per-question means of one method and path, with the tokens' cost at the raw rates."""
    n = len(rows)

    def mean(key: str) -> float:
        return sum(r["timings"][key] for r in rows) / n

    llm_s = sum(r["llm_s"] for r in rows) / n
    prompt_tok, gen_tok = mean("prompt_eval_tokens"), mean("generated_tokens")
    cost = prompt_tok / rates["prompt_tokens_per_s"] + gen_tok / rates["generated_tokens_per_s"]
    split = {p: round(mean(p), 3) for p in PARTS}
    split["other_llm_layer"] = round(llm_s - sum(mean(p) for p in PARTS), 3)
    return {
        "questions": n, "errors": sum(1 for r in rows if r["error"]),
        "hits1": round(100 * statistics.fmean(r["hits1"] for r in rows), 1),
        "wall_s": round(sum(r["seconds"] for r in rows) / n, 2),
        "llm_s": round(llm_s, 2),
        "retrieval_scoring_s": round(sum(r["seconds"] - r["llm_s"] for r in rows) / n, 2),
        "calls": round(sum(r["calls"] for r in rows) / n, 1),
        "evaluated_prompt_tokens": round(prompt_tok, 1), "generated_tokens": round(gen_tok, 1),
        "completion_tokens": round(sum(r["completion_tokens"] for r in rows) / n, 1),
        "tokens_cost_s": round(cost, 2),
        "llm_over_tokens_cost": round(llm_s / cost, 2) if cost else None,
        "in_call_prompt_tokens_per_s": round(prompt_tok / mean("prompt_eval"), 1) if mean("prompt_eval") else None,
        "in_call_generated_tokens_per_s": round(gen_tok / mean("generation"), 1) if mean("generation") else None,
        "full_grammar_scans_per_sampled_token": round(mean("full_grammar_scans") / mean("sampled_tokens"), 3)
        if mean("sampled_tokens") else None,
        "threads": sorted({r["timings"]["threads"] for r in rows}),
        "split_s": split,
    }


def run(results_dir: Path, *, questions: int | None = None, methods: list[str] | None = None,
        dataset: str = "demo", paths: list[str] | None = None) -> dict[str, Any]:
    """Profile `methods` on `questions` questions of `dataset` with each decoding path in `paths`
    ("fast", "reference"); writes `results_dir/llm_profile.json`."""
    n = questions or int(os.environ.get("LOCALKG_BENCH_PROFILE_QUESTIONS", "4"))
    methods = methods or list(METHODS)
    paths = paths or ["fast", "reference"]
    index = DATASETS[dataset][0]
    monitor = LoadMonitor()
    results: dict[str, Any] = {
        "machine": {"cpus": len(os.sched_getaffinity(0)), "platform": platform.platform(),
                    "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
                    "llm_threads_env": os.environ.get("LOCALKG_LLM_THREADS", "policy")},
        "settings": {"model": MODEL, "methods": methods, "dataset": dataset, "questions_per_method": n,
                     "paths": paths, "response_cache": False},
        "target": f"LLM seconds per question <= {TARGET}x the tokens' cost at the raw throughput",
        "methods": {}, "skipped": {},
    }
    try:
        spec = REGISTRY[MODEL]
        model_path = verify_model(spec)
    except ModelError as exc:
        results["skipped"]["all"] = str(exc)
    if not (index / "manifest.json").exists():
        results["skipped"]["all"] = f"{index} is missing (`make eval` or `make index` builds it)"
    if not DATASETS[dataset][1].exists():
        results["skipped"]["all"] = f"{DATASETS[dataset][1]} is missing"
    started = time.perf_counter()
    if not results["skipped"]:
        llm = LlamaCppLLM(model_path, sha256=expected_sha256(spec, model_path) or "", name=MODEL)
        ctx = open_context(index, llm, cache=False)
        try:
            _measure(ctx, llm, methods, n, dataset, paths, results)
        finally:
            ctx.close()
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["machine"]["other_processes_busy_cpus"] = round(monitor.others_busy(), 2)
    results_dir.mkdir(parents=True, exist_ok=True)
    markdown = _markdown(results)  # adds each method's questions per hour and LLM / llama.cpp's own s
    (results_dir / "llm_profile.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    results["markdown"] = markdown
    return results


def _measure(ctx: Any, llm: LlamaCppLLM, methods: list[str], n: int, dataset: str, paths: list[str],
             results: dict[str, Any]) -> None:
    configs = method_configs(methods, [])
    warm, chosen = _questions(dataset, n)
    for question in warm:  # warm-up: model, embedder, the stages' prefixes
        for method in methods:
            _one(method, question, ctx, configs[method])
    results["warm_up"] = [q.id for q in warm]
    raw = _Throughput(llm)
    raw.probe()
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {m: {p: [] for p in paths} for m in methods}
    for i, question in enumerate(chosen):
        for method in methods:
            # in turn, the order alternating, so that both paths see the same machine
            for path in paths if i % 2 == 0 else paths[::-1]:
                llm.fast_sampling = PATHS[path]
                rows[method][path].append(_one(method, question, ctx, configs[method]))
            print(f"profile {i + 1}/{len(chosen)} {method} {question.id}", file=sys.stderr, flush=True)
        llm.fast_sampling = True
        raw.probe()
    rates = raw.rates()
    results["raw_throughput"] = rates
    for method, by_path in rows.items():
        entry: dict[str, Any] = {p: _summary(r, rates) for p, r in by_path.items()}
        if len(paths) == 2:
            a, b = (by_path[p] for p in paths)
            entry["same_replies"] = all(x["replies"] == y["replies"] for x, y in zip(a, b, strict=True))
            entry["same_predictions"] = all(x["predictions"] == y["predictions"] for x, y in zip(a, b, strict=True))
        entry["questions"] = [{k: v for k, v in r.items() if k != "replies"} for r in by_path[paths[0]]]
        results["methods"][method] = entry


def _markdown(results: dict[str, Any]) -> str:
    m, s = results["machine"], results["settings"]
    lines = [
        f"Where a question's seconds go: {', '.join(s['methods'])} with {s['model']} on {s['dataset']}, "
        f"{s['questions_per_method']} questions each, response cache off, one process ({m['cpus']} CPUs, "
        f"LOCALKG_LLM_THREADS={m['llm_threads_env']}; load average at start {m['load_average_at_start']}, "
        f"at end {m.get('load_average_at_end')}; other processes kept {m.get('other_processes_busy_cpus')} "
        f"CPUs busy on average). Target: {results['target']}.",
    ]
    lines += skipped_lines(results)
    if not results["methods"]:
        return "\n".join(lines)
    raw = results["raw_throughput"]
    lines += [
        "",
        f"Raw throughput in the same run ({raw['probes']} probes of bench_llm's prompts): "
        f"{raw['prompt_tokens_per_s']} prompt tok/s, {raw['generated_tokens_per_s']} generated tok/s.",
        "",
        "| method | decoding | wall s/q | LLM s/q | prompt tok/q | generated tok/q | tokens' cost s/q "
        "| LLM / cost | LLM / llama.cpp's own s | in-call prompt tok/s | in-call gen tok/s | threads | same replies |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for method, entry in results["methods"].items():
        for path in s["paths"]:
            r = entry[path]
            r["llm_over_llama_own"] = over_own(r)
            lines.append(
                f"| {method} | {path} | {r['wall_s']} | {r['llm_s']} | {r['evaluated_prompt_tokens']} "
                f"| {r['generated_tokens']} | {r['tokens_cost_s']} | {r['llm_over_tokens_cost']}x "
                f"| {_ratio(r['llm_over_llama_own'])} | {r['in_call_prompt_tokens_per_s']} | {r['in_call_generated_tokens_per_s']} "
                f"| {r['threads']} | {entry.get('same_replies', '–')} |")
    parts = [*PARTS, "other_llm_layer"]
    lines += ["", "Split of the LLM seconds per question, and the question's other seconds:", "",
              "| method | decoding | " + " | ".join(parts) + " | retrieval+scoring |",
              "|---|---|" + "---:|" * (len(parts) + 1)]
    for method, entry in results["methods"].items():
        for path in s["paths"]:
            r = entry[path]
            lines.append(f"| {method} | {path} | " + " | ".join(str(r["split_s"][p]) for p in parts)
                         + f" | {r['retrieval_scoring_s']} |")
    lines += _per_hour(results)
    return "\n".join(lines)


def over_own(r: dict[str, Any]) -> float | None:
    """LLM seconds over llama.cpp's own prompt evaluation and generation seconds in the same
    calls: the LLM layer's overhead, whatever speed the machine had during those calls (the
    tokens' cost prices them at the raw probes' rates instead, which a busy moment skews).
    `_markdown` stores it in each path's summary as `llm_over_llama_own` (docs/benchmarks.md)."""
    own = r["split_s"]["prompt_eval"] + r["split_s"]["generation"]
    return round(r["llm_s"] / own, 2) if own else None


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}x"


def _per_hour(results: dict[str, Any]) -> list[str]:
    """Questions per hour of each method (this backend's decoding loop), beside the bound the
    raw throughput sets (the question's tokens at the raw rates, nothing else)."""
    lines = ["", "Questions per hour, one process on this machine (the measured questions' mean wall time), "
             "beside the raw-throughput bound (3600 / the tokens' cost: the model's tokens at the raw "
             "rates and nothing else):", "",
             "| method | wall s/q | questions/hour | raw-throughput bound (q/h) | of the bound | LLM calls/q |",
             "|---|---:|---:|---:|---:|---:|"]
    path = "fast" if "fast" in results["settings"]["paths"] else results["settings"]["paths"][0]
    for method, entry in results["methods"].items():
        r = entry[path]
        per_hour = round(3600 / r["wall_s"]) if r["wall_s"] else None
        bound = round(3600 / r["tokens_cost_s"]) if r["tokens_cost_s"] else None
        share = f"{100 * per_hour / bound:.0f}%" if per_hour and bound else "–"
        r["questions_per_hour"], r["raw_bound_questions_per_hour"] = per_hour, bound
        lines.append(f"| {method} | {r['wall_s']} | {per_hour} | {bound} | {share} | {r['calls']} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_llm_profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=None, help="questions per method (default 4)")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="demo")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--compare", action="store_true", help="both decoding paths, replies checked equal (default)")
    group.add_argument("--reference", action="store_true", help="llama-cpp-python's create_completion only")
    group.add_argument("--fast", action="store_true", help="this backend's decoding loop only")
    args = parser.parse_args(argv)
    paths = ["reference"] if args.reference else ["fast"] if args.fast else ["fast", "reference"]
    results = run(RESULTS, questions=args.questions, methods=args.methods.split(","), dataset=args.dataset,
                  paths=paths)
    command = "python -m bench.bench_llm_profile " + " ".join(argv if argv is not None else sys.argv[1:])
    write_summary(RESULTS, "llm-profile", "LLM profile", command, results["markdown"])
    print(results["markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
