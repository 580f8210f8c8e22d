"""Where ToG / ToG-R runs stop, and where HydraRAG loses the gold answer, from the traces of a
batch's records (the README's analysis).

Usage: python -m bench.trace_stats RUN_DIR/tog.jsonl [--by FIELD --questions FILE [--pool NAME=V1,V2]] [--against OTHER.jsonl]
       python -m bench.trace_stats RUN_DIR/hydra.jsonl
       python -m bench.trace_stats RUN_DIR/chains.jsonl [--json FILE [--key A/B]]

Prints, per (stop reason, depth), how many questions and how many of them were right (Hits@1),
how many questions had a "sufficient" rejected as ungrounded, and with `--by` the Hits@1 per
value of a field of the questions file (`needs` or `hops` of data/demo/questions.jsonl; MetaQA's
`qtype`, read from the `qa_dev_qtype.txt` beside its `qa_dev.txt`), for `chains` records with the
stage counts below per value; `--pool NAME=V1,V2` makes those values one group and the rest another.

For `hydra` / `hydra-e` records (`extra.phase` set) it prints the stage recall instead of the
stops: the share of questions (with gold answers) whose gold answer is in the question subgraph,
in the BFS paths, after relevance pruning (top W1), after cross-score pruning (top W2), after
the LLM's selection (top W_max), and in the final answer (Hits@1), counted over all phases a
question ran ("any phase") and over the initial phase alone; then, for the questions answered
wrongly, the last stage that still held the gold answer.

With `--against OTHER.jsonl` (the same questions answered another way) it also prints the
questions answered right here and wrong there (gained) and the other way round (lost), and, for
`chains` records, the first step of the first route shown for each gained question.

The trace layout it reads is described in `engine/report/stage_recall.py`, which computes it.

For `chains` records (`extra.chains_shown` set) it prints where the gold answer is lost: a chain
whose first end entity is gold among all chains scored (and its rank), among the routes shown,
in the route chosen, among the allowed answers (chain ends, window spans), in the windows, in
the answer; abstentions; and the wrong answers by the last stage that held the gold answer.
With `--json FILE` these counts (and the `--by` groups) are also added to FILE under `--key`
(default: the run's two folders, e.g. `chains-count/metaqa-1-hop`); bench/chains_stages_md.sh
writes bench/results/CHAINS-STAGES.md and, so, bench/results/chains_stages.json, which
docs/methods/chains.md's stage table reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.summary import add_to_json
from engine.questions.datasets import read_questions

# the stage recall lives in the library (the HTML report draws it too); re-exported for callers here
from engine.report.stage_recall import (
    HYDRA_STAGES,
    holds_gold,
    hydra_stages,
    is_hydra,
    stage_recall,
)

__all__ = ["HYDRA_STAGES", "holds_gold", "hydra_stages", "is_hydra", "main", "print_stage_recall", "stage_recall"]


def question_field(path: Path, name: str) -> dict[str, Any]:
    """Each question's `name` by id: a field of a JSONL questions file (the demo's `needs`, `hops`), or
    of any questions file as the engine reads it (`Question.extra`: MetaQA's `qtype`, from the
    `qa_dev_qtype.txt` beside its `qa_dev.txt`)."""
    values: dict[str, Any] = {}
    for question in read_questions(path):
        values[question.id] = question.extra.get(name, getattr(question, name, None))
    return values


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def print_stage_recall(records: Sequence[dict[str, Any]]) -> None:
    every, initial = stage_recall(records), stage_recall(records, ["initial"])
    print(f"  stage recall over {every['n']} hydra questions with gold answers (any phase / initial phase):")
    for key, label in HYDRA_STAGES:
        if every[key] is None:
            continue
        shown = f"{100 * every[key]:.1f}%"
        if key not in ("subgraph", "answer"):
            shown += f" / {100 * initial[key]:.1f}%"
        print(f"    gold {label}: {shown} ({round(every[key] * every['n'])})")
    phases = Counter(str((r.get("extra") or {}).get("phase")) for r in records if is_hydra(r))
    print("  phase that answered: " + ", ".join(f"{p} {n}" for p, n in phases.most_common()))
    if every["lost"]:
        order = [k for k, _ in HYDRA_STAGES] + ["none"]
        parts = [f"{k} {every['lost'][k]}" for k in order if k in every["lost"]]
        print("  wrong answers by the last stage that held the gold answer: " + ", ".join(parts))


def chains_stage_counts(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Stage recall of `chains` records: how many questions still hold the gold answer at each
    stage, the abstentions, and the wrong answers by the last stage that held it."""
    counts: Counter[str] = Counter()
    lost: Counter[str] = Counter()
    ranks: Counter[str] = Counter()
    for record in records:
        extra = record.get("extra") or {}
        shown = extra.get("chains_shown") or []
        choice = str(extra.get("choice") or "")
        chosen = next((c for c in shown if choice.startswith(c["route"] + " ") or choice == c["route"]), None)
        rank = extra.get("gold_chain_rank")
        stages = {
            "a chain scored": rank is not None,
            "a route shown": any(c.get("gold") for c in shown),
            "the route chosen": bool(chosen and chosen.get("gold")),
            "the allowed answers": bool(extra.get("gold_in_candidates")),
            "the windows": bool(extra.get("gold_in_windows")),
            "the answer": bool((record.get("correct") or {}).get("hits1")),
        }
        counts.update(k for k, v in stages.items() if v)
        counts["questions"] += 1
        counts["abstained"] += bool(record.get("abstained"))
        ranks["1" if rank == 1 else "2-5" if rank and rank <= 5 else "6+" if rank else "none"] += 1
        if not stages["the answer"]:
            held = [k for k in ("a chain scored", "a route shown", "the route chosen", "the allowed answers")
                    if stages[k]]
            lost[held[-1] if held else "none"] += 1
    return {"counts": counts, "lost": lost, "ranks": ranks}


