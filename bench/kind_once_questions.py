"""The dev questions on which `chains`' `kind_once` acts, without the LLM or the graph search.

`kind_once` changes the chain scorer only where a question says a relation label's head noun both
as the kind it asks for ("which company") and inside the label ("a sibling company"); this lists,
per evaluation set (its 50 dev questions, seed 0; the demo: its 54), the questions where that
holds for some relation of the index (every relation the index has, a superset of any question
subgraph's, so a question not listed is scored the same with or without the option).

    python -m bench.kind_once_questions      # output: bench/results/KIND-ONCE.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq

from engine.methods.shared.chain_scoring import ChainScorer, ScoreWeights, masked_question
from engine.questions.datasets import read_questions
from engine.runs.batch import select_questions

SHARED = Path("../shared/data")
SETS = [*((f"MetaQA {h}-hop", "data/indexes/metaqa", SHARED / f"metaqa/questions/{h}-hop/qa_dev.txt", 50)
          for h in (1, 2, 3)),
        ("PQ-3H", "data/indexes/pq3h", SHARED / "pathquestion/PQ-3H.txt", 50),
        ("AdvHotpotQA", "data/indexes/hotpot", SHARED / "paper_questions/tog2/hotpotadv_dev.json", 50),
        ("demo", "data/indexes/demo", Path("data/demo/questions.jsonl"), 54)]


def acted_on(index: str, questions: Path, sample: int) -> tuple[int, list[str]]:
    """The number of questions read and those on which `kind_once` acts."""
    rows = pq.read_table(Path(index) / "relations.parquet", columns=["id", "label"]).to_pylist()
    labels = {r["id"]: r["label"] for r in rows}
    weights = ScoreWeights(0.0, 0.0, 0.0, 0.0, kind_nouns=True, kind_once=True)
    chosen = select_questions(read_questions(questions, "auto"), sample=sample, seed=0)
    hits = [q.question for q in chosen
            if ChainScorer("lexical", masked_question(q.question, []), lambda r: labels.get(r, r), None, weights,
                           lambda e: e, list(labels)).kind_at]
    return len(chosen), hits


def main() -> int:
    for name, index, questions, sample in SETS:
        n, hits = acted_on(index, questions, sample)
        print(f"{name}: {len(hits)} of {n} questions")
        for question in hits:
            print(f"  {question}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
