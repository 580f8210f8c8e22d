"""One table of methods across datasets: accuracy beside LLM calls, prompt tokens and LLM seconds
per question, from the records of several run folders (the README's HydraRAG table).

Usage: python -m bench.method_table bench/method_tables/qwen2.5-coder-0.5b.json [--out FILE.md]

The spec (JSON) names the methods (the table's row order within a set) and the sets, each with
its accuracy metric (`hits1`, or `em_tok` for AdvHotpotQA) and the run folders that hold its
methods' records:

    {"title": "...", "methods": ["io", "rag", "tog"],
     "sets": [{"name": "MetaQA 1-hop", "metric": "hits1", "runs": ["data/runs/eval/metaqa-1-hop"]}]}

Each folder is scored afresh (`engine.runs.evaluate`, nothing written into it). A method found
in several folders of one set is taken from the first that has it; a method no folder has is
left out of that set's rows and listed under "not run", as is a folder that does not exist (so
the table shows what is missing instead of failing). A method whose run is unfinished is listed there too,
with its record count, not in the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from engine.runs.eval_tables import METRIC_NAMES
from engine.runs.evaluate import evaluate_run

ACCURACY = ("hits1", "em_tok", "em", "f1_tok", "paper_em")


def read_spec(path: Path) -> dict[str, Any]:
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"{path}: {exc}") from None
    for i, s in enumerate(spec.get("sets", [])):
        missing = [k for k in ("name", "metric", "runs") if k not in s]
        if missing:
            raise SystemExit(f"{path}: sets[{i}] lacks {', '.join(missing)}")
        if s["metric"] not in ACCURACY:
            raise SystemExit(f"{path}: sets[{i}].metric {s['metric']!r} is not one of {', '.join(ACCURACY)}")
    if not spec.get("methods"):
        raise SystemExit(f"{path}: no methods")
    return spec


def method_rows(spec: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows, notes): one row per set and method found, in the spec's order."""
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for s in spec["sets"]:
        found: dict[str, tuple[str, dict[str, Any]]] = {}
        made = False
        for run in s["runs"]:
            if not (Path(run) / "run.json").exists():
                notes.append(f"{s['name']}: {run} not run")
                continue
            made = True
            summary = evaluate_run(Path(run), write=False)
            for method, m in summary["methods"].items():
                if m.get("records"):  # a method listed in run.json but never answered is not run
                    found.setdefault(method, (run, m))
        absent = [m for m in spec["methods"] if m not in found]
        if made and absent:  # a folder of the set exists, these methods have no records in it
            notes.append(f"{s['name']}: {', '.join(absent)} not run")
        for method in spec["methods"]:
            if method not in found:
                continue
            run, m = found[method]
            if m.get("records") != m.get("expected"):  # a number a rerun would change is not shown
                notes.append(f"{s['name']}: {method} unfinished in {run} ({m.get('records')} of {m.get('expected')})")
                continue
            rows.append({"set": s["name"], "metric": s["metric"], "method": method, "run": run,
                         "accuracy": m.get(s["metric"]), "records": m.get("records"), "expected": m.get("expected"),
                         "llm_calls": m.get("llm_calls"), "prompt_tokens": m.get("prompt_tokens"),
                         "llm_seconds": m.get("llm_seconds")})
    return rows, notes


def _num(value: Any, fmt: str) -> str:
    return "–" if value is None else format(float(value), fmt)


def format_table(spec: dict[str, Any], rows: list[dict[str, Any]], notes: list[str]) -> str:
    lines = [f"### {spec.get('title', 'methods')}", "",
             "| set | method | accuracy (%) | LLM calls/q | prompt tok/q | LLM s/q | run |",
             "|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        acc = _num(None if r["accuracy"] is None else 100 * r["accuracy"], ".1f")
        lines.append(f"| {r['set']} | {r['method']} | {acc} | {_num(r['llm_calls'], '.1f')} | "
                     f"{_num(r['prompt_tokens'], '.0f')} | {_num(r['llm_seconds'], '.1f')} | {r['run']} |")
    metrics = sorted({r["metric"] for r in rows})
    lines += ["", "accuracy: " + "; ".join(f"{m} = {METRIC_NAMES[m]}" for m in metrics)
              + ". LLM s/q: model time per question as recorded (replays from the response cache count "
              "their original time)."]
    if notes:
        lines += ["", "Not run or unfinished:", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", type=Path)
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    spec = read_spec(args.spec)
    text = format_table(spec, *method_rows(spec))
    sys.stdout.write(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
