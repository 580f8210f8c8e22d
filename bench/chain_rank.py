"""The `chains` method's LLM-free stage alone: how often the chain scorer ranks a chain that reaches
the gold answer first, and among the routes shown, on a question sample, without any LLM call.

Usage: python -m bench.chain_rank --index DIR --questions FILE [--sample 50 --seed 0]
                                  [--set KEY=VALUE ...] [--show-misses N] [--json FILE]
       python -m bench.chain_rank --merge TARGET PART...   (parallel jobs' --json files into one)

Prints, of the questions whose gold answer any scored chain reaches: the share whose best chain
(distinct end sets, best first) starts with a gold entity (rank 1), whose gold chain is among the
`shown_chains` routes (what the choice call can pick), and the rank histogram. Used to tune and
check the scorer on dev questions before spending LLM time (the README's chains section).

The chains are the graph's own: `doc_steps` (the method's step through the documents, on by
default) is off unless `--set doc_steps=N` is given. The scorer is the one before `kind_nouns`,
`converse_nouns`, `step_direction`, `kin_terms` and `same_twice` (on by default since) unless `--set
kind_nouns=true` / `--set converse_nouns=true` / `--set step_direction=0.3` / `--set kin_terms=true` /
`--set same_twice=true` (and `kind_once`, `inverse_steps`, `unnamed_hops`, `kin_synonyms`,
`unasked_last`, `repeat_mentions`, `co_words`, `mention_order`, `verb_mentions`, `frame_words` and `inverse_scope`, likewise:
`--set kind_once=true`, `--set inverse_steps=true`, `--set unnamed_hops=1.0`, `--set kin_synonyms=true`,
`--set unasked_last=0.5`, `--set repeat_mentions=true`, `--set co_words=true`, `--set mention_order=0.3`,
`--set verb_mentions=true`, `--set frame_words=true`, `--set inverse_scope=graph`) is given, so the counts checked in keep what they
measured.

With `--json FILE` the counts are also added to FILE under `seed N` / the set (`metaqa-1-hop`,
`pq-3h`, `demo`) / the scorer (`SCORERS`: the named variants of bench/chain_rank_md.sh, else the
settings), which docs/methods/chains.md's table reads (bench/results/chain_rank.json).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.summary import add_to_json

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# The scorers of bench/chain_rank_md.sh and bench/chain_rank_meaning_md.sh by their settings, and
# the names the JSON keeps them under. "default" is the default before `meaning_cover` (its
# runs pin `meaning_cover=0`); the default since is "meaning_cover", with or without the setting.
# the `chains` defaults since `inverse_steps` (the options this module pins otherwise, set as the method has them)
_DEFAULTS = ("doc_steps=20", "kind_nouns=true", "converse_nouns=true", "step_direction=0.3", "kin_terms=true",
             "same_twice=true", "kind_once=true", "inverse_steps=true")
SCORERS = {
    frozenset({"asked_type=0", "word_overlap=0", "relation_cover=0", "relation_order=0", "meaning_cover=0"}): "no_terms",
    frozenset({"relation_cover=0", "relation_order=0", "meaning_cover=0"}): "asked_type+word_overlap",
    frozenset({"relation_order=0", "cover_counts=false", "meaning_cover=0"}): "relation_cover",
    frozenset({"meaning_cover=0"}): "default",
    frozenset(): "meaning_cover",
    frozenset({"meaning_cover=0.5"}): "meaning_cover",
    # bench/chain_rank_unnamed_md.sh: the method's defaults with and without `unnamed_hops`
    frozenset({*_DEFAULTS, "unnamed_hops=0"}): "before_unnamed_hops",
    frozenset({*_DEFAULTS, "unnamed_hops=1.0"}): "unnamed_hops",
    # bench/chain_rank_offered_md.sh: the defaults since `unnamed_hops`, alone and with each option offered
    frozenset({*_DEFAULTS, "unnamed_hops=1.0"}) | {"repeat_mentions=true"}: "repeat_mentions",
    frozenset({*_DEFAULTS, "unnamed_hops=1.0"}) | {"reverse_words=true"}: "reverse_words",
    frozenset({*_DEFAULTS, "unnamed_hops=1.0"}) | {"doc_words=1.0"}: "doc_words",
    # bench/chain_rank_kin_md.sh: the defaults since `kin_synonyms` (those before: "unnamed_hops")
    frozenset({*_DEFAULTS, "unnamed_hops=1.0", "kin_synonyms=true"}): "kin_synonyms",
    # bench/chain_rank_unasked_md.sh: the defaults since `unasked_last` (0.5), and the weight 1.0
    frozenset({*_DEFAULTS, "unnamed_hops=1.0", "kin_synonyms=true", "unasked_last=0.5"}): "unasked_last",
    frozenset({*_DEFAULTS, "unnamed_hops=1.0", "kin_synonyms=true", "unasked_last=1.0"}): "unasked_last_1",
    # bench/chain_rank_repeat_md.sh: the defaults since `repeat_mentions` (those before: "unasked_last")
    frozenset({*_DEFAULTS, "unnamed_hops=1.0", "kin_synonyms=true", "unasked_last=0.5",
               "repeat_mentions=true"}): "repeat_mentions_default",
    # bench/chain_rank_co_md.sh: the defaults since `co_words` (those before: "repeat_mentions_default")
    frozenset({*_DEFAULTS, "unnamed_hops=1.0", "kin_synonyms=true", "unasked_last=0.5", "repeat_mentions=true",
               "co_words=true"}): "co_words",
    # bench/chain_rank_order_md.sh: the defaults since `co_words` with `mention_order` (offered, off by default)
    frozenset({*_DEFAULTS, "unnamed_hops=1.0", "kin_synonyms=true", "unasked_last=0.5", "repeat_mentions=true",
               "co_words=true", "mention_order=0.3"}): "mention_order",
    # bench/chain_rank_verb_md.sh: the defaults since `mention_order` and `verb_mentions` (those before: "co_words")
    frozenset({*_DEFAULTS, "unnamed_hops=1.0", "kin_synonyms=true", "unasked_last=0.5", "repeat_mentions=true",
               "co_words=true", "mention_order=0.3", "verb_mentions=true"}): "verb_mentions",
    # bench/chain_rank_frame_md.sh: the defaults since `frame_words` (those before: "verb_mentions")
    frozenset({*_DEFAULTS, "unnamed_hops=1.0", "kin_synonyms=true", "unasked_last=0.5", "repeat_mentions=true",
               "co_words=true", "mention_order=0.3", "verb_mentions=true", "frame_words=true"}): "frame_words",
    # bench/chain_rank_inverse_md.sh: the defaults since `inverse_scope=graph` (those before: "frame_words")
    frozenset({*_DEFAULTS, "unnamed_hops=1.0", "kin_synonyms=true", "unasked_last=0.5", "repeat_mentions=true",
               "co_words=true", "mention_order=0.3", "verb_mentions=true", "frame_words=true",
               "inverse_scope=graph"}): "inverse_scope",
}
RANKS = ("1", "2-5", "6+", "none")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.chain_rank", description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", required=True, type=Path)
    parser.add_argument("--questions", required=True, type=Path)
    parser.add_argument("--format", default="auto")
    parser.add_argument("--sample", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--show-misses", type=int, default=0, help="print this many questions whose gold chain is not first")
    parser.add_argument("--json", type=Path, help="also add the counts to this JSON file (see the module's doc)")
    return parser


def set_name(questions: Path) -> str:
    """The name a questions file's results are kept under: `metaqa-1-hop`, `pq-3h`, `demo`."""
    hop = next((part for part in questions.parts if re.fullmatch(r"\d+-hop", part)), None)
    if hop is not None and any("metaqa" in part.lower() for part in questions.parts):
        return f"metaqa-{hop}"
    if questions.stem == "questions":
        return questions.parent.name
    return questions.stem.lower()


