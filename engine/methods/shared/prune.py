"""Prune tools of ToG (§2.1, Table 5): keep the best k of a candidate list, with scores.

`llm` asks the model to choose up to k candidates from an enum (best first); `bm25` and
`embedding` score the candidates' text against the question with BM25 or sentence embeddings,
with no LLM call. Scores of the kept candidates sum to 1, so that path scores can be compared
across candidate sets. No call is made when there is nothing to choose (k or fewer candidates).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.methods.shared import prompts
from engine.methods.shared.common import ask, timed
from engine.questions.record import AnswerRecord

if TYPE_CHECKING:
    from engine.methods.context import Context

PRUNE_TOOLS = ("llm", "bm25", "embedding")
_SUFFIXES = ("ing", "ed", "es", "s", "ion", "er")


def rank_scores(n: int) -> list[float]:
    """Scores for a ranked list of n: proportional to n, n-1, ..., 1 and summing to 1."""
    total = n * (n + 1) / 2
    return [(n - i) / total for i in range(n)]


def _stem(words: list[str]) -> list[str]:
    """A crude suffix stripper (direct/directed/director meet), enough for short labels."""
    result = []
    for w in words:
        for suffix in _SUFFIXES:
            if len(w) > len(suffix) + 3 and w.endswith(suffix):
                w = w[: -len(suffix)]
                break
        result.append(w)
    return result


def bm25_scores(query: str, texts: Sequence[str]) -> list[float]:
    """BM25 score of each text for the query (the texts are the whole corpus)."""
    import bm25s

    corpus = [re.sub(r"[_.]", " ", t) for t in texts]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords="en", stemmer=_stem, show_progress=False),
                    show_progress=False)
    tokens = bm25s.tokenize([re.sub(r"[_.]", " ", query)], stopwords="en", stemmer=_stem,
                            return_ids=False, show_progress=False)[0]
    if not tokens:
        return [0.0] * len(texts)
    return [float(s) for s in retriever.get_scores(tokens)]


@dataclass
class Pruner:
    """Chooses among candidates for one question with the configured tool."""

    tool: str
    question: str
    ctx: Context
    record: AnswerRecord
    temperature: float = 0.4
    max_tokens: int = 96
    max_candidates: dict[str, int] = field(default_factory=lambda: {"relations": 40, "entities": 30})
    # llm tool: list the candidates most similar to the question first (sentence embeddings),
    # against a small model's habit of copying the top of a list. Off (the default): the KG's
    # order. Either way, past the cap the most similar candidates are the ones shown.
    order_by_similarity: bool = False
    _question_vector: Any = None

    def relations(self, entity: str, candidates: Sequence[str], k: int) -> list[tuple[str, float]]:
        """Up to k relation texts for `entity`, with scores."""
        return self._choose("relations", candidates, k, lambda shown: prompts.relation_prune_user(
            self.question, entity, shown, k), prompts.RELATION_PRUNE_SYSTEM, "relation_prune")

    def entities(self, fact: str, candidates: Sequence[str], k: int) -> list[tuple[str, float]]:
        """Up to k entity texts that fill the open place of `fact`, with scores."""
        return self._choose("entities", candidates, k, lambda shown: prompts.entity_prune_user(
            self.question, fact, shown, k), prompts.ENTITY_PRUNE_SYSTEM, "entity_prune")

    # -- internals -----------------------------------------------------------------------------

    def _choose(self, key: str, candidates: Sequence[str], k: int, user: Any, system: str,
                stage: str) -> list[tuple[str, float]]:
        unique = list(dict.fromkeys(candidates))
        if len(unique) <= k:
            return [(c, 1.0 / len(unique)) for c in unique]
        if self.tool == "llm":
            shown, cap = unique, self.max_candidates[key]
            if self.order_by_similarity or len(unique) > cap:
                with timed(self.record, stage + "_order"):
                    scores = self._similarities(unique)
                ranked = sorted(range(len(unique)), key=lambda i: (-scores[i], i))[:cap]
                if not self.order_by_similarity:
                    ranked.sort()  # the most similar, in the KG's order
                shown = [unique[i] for i in ranked]
            parsed = ask(self.ctx.llm, self.record, system=system, user=user(shown),
                         schema=prompts.choice_schema(key, shown, k), stage=stage,
                         temperature=self.temperature, max_tokens=self.max_tokens)
            chosen = list(dict.fromkeys(parsed[key]))[:k] if parsed else []
            # a small model may repeat a name: top up in shown order so the beam keeps k
            chosen += [c for c in shown if c not in chosen][: k - len(chosen)]
            return list(zip(chosen, rank_scores(len(chosen)), strict=True))
        scores = self._scores(unique, stage)
        order = sorted(range(len(unique)), key=lambda i: (-scores[i], i))[:k]
        top = [max(scores[i], 0.0) for i in order]
        total = sum(top)
        weights = [s / total for s in top] if total > 0 else rank_scores(len(order))
        return [(unique[i], w) for i, w in zip(order, weights, strict=True)]

    def _scores(self, texts: list[str], stage: str) -> list[float]:
        with timed(self.record, stage):
            if self.tool == "bm25":
                return bm25_scores(self.question, texts)
            if self.tool == "embedding":
                return self._similarities(texts)
        raise ValueError(f"unknown prune tool {self.tool!r} (one of {', '.join(PRUNE_TOOLS)})")

    def _similarities(self, texts: list[str]) -> list[float]:
        """Cosine of each text with the question (normalised sentence embeddings)."""
        embedder = self.ctx.embedder
        if self._question_vector is None:
            self._question_vector = embedder.encode([self.question])[0]
        vectors = embedder.encode([t.replace("_", " ") for t in texts])
        return [float(s) for s in np.asarray(vectors) @ self._question_vector]
