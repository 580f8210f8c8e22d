"""`make bench`: run every benchmark module, write bench/results/<name>.json and SUMMARY.md.

Usage: python -m bench.run_all [kg] [docs] [llm] [graph] [modelcheck] [methods] [shards] [wikiscale] [embed] [report] [embedserver] [llm-profile] [side-by-side] [ingest-profiles]   (no argument: all of them)

`llm-profile` (bench/bench_llm_profile.py: where a question's seconds go, and the decoding loop
checked against llama-cpp-python's) and `side-by-side` (bench/bench_side_by_side.py: the thread
policy, two batches at once) take their sizes from $LOCALKG_BENCH_PROFILE_QUESTIONS and
$LOCALKG_BENCH_SIDE_QUESTIONS; run alone, each takes `--questions N`. `ingest-profiles`
(bench/bench_ingest_profiles.py: each KG profile's ingest against a raw `bulk_load` of generated
dumps) takes its size from $LOCALKG_BENCH_PROFILE_LINES (2,000,000 lines unless set).
"""

from __future__ import annotations

import importlib
import platform
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
BENCHES = {"kg": "bench.bench_kg", "docs": "bench.bench_docs", "llm": "bench.bench_llm",
           "graph": "bench.bench_graph", "modelcheck": "bench.bench_model_check",
           "methods": "bench.bench_methods", "shards": "bench.bench_shards",
           "wikiscale": "bench.bench_wiki_scale", "embed": "bench.bench_embed",
           "report": "bench.bench_report", "embedserver": "bench.bench_embeddings_server_load",
           "llm-profile": "bench.bench_llm_profile", "side-by-side": "bench.bench_side_by_side",
           "ingest-profiles": "bench.bench_ingest_profiles"}


def main(argv: list[str]) -> int:
    chosen = argv or list(BENCHES)
    sections = []
    for name in chosen:
        module = importlib.import_module(BENCHES[name])
        started = time.monotonic()
        print(f"== bench {name} ...", file=sys.stderr)
        result = module.run(RESULTS)
        sections.append(f"## {name}\n\n{result['markdown']}\n\n_({time.monotonic() - started:.0f} s)_\n")
    command = ("python -m bench.run_all " + " ".join(argv)).strip()
    header = (
        "# Benchmark results\n\n"
        f"Produced by `{command}` (`make bench` runs all) on "
        f"{platform.machine()} with {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}. Raw numbers: bench/results/*.json.\n\n"
    )
    summary = RESULTS / ("SUMMARY.md" if not argv else f"SUMMARY-{'-'.join(argv)}.md")
    summary.write_text(header + "\n".join(sections), encoding="utf-8")
    print(summary.read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