def json_keys(args: argparse.Namespace) -> list[str]:
    """Where `--json` keeps a run: seed, set, scorer."""
    scorer = SCORERS.get(frozenset(args.settings), " ".join(args.settings))
    return [f"seed {args.seed}", set_name(args.questions), scorer]


def entry(args: argparse.Namespace, n: int, first: int, shown_gold: int, ranks: Mapping[str, int]) -> dict[str, Any]:
    """One run's counts as `--json` writes them (what the printed lines say)."""
    return {"questions_file": str(args.questions), "settings": list(args.settings), "questions": n,
            "best_first": first, "gold_shown": shown_gold, "rank": {k: ranks.get(k, 0) for k in RANKS}}


def merge_parts(target: Path, parts: list[Path]) -> None:
    """Add the counts of JSON files written by parallel jobs (`--json PART`) to `target`, then
    remove the parts (bench/chain_rank_*_md.sh run two jobs at a time)."""
    for part in parts:
        for seed, sets in json.loads(part.read_text(encoding="utf-8")).items():
            for name, scorers in sets.items():
                for scorer, value in scorers.items():
                    add_to_json(target, [seed, name, scorer], value)
        part.unlink()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--merge"]:  # --merge TARGET PART...
        merge_parts(Path(argv[1]), [Path(p) for p in argv[2:]])
        return 0
    args = build_parser().parse_args(argv)

    from engine.llm.scripted import ScriptedLLM
    from engine.methods.chains.method import ChainsRun
    from engine.methods.shared.labels import display_text
    from engine.methods.shared.topics import linked_or_searched
    from engine.questions.datasets import read_questions
    from engine.runs.batch import method_configs, select_questions
    from engine.runs.context import open_context

    # the graph's own chains (`doc_steps`, on by default in the method, only when set here) and the
    # scorer before `kind_nouns`, `converse_nouns`, `step_direction`, `kin_terms`, `same_twice`, `kind_once`,
    # `inverse_steps`, `unnamed_hops`, `kin_synonyms`, `unasked_last`, `repeat_mentions`, `co_words`, `mention_order`,
    # `verb_mentions`, `frame_words` and `inverse_scope=graph` (likewise), so the counts of
    # bench/results/chain_rank.json keep what they measured
    keys = {s.split("=")[0].removeprefix("chains.") for s in args.settings}
    pinned = [f"{k}={v}" for k, v in (("doc_steps", 0), ("kind_nouns", "false"), ("converse_nouns", "false"),
                                      ("step_direction", 0), ("kin_terms", "false"), ("same_twice", "false"),
                                      ("kind_once", "false"), ("inverse_steps", "false"), ("unnamed_hops", 0),
                                      ("kin_synonyms", "false"), ("unasked_last", 0), ("repeat_mentions", "false"),
                                      ("co_words", "false"), ("mention_order", 0), ("verb_mentions", "false"),
                                      ("frame_words", "false"), ("inverse_scope", "subgraph"))
              if k not in keys]
    config = method_configs(["chains"], [*pinned, *args.settings])["chains"]
    questions = select_questions(read_questions(args.questions, args.format), sample=args.sample, seed=args.seed)
    ctx = open_context(args.index, ScriptedLLM([]), cache=False)
    ranks: Counter[str] = Counter()
    first = shown_gold = 0
    misses: list[str] = []
    for question in questions:
        run = ChainsRun(question, ctx, config)
        topics = linked_or_searched(question, ctx, run.record, int(config["max_topic_entities"]),
                                    int(config["topic_search"]), lambda e: display_text(ctx.kg, e))
        run.plan(topics)
        rank = run.record.extra.get("gold_chain_rank")
        ranks["none" if rank is None else "1" if rank == 1 else "2-5" if rank <= 5 else "6+"] += 1
        first += rank == 1
        routes = run.record.extra.get("chains_shown", [])
        shown_gold += any(r["gold"] for r in routes)
        if rank != 1 and len(misses) < args.show_misses:
            lines = [f"{question.question}  (gold {question.answers[:2]}, rank {rank})"]
            lines += [f"    {r['score']:.3f} {r['relations']}{'  <- gold' if r['gold'] else ''}" for r in routes]
            misses.append("\n".join(lines))
    n = len(questions)
    print(f"{args.questions} ({n} questions, seed {args.seed}) {' '.join(args.settings)}")
    print(f"  best chain reaches gold first: {first} ({100 * first / max(n, 1):.0f}%)")
    print(f"  gold among the routes shown: {shown_gold} ({100 * shown_gold / max(n, 1):.0f}%)")
    print("  rank of the best gold chain: " + ", ".join(f"{k} {ranks[k]}" for k in ("1", "2-5", "6+", "none") if ranks[k]))
    for miss in misses:
        print(miss)
    if args.json is not None:
        add_to_json(args.json, json_keys(args), entry(args, n, first, shown_gold, ranks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
