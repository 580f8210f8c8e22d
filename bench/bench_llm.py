"""LLM throughput on this machine, for every installed registry model.

One run, same prompts for every model: prompt-processing and generation tokens/s (from
llama.cpp's own perf counters, greedy, no response cache), and the speed-up of a second call
that shares its fixed prefix (system message) with the first, through LlamaCppLLM's saved
prefix states. Models that are not installed are listed as skipped.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from engine.llm.llama_cpp_backend import LlamaCppLLM
from engine.llm.model_registry import REGISTRY
from engine.llm.models import expected_sha256, verify_model
from ingest.base.errors import ModelError

REPO = Path(__file__).resolve().parents[1]

_FACTS = (
    "Marie Curie was born in Warsaw in 1867. She moved to Paris in 1891 to study physics and "
    "mathematics at the Sorbonne, where she met Pierre Curie. Together they discovered polonium "
    "and radium. She won the Nobel Prize in Physics in 1903 and in Chemistry in 1911. "
)
PROMPTS = [
    "Read these notes and summarise them in three sentences.\n\n" + _FACTS * 4,
    "List every city, year and prize mentioned below, one per line.\n\n" + _FACTS * 3,
    "Write a short paragraph explaining why the following notes matter to the history of "
    "science.\n\n" + _FACTS * 4,
]
GEN_TOKENS = 64

PREFIX_SYSTEM = (
    "You explore a knowledge graph to answer questions. You are given a question, a topic "
    "entity and candidate relations. Choose at most three relations that are most likely to "
    "lead to the answer, and score each between 0 and 1. Reply with JSON only.\n\nExamples:\n"
    + "".join(
        f"Question: {q}\nTopic entity: {e}\nRelations: {r}\nAnswer: {a}\n\n"
        for q, e, r, a in [
            ("Who directed the film that starred Tom Hanks in 1994?", "Tom Hanks",
             "film.actor.film, people.person.spouse, film.film.directed_by",
             '{"relations": ["film.actor.film", "film.film.directed_by"]}'),
            ("Which country is the birthplace of Frida Kahlo in?", "Frida Kahlo",
             "people.person.place_of_birth, location.location.containedby, art.artist.genre",
             '{"relations": ["people.person.place_of_birth"]}'),
            ("What instrument did the founder of Queen play?", "Queen",
             "music.group.founder, music.artist.instrument, music.album.release_date",
             '{"relations": ["music.group.founder", "music.artist.instrument"]}'),
        ] * 3
    )
)
PREFIX_QUESTIONS = [
    "Question: Where was the author of Dune born?\nTopic entity: Dune\n"
    "Relations: book.written_work.author, people.person.place_of_birth, film.film.sequel",
    "Question: Who is married to the director of Inception?\nTopic entity: Inception\n"
    "Relations: film.film.directed_by, people.person.spouse, film.film.release_date",
]


def _perf(llm: LlamaCppLLM) -> tuple[float, int, float, int]:
    import llama_cpp

    data = llama_cpp.llama_perf_context(llm._llm.ctx)
    return data.t_p_eval_ms, data.n_p_eval, data.t_eval_ms, data.n_eval


def _throughput(llm: LlamaCppLLM) -> dict[str, Any]:
    import llama_cpp

    p_ms = g_ms = 0.0
    p_n = g_n = 0
    for prompt in PROMPTS:
        llama_cpp.llama_perf_context_reset(llm._llm.ctx)
        llm.chat([{"role": "user", "content": prompt}], max_tokens=GEN_TOKENS)
        t_p, n_p, t_g, n_g = _perf(llm)
        p_ms, p_n, g_ms, g_n = p_ms + t_p, p_n + n_p, g_ms + t_g, g_n + n_g
    return {
        "prompt_tokens": p_n,
        "prompt_tokens_per_s": round(p_n / (p_ms / 1000), 1) if p_ms else None,
        "generated_tokens": g_n,
        "generated_tokens_per_s": round(g_n / (g_ms / 1000), 1) if g_ms else None,
    }


def _prefix_speedup(llm: LlamaCppLLM) -> dict[str, Any]:
    rows = []
    for question in PREFIX_QUESTIONS:
        messages = [{"role": "system", "content": PREFIX_SYSTEM},
                    {"role": "user", "content": question}]
        start = time.perf_counter()
        result = llm.chat(messages, max_tokens=8)  # short replies: the prompt dominates
        rows.append((time.perf_counter() - start, result.usage))
    (cold_s, _), (warm_s, warm) = rows
    return {
        "prompt_tokens": warm.prompt_tokens,
        "cached_tokens": warm.cached_tokens,
        "first_call_s": round(cold_s, 3),
        "second_call_s": round(warm_s, 3),
        "speedup": round(cold_s / warm_s, 2) if warm_s else None,
    }


def run(results_dir: Path) -> dict[str, Any]:
    """Benchmark every installed registry model; writes `results_dir/llm.json`."""
    results: dict[str, Any] = {
        "machine": {"cpus": len(os.sched_getaffinity(0)), "platform": platform.platform(),
                    # llama.cpp slows down sharply when other processes hold the CPUs
                    "load_average_at_start": round(os.getloadavg()[0], 2)},
        "settings": {"n_ctx": 4096, "generated_tokens_per_prompt": GEN_TOKENS,
                     "prompts": len(PROMPTS), "temperature": 0.0},
        "models": {},
        "skipped": {},
    }
    for name, spec in REGISTRY.items():
        try:
            path = verify_model(spec)
        except ModelError as exc:
            results["skipped"][name] = str(exc)
            continue
        llm = LlamaCppLLM(path, sha256=expected_sha256(spec, path) or "", name=name)
        start = time.perf_counter()
        llm._ensure_loaded()
        load_s = time.perf_counter() - start
        row = {"role": spec.role, "load_s": round(load_s, 2), **_throughput(llm)}
        row["shared_prefix"] = _prefix_speedup(llm)
        results["models"][name] = row
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "llm.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    lines = [
        f"LLM throughput ({results['machine']['cpus']} CPU threads, llama.cpp, greedy, one run; "
        f"1-min load average at start {results['machine']['load_average_at_start']}).",
        "",
        "| model | role | prompt tok/s | generated tok/s | shared-prefix 2nd call (cached/prompt tokens) | speed-up |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, r in results["models"].items():
        p = r["shared_prefix"]
        lines.append(
            f"| {name} | {r['role']} | {r['prompt_tokens_per_s']} | {r['generated_tokens_per_s']} "
            f"| {p['second_call_s']} s vs {p['first_call_s']} s ({p['cached_tokens']}/{p['prompt_tokens']}) "
            f"| {p['speedup']}x |"
        )
    for name in results["skipped"]:
        lines.append(f"| {name} | {REGISTRY[name].role} | not installed | | | |")
    results["markdown"] = "\n".join(lines)
    return results


if __name__ == "__main__":
    print(run(REPO / "bench" / "results")["markdown"])
