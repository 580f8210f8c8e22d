"""`hydra`'s `path_relevance: chains` (ours, not the paper's): KG paths scored by the `chains`
method's LLM-free chain scorer (`chain_scoring.ChainScorer`, its default weights) against the
question with the topic entities masked, instead of by cosine (and Jaccard) to the skyline
indicator that the model wrote.

Why: the 0.5B model's skyline barely follows the question's depth (two relations for about half
of the 3-hop questions), and with every depth searched (`initial_depth=max path_lengths=up_to`)
the paper's relevance cannot tell a 2-hop path from the 3-hop one the question asks for. The
chain scorer reads which relation words the question says, how often and in which order, and
what it asks for (a person, a year), so the grouped path the question describes goes first in
the W2 list that the model selects from.

Where it acts: the W1 hook of the path search (each partial path by its relation chain and the
entity sets reached so far) and the relevance step of pruning (each grouped KG path; the scores
min-max scaled over the pool's KG paths, so the best is 1.0 and the document paths, scored as in
the paper, keep their scale). Everything after relevance (cross-score, the model's selection,
the answer) is the paper's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.access.graph import GraphPath, GroupedPath, Subgraph
from engine.access.retrieval import DenseScorer
from engine.methods.shared.chain_plans import Chain
from engine.methods.shared.chain_scoring import (
    CHAINS_WEIGHTS,
    DEFAULT_WEIGHTS,
    ChainScorer,
    masked_question,
)

Label = Callable[[str], str]


class ChainRelevance:
    """The chain scorer of one question, over its subgraph's relations."""

    def __init__(self, question: str, topic_labels: Sequence[str], sub: Subgraph, label: Label,
                 relation_label: Label, dense: DenseScorer, weights: str = "first") -> None:
        self.query = masked_question(question, topic_labels)
        relations = sorted({key for _, _, key in sub.graph.edges(keys=True)})
        chosen = CHAINS_WEIGHTS if weights == "chains" else DEFAULT_WEIGHTS
        self.scorer = ChainScorer("dense", self.query, relation_label, dense, chosen, label, relations)

    def of_groups(self, groups: Sequence[GroupedPath]) -> list[float]:
        """Raw chain scores of grouped paths (one per relation sequence)."""
        if not groups:
            return []
        return self.scorer([Chain(g.topic, g.relations, g.sets) for g in groups])

    def of_paths(self, paths: Sequence[GraphPath]) -> list[float]:
        """Raw chain scores of partial paths: the paths of one relation chain share its score, with
        the entity sets they reach together (the hub penalty and the asked type read them)."""
        chains: dict[tuple[str, tuple[tuple[str, str], ...]], list[GraphPath]] = {}
        for path in paths:
            chains.setdefault(path.chain, []).append(path)
        keys = list(chains)
        built = []
        for topic, relations in keys:
            members = chains[(topic, relations)]
            sets = [list(dict.fromkeys(p.entities[i] for p in members)) for i in range(len(relations) + 1)]
            built.append(Chain(topic, tuple(relations), sets))
        scores = dict(zip(keys, self.scorer(built), strict=True)) if built else {}
        return [scores[p.chain] for p in paths]


def scaled(scores: Sequence[float]) -> list[float]:
    """Min-max scaled to [0, 1] (all equal: 1.0 each)."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high - low < 1e-12:
        return [1.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]
