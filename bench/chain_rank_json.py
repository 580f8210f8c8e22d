"""bench/results/chain_rank.json from bench/results/CHAIN-RANK.md: the counts of every
`python -m bench.chain_rank` run that file shows, kept where `bench.chain_rank --json` keeps them.

`bash bench/chain_rank_md.sh` writes both files (44 ranking runs, about 20 minutes on 2 cores);
this reads the Markdown's printed lines instead, for results that were measured before the
bench wrote JSON. Usage: python -m bench.chain_rank_json [CHAIN-RANK.md [chain_rank.json]]
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

from bench.chain_rank import RANKS, build_parser, entry, json_keys
from bench.summary import add_to_json

RESULTS = Path(__file__).resolve().parent / "results"
RUN = re.compile(r"^\$ python -m bench\.chain_rank (?P<args>[^\n]*)\n```\n(?P<out>.*?)\n```", re.MULTILINE | re.DOTALL)
HEAD = re.compile(r"^\S+ \((?P<n>\d+) questions, seed (?P<seed>\d+)\)")
FIRST = re.compile(r"best chain reaches gold first: (\d+) ")
SHOWN = re.compile(r"gold among the routes shown: (\d+) ")
RANK = re.compile(r"rank of the best gold chain: (.*)$", re.MULTILINE)


def runs(markdown: str) -> list[tuple[list[str], dict[str, Any]]]:
    """(keys, entry) of each run the Markdown shows, as `bench.chain_rank --json` writes them."""
    found = []
    for match in RUN.finditer(markdown):
        args = build_parser().parse_args(shlex.split(match["args"]))
        out = match["out"]
        head, first, shown, rank = HEAD.match(out), FIRST.search(out), SHOWN.search(out), RANK.search(out)
        if not (head and first and shown and rank):
            raise ValueError(f"unreadable output of `{match['args']}`:\n{out}")
        if int(head["seed"]) != args.seed:
            raise ValueError(f"`{match['args']}` printed seed {head['seed']}")
        ranks = {k: int(v) for k, v in (part.rsplit(" ", 1) for part in rank[1].split(", "))}
        if not set(ranks) <= set(RANKS):
            raise ValueError(f"`{match['args']}`: unknown rank buckets {sorted(ranks)}")
        found.append((json_keys(args), entry(args, int(head["n"]), int(first[1]), int(shown[1]), ranks)))
    return found


def main(argv: list[str]) -> int:
    source = Path(argv[0]) if argv else RESULTS / "CHAIN-RANK.md"
    target = Path(argv[1]) if len(argv) > 1 else RESULTS / "chain_rank.json"
    found = runs(source.read_text(encoding="utf-8"))
    if not found:
        raise SystemExit(f"{source}: no `python -m bench.chain_rank` runs")
    target.unlink(missing_ok=True)
    for keys, value in found:
        add_to_json(target, keys, value)
    print(f"{target}: {len(found)} runs from {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
