"""Where ToG / ToG-R runs stop, from the traces of a batch's records (the README's analysis).

Usage: python -m bench.trace_stats RUN_DIR/tog.jsonl [--by FIELD --questions FILE.jsonl]

Prints, per (stop reason, depth), how many questions and how many of them were right (Hits@1),
how many questions had a "sufficient" rejected as ungrounded, and with `--by` the Hits@1 per
value of a field of the questions file (e.g. `needs` or `hops` of data/demo/questions.jsonl).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path)
    parser.add_argument("--by", help="a field of the questions file to group Hits@1 by")
    parser.add_argument("--questions", type=Path, help="the questions file (JSONL) for --by")
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
    for (reason, depth), n in sorted(stops.items()):
        print(f"  stopped {reason} at depth {depth}: {n} ({right[(reason, depth)]} right)")
    print(f"  questions with a 'sufficient' rejected as ungrounded: {ungrounded}")
    if args.by:
        if args.questions is None:
            parser.error("--by needs --questions")
        field = {str(q["id"]): q.get(args.by) for q in _records(args.questions)}
        total: Counter[str] = Counter()
        hits: Counter[str] = Counter()
        for record in records:
            value = str(field.get(str(record["id"])))
            total[value] += 1
            hits[value] += bool((record.get("correct") or {}).get("hits1"))
        for value in sorted(total):
            print(f"  {args.by}={value}: {hits[value]} of {total[value]} right")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