CHAINS_STAGES = ("a chain scored", "a route shown", "the route chosen", "the allowed answers", "the windows",
                 "the answer")


def chains_stages_json(found: Mapping[str, Any], by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`chains_stage_counts` as `--json` keeps it: the questions holding the gold answer per stage,
    abstentions, the best gold chain's rank, the wrong answers by the last stage that held it."""
    counts = found["counts"]
    entry: dict[str, Any] = {
        "questions": counts["questions"], "held": {key: counts[key] for key in CHAINS_STAGES},
        "abstained": counts["abstained"], "rank": {k: found["ranks"][k] for k in ("1", "2-5", "6+", "none")},
        "lost": dict(found["lost"].most_common()),
    }
    if by:
        entry["by"] = dict(by)
    return entry


def print_chains_stages(records: Sequence[dict[str, Any]]) -> None:
    found = chains_stage_counts(records)
    counts, n = found["counts"], found["counts"]["questions"]
    print(f"  chains: gold answer held, of {n} questions:")
    for key in CHAINS_STAGES:
        print(f"    in {key}: {counts[key]}")
    print(f"  abstained: {counts['abstained']}")
    print("  rank of the best gold chain among all scored: " + ", ".join(f"{k} {v}" for k, v in sorted(found["ranks"].items())))
    print("  wrong answers by the last stage that held the gold answer: "
          + ", ".join(f"{k} {v}" for k, v in found["lost"].most_common()))


def compare_runs(records: Sequence[Mapping[str, Any]], other: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ids of the questions right in `records` and wrong in `other` (gained), the other way
    round (lost), and, for chains records, the first step of the first route shown of each gained."""
    def right(record: Mapping[str, Any]) -> bool:
        return bool((record.get("correct") or {}).get("hits1"))

    before = {str(r["id"]): right(r) for r in other}
    gained = [r for r in records if right(r) and before.get(str(r["id"])) is False]
    lost = [str(r["id"]) for r in records if not right(r) and before.get(str(r["id"])) is True]
    steps: Counter[str] = Counter()
    for record in gained:
        shown = (record.get("extra") or {}).get("chains_shown") or []
        if shown:
            steps[str(shown[0].get("relations", "")).split(", then ")[0]] += 1
    return {"gained": [str(r["id"]) for r in gained], "lost": lost, "first_steps": steps}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path)
    parser.add_argument("--by", help="a field of the questions file to group Hits@1 by")
    parser.add_argument("--questions", type=Path, help="the questions file for --by (any format the batch reads)")
    parser.add_argument("--pool", metavar="NAME=V1,V2", help="with --by: the values V1, V2 ... as one group NAME, "
                        "every other value as the group 'other' (MetaQA's two tag types against the rest)")
    parser.add_argument("--json", type=Path, help="chains records: also add the stage counts to this JSON file")
    parser.add_argument("--key", help="where in --json, keys separated by / (default: the run's two folders)")
    parser.add_argument("--against", type=Path, help="records of the same questions answered another way")
    args = parser.parse_args(argv)
    records = _records(args.records)
    stops: Counter[tuple[str, int]] = Counter()
    right: Counter[tuple[str, int]] = Counter()
    ungrounded = 0
    for record in records:
        extra = record.get("extra") or {}
        key = (str(extra.get("stopped")), int(extra.get("depth") or 0))
        stops[key] += 1
        right[key] += bool((record.get("correct") or {}).get("hits1"))
        ungrounded += any("ungrounded_answer" in step for step in extra.get("trace") or [])
    print(f"{args.records}: {len(records)} records")
    chains = any("chains_shown" in (r.get("extra") or {}) for r in records)
    if chains:
        print_chains_stages(records)
    hydra = any(is_hydra(r) for r in records)
    if hydra:
        print_stage_recall(records)
    if not chains and (not hydra or any((r.get("extra") or {}).get("stopped") for r in records)):
        for (reason, depth), n in sorted(stops.items()):
            print(f"  stopped {reason} at depth {depth}: {n} ({right[(reason, depth)]} right)")
        print(f"  questions with a 'sufficient' rejected as ungrounded: {ungrounded}")
    by: dict[str, dict[str, Any]] = {}
    if args.by:
        if args.questions is None:
            parser.error("--by needs --questions")
        field = question_field(args.questions, args.by)
        if args.pool:  # NAME=V1,V2: those values are one group NAME, every other value the group "other"
            name, _, values = args.pool.partition("=")
            pooled = set(values.split(","))
            field = {k: name if str(v) in pooled else "other" for k, v in field.items()}
        groups: dict[str, list[dict[str, Any]]] = {}
        for record in records:
            groups.setdefault(str(field.get(str(record["id"]))), []).append(record)
        for value in sorted(groups):
            group = groups[value]
            hits = sum(bool((r.get("correct") or {}).get("hits1")) for r in group)
            print(f"  {args.by}={value}: {hits} of {len(group)} right")
            by[f"{args.by}={value}"] = {"right": hits, "questions": len(group)}
            if chains:  # where the group's answers are lost, stage by stage
                found = chains_stage_counts(group)
                print("    held: " + ", ".join(f"{key} {found['counts'][key]}" for key in CHAINS_STAGES)
                      + "; wrong, by the last stage that held it: "
                      + (", ".join(f"{k} {v}" for k, v in found["lost"].most_common()) or "none"))
                by[f"{args.by}={value}"].update(chains_stages_json(found))
    if args.against is not None:
        change = compare_runs(records, _records(args.against))
        print(f"  against {args.against}: gained {len(change['gained'])}, lost {len(change['lost'])}")
        if change["first_steps"]:
            print("  first step of the first route of the gained: "
                  + ", ".join(f"{k} {v}" for k, v in change["first_steps"].most_common()))
    if args.json is not None:
        if not chains:
            parser.error("--json keeps the stage counts of chains records; these are not")
        key = args.key.split("/") if args.key else [args.records.parent.parent.name, args.records.parent.name]
        add_to_json(args.json, key, chains_stages_json(chains_stage_counts(records), by))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
