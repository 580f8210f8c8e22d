"""The scoring rules of `tog2` (ToG-2 §3.2), as plain functions.

- `entity_scores`: the context-based entity prune (Eq. 6): an entity's score is the sum, over the
  top-K ranked context units, of score × exp(-alpha × rank) for the units that belong to it
  (rank 1 is the best unit).
- `kept_relations`: the relation prune's rule: scores 0..10 become 0..1, those under the
  threshold are dropped, then the top W per entity stay.
- `triple_sentence`: a candidate's triple as a short sentence (Eq. 5's triple_sentence).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def decay_weight(rank: int, alpha: float) -> float:
    """w_k = exp(-alpha × k) for the k-th ranked unit (k from 1)."""
    return math.exp(-alpha * rank)


def entity_scores(ranked: Sequence[tuple[K, float]], k: int, alpha: float) -> dict[K, float]:
    """Eq. 6 over `ranked`, the (owner, score) of every context unit, best first.

    Only the first `k` units count; an owner with no unit among them gets no entry.
    """
    scores: dict[K, float] = {}
    for rank, (owner, score) in enumerate(ranked[:k], 1):
        scores[owner] = scores.get(owner, 0.0) + score * decay_weight(rank, alpha)
    return scores


def kept_relations(scored: Sequence[tuple[K, int | float]], threshold: float, width: int,
                   scale: float = 10.0) -> list[tuple[K, float]]:
    """The relations of one entity that pass: score/scale >= threshold, best `width`, best first.

    A relation named twice keeps its best score; ties keep the model's order.
    """
    best: dict[K, float] = {}
    for key, raw in scored:
        value = float(raw) / scale
        if key not in best or value > best[key]:
            best[key] = value
    passing = [(key, value) for key, value in best.items() if value >= threshold]
    order = sorted(range(len(passing)), key=lambda i: (-passing[i][1], i))
    return [passing[i] for i in order[:width]]


def triple_sentence(subject: str, relation: str, obj: str) -> str:
    """(subject, relation, object) as a short sentence: "Kestrel Cell Works supplier of Norvale Motors."."""
    return " ".join(f"{subject} {relation.replace('_', ' ')} {obj}".split()) + "."
