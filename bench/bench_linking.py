"""Entity linking on a built MetaQA index (`python -m bench.bench_linking [index]`, default
data/indexes/metaqa, the Makefile's): top-1 topic rate on the embed bench's sample (every
LINK_EVERY-th dev question of 1/2/3-hop, brackets removed; and the same with one letter of the
topic dropped, which only fuzzy or label-embedding matching can link), with the reasons that
linked the misspelt topics and the time per question. Reads the index only.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.bench_embed import LINK_EVERY, linking_cases

REPO = Path(__file__).resolve().parents[1]
INDEX = REPO / "data" / "indexes" / "metaqa"


def measure(index: Path) -> dict[str, Any]:
    """Top-1 linking rate per case, over one linker of `index`."""
    from engine.access.linking import EntityLinker

    linker = EntityLinker.open(index)
    result: dict[str, Any] = {"index": str(index), "sample": f"every {LINK_EVERY}th MetaQA dev question"}
    for case, pairs in linking_cases().items():
        right, reasons = 0, Counter()
        started = time.perf_counter()
        for question, name in pairs:
            found = linker.link(question)
            hit = bool(found) and found[0].label == name
            right += hit
            if hit:
                reasons[found[0].reason.split(",")[0].split(" similarity")[0]] += 1
        seconds = time.perf_counter() - started
        result[case] = {"questions": len(pairs), "top1_pct": round(100 * right / len(pairs), 2),
                        "ms_per_question": round(1000 * seconds / len(pairs), 1),
                        "right_by_reason": dict(reasons.most_common())}
    return result


def _markdown(result: dict[str, Any]) -> str:
    lines = [f"Linking ({result['sample']}, top-1 topic right, index {result['index']}):", "",
             "| case | questions | top-1 % | ms/question |", "|---|---:|---:|---:|"]
    for case in ("without brackets", "one letter dropped"):
        row = result[case]
        lines.append(f"| {case} | {row['questions']} | {row['top1_pct']} | {row['ms_per_question']} |")
    return "\n".join(lines)


def run(results_dir: Path, index: Path = INDEX) -> dict[str, Any]:
    """Measure and write `<results_dir>/linking.json`."""
    result = measure(index)
    result["markdown"] = _markdown(result)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "linking.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


if __name__ == "__main__":
    chosen = Path(sys.argv[1]) if len(sys.argv) > 1 else INDEX
    outcome = run(REPO / "bench" / "results", chosen)
    print(outcome["markdown"])
    print(json.dumps({case: outcome[case]["right_by_reason"] for case in ("without brackets", "one letter dropped")}))
