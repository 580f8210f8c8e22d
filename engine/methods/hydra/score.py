"""HydraRAG's evidence pruning without the LLM (Algorithm 4, steps 1-2; paper §4.3, Appendix C).

`prune` takes the candidate pool (KG paths and the knowledge paths the model wrote from Wiki /
domain / web sentences) and keeps:

1. the top `w1` by **relevance** to the skyline indicator I:
   `paper`:  s_rel = lambda_sem * cos(h(I), h(p)) + (1 - lambda_sem) * Jaccard(Topic(q), Ent(p))
   `cosine`: s_rel = cos(h(I), h(p))                      (the authors' released code)
2. of those, the top `w2` by **cross-score** = alpha_cross * s_rel + (1 - alpha_cross) * s_ver,
   with s_ver = alpha_1 * f1 + alpha_2 * f2 + alpha_3 * f3:
   - f1, source prior: rho_src(p) (kg 1.0, wiki 0.8, web 0.7).
   - f2, cross-source support over the W1 pool (Algorithm 4 line 9 looks only there):
     `paper`: min(|Supp(p)|, W_max) / W_max; `code`: 0 / 1 / 2 / 3+ supporting paths ->
     0.6 / 0.7 / 0.8 / 0.9.
   - f3, entity alignment: `paper`: |Ent(p) ∩ E_q| / |Ent(p)| with E_q the question subgraph's
     entities; `code`: the best cosine of p to a KG path of the pool (1.0 for a KG path itself).

Step 3 (the LLM picks W_max of the W2) belongs to the method, not here.

Where the paper leaves a choice open, this module chooses as follows:
- Supp(p_i) = {src(p_j) | Sim(p_i, p_j) >= gamma} is read literally as a *set of source types*,
  over the other paths p_j of the W1 pool whose source differs from p_i's ("supporting external
  sources", "corroboration from independent sources"): agreement of two KG paths is not
  corroboration. With three sources |Supp| <= 2, so f2 is 0, 1/3 or 2/3 and the min() with
  W_max = 3 never binds; we keep the formula as written rather than inventing a divisor. The
  `code` option counts supporting *paths* (same definition of support) instead of types.
- Sim is the cosine of the DRM vectors; gamma is not given in the paper: default 0.8. Measured
  with the default embedder (all-MiniLM-L6-v2): the same fact in other words scores 0.84-0.97
  ("Forrest Gump - directed_by - Robert Zemeckis" / "... - director - ...": 0.94; a 2-hop KG path
  and the model's "Tom Hanks - starred in - Big - directed by - Penny Marshall": 0.84; with
  "acted in ... was directed by": 0.78), other relations of the same entity 0.63-0.77, other
  entities with the same relation 0.55-0.68. Whole-path cosine cannot tell a path from one that
  differs only in its last entity (the Penny Marshall path against "... - Ron Howard": 0.90), so
  no threshold separates every case; 0.8 keeps most paraphrases and most different facts apart.
- Entities are compared case-folded with whitespace collapsed; Ent(p) and Topic(q) are sets.
  A path with no entities gets f3 = 0 and Jaccard 0.
- cos is used as the embedder gives it (not clipped): sentence embedders keep it in [0, 1] in
  practice, and clipping would turn a ranking into ties.
- The three alpha_k default to exactly 1/3 (the paper writes 0.33).
- Ties are broken by the candidate's position in the input, so the result is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

SOURCES = ("kg", "wiki", "web")
RELEVANCE_MODES = ("paper", "cosine")
SUPPORT_MODES = ("paper", "code")
ALIGNMENT_MODES = ("paper", "code")
CODE_SUPPORT_LEVELS = (0.6, 0.7, 0.8, 0.9)  # released code: 0, 1, 2, 3+ supporting paths

# The method config keys `ScoreConfig.from_config` reads, with the paper's defaults (Appendix C).
SCORE_DEFAULTS: dict[str, Any] = {
    "lambda_sem": 0.7, "alpha_cross": 0.7, "w1": 100, "w2": 20, "w_max": 3,
    "prior_kg": 1.0, "prior_wiki": 0.8, "prior_web": 0.7, "alpha_k": [1 / 3, 1 / 3, 1 / 3],
    "gamma": 0.8, "relevance": "paper", "support": "paper", "alignment": "paper",
}


@dataclass(frozen=True)
class Candidate:
    """One evidence path in the pool."""

    text: str                  # the path as the model sees it: "A - relation - B - relation - C"
    entities: tuple[str, ...]  # entity names on the path (as written in text)
    source: str                # "kg" | "wiki" | "web" (domain documents count as "wiki")
    payload: Any = None        # opaque to scoring (GroupedPath, chunk ids, ...)
    # What relevance reads when it differs from what the model sees: a grouped KG path is
    # scored as one member path (the paper scores entity paths; a relation reaching five actors
    # must not lose to one reaching a single year because its text lists more names).
    score_text: str | None = None
    score_entities: tuple[str, ...] | None = None
    # A relevance computed before pruning (`hydra`'s `path_relevance: chains`): used as s_rel as is.
    relevance: float | None = None

    @property
    def scored_text(self) -> str:
        return self.text if self.score_text is None else self.score_text

    @property
    def scored_entities(self) -> tuple[str, ...]:
        return self.entities if self.score_entities is None else self.score_entities


def _default_priors() -> dict[str, float]:
    return {"kg": 1.0, "wiki": 0.8, "web": 0.7}


@dataclass(frozen=True)
class ScoreConfig:
    """The pruning parameters; `from_config` reads them from a hydra method config."""

    lambda_sem: float = 0.7
    alpha_cross: float = 0.7
    w1: int = 100
    w2: int = 20
    w_max: int = 3
    priors: dict[str, float] = field(default_factory=_default_priors)
    alpha_k: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)
    gamma: float = 0.8
    relevance: str = "paper"
    support: str = "paper"
    alignment: str = "paper"

    def __post_init__(self) -> None:
        for name, value, modes in (("relevance", self.relevance, RELEVANCE_MODES),
                                   ("support", self.support, SUPPORT_MODES),
                                   ("alignment", self.alignment, ALIGNMENT_MODES)):
            if value not in modes:
                raise ValueError(f"{name} must be one of {', '.join(modes)}, not {value!r}")
        if len(self.alpha_k) != 3 or any(a < 0 for a in self.alpha_k):
            raise ValueError(f"alpha_k must be three non-negative weights, not {self.alpha_k!r}")
        if self.w1 < 1 or self.w2 < 1 or self.w_max < 1:
            raise ValueError("w1, w2 and w_max must be positive")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ScoreConfig:
        """The scoring keys of a method config (see SCORE_DEFAULTS); a missing key keeps its default."""
        c = {**SCORE_DEFAULTS, **{k: v for k, v in config.items() if k in SCORE_DEFAULTS}}
        alpha = tuple(float(a) for a in c["alpha_k"])
        if len(alpha) != 3:
            raise ValueError(f"alpha_k must be a list of 3 weights, not {c['alpha_k']!r}")
        return cls(lambda_sem=float(c["lambda_sem"]), alpha_cross=float(c["alpha_cross"]),
                   w1=int(c["w1"]), w2=int(c["w2"]), w_max=int(c["w_max"]),
                   priors={"kg": float(c["prior_kg"]), "wiki": float(c["prior_wiki"]),
                           "web": float(c["prior_web"])},
                   alpha_k=(alpha[0], alpha[1], alpha[2]), gamma=float(c["gamma"]),
                   relevance=str(c["relevance"]), support=str(c["support"]),
                   alignment=str(c["alignment"]))


@dataclass
class Scored:
    """One candidate with every score of Algorithm 4.

    Candidates cut at the relevance step keep support/alignment/verification/cross at 0.
    `support_sources` are the other source types whose paths agree with this one (sorted).
    """

    candidate: Candidate
    relevance: float
    prior: float
    support: float = 0.0
    alignment: float = 0.0
    verification: float = 0.0
    cross: float = 0.0
    support_sources: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The scores (rounded) with the path text and source, for a record's trace."""
        scores = {k: round(v, 4) for k, v in asdict(self).items() if isinstance(v, float)}
        return {"text": self.candidate.text, "source": self.candidate.source, **scores,
                "support_sources": list(self.support_sources)}


@dataclass
class Pruned:
    """The two LLM-free pruning steps' survivors, best first."""

    after_relevance: list[Scored]   # top W1 by relevance
    after_cross: list[Scored]       # top W2 by cross score


def normal_name(name: str) -> str:
    """An entity name as compared here: case-folded, whitespace collapsed."""
    return " ".join(name.split()).casefold()


def jaccard(left: Sequence[str], right: Sequence[str]) -> float:
    """|A ∩ B| / |A ∪ B| of two name collections (normalised); 0 when both are empty."""
    a, b = {normal_name(x) for x in left}, {normal_name(x) for x in right}
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def source_prior(source: str, priors: Mapping[str, float]) -> float:
    """f1: the prior of the path's source (ValueError for a source with none)."""
    if source not in priors:
        raise ValueError(f"unknown evidence source {source!r} (known: {', '.join(sorted(priors))})")
    return float(priors[source])


def support_score(supporting_paths: int, supporting_sources: int, config: ScoreConfig) -> float:
    """f2. paper: min(|Supp|, W_max) / W_max over source types; code: 0/1/2/3+ paths -> 0.6..0.9."""
    if config.support == "code":
        return CODE_SUPPORT_LEVELS[min(supporting_paths, len(CODE_SUPPORT_LEVELS) - 1)]
    return min(supporting_sources, config.w_max) / config.w_max


def entity_alignment(entities: Sequence[str], subgraph_entities: set[str]) -> float:
    """f3 (paper): the share of the path's distinct entities that are in the question subgraph."""
    return _known_share(entities, {normal_name(e) for e in subgraph_entities})


def _known_share(entities: Sequence[str], known: set[str]) -> float:
    names = {normal_name(e) for e in entities}
    return len(names & known) / len(names) if names else 0.0


def top(indices: Sequence[int], scores: Sequence[float], k: int) -> list[int]:
    """The k indices with the highest score; ties keep the lower index first."""
    return sorted(indices, key=lambda i: (-scores[i], i))[:k]


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    m = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)


def relevance_scores(candidates: Sequence[Candidate], indicator: str, topic_entities: Sequence[str],
                     vectors: Callable[[Sequence[str]], np.ndarray], config: ScoreConfig) -> list[float]:
    """Algorithm 4 step 1 alone (s_rel of every candidate, in input order), e.g. for the W1 hook
    of the path search. One `vectors` call, for I and every path."""
    return _relevance(candidates, indicator, topic_entities, vectors, config)[0]


def _relevance(candidates: Sequence[Candidate], indicator: str, topic_entities: Sequence[str],
               vectors: Callable[[Sequence[str]], np.ndarray],
               config: ScoreConfig) -> tuple[list[float], np.ndarray]:
    if not candidates:
        return [], np.zeros((0, 0))
    rows = _unit_rows(vectors([indicator, *[c.scored_text for c in candidates]]))
    query, paths = rows[0], rows[1:]
    cosines = paths @ query
    if config.relevance == "cosine":
        scores = [float(cos) for cos in cosines]
    else:
        scores = [config.lambda_sem * float(cos) + (1 - config.lambda_sem) * jaccard(topic_entities, c.scored_entities)
                  for c, cos in zip(candidates, cosines, strict=True)]
    return [s if c.relevance is None else c.relevance for c, s in zip(candidates, scores, strict=True)], paths


def _support(sources: Sequence[str], similarity: np.ndarray, gamma: float) -> tuple[np.ndarray, list[tuple[str, ...]]]:
    """Per row: how many paths of another source agree (Sim >= gamma), and their source types."""
    src = np.array(sources, dtype=object)
    agree = (similarity >= gamma) & (src[:, None] != src[None, :])
    np.fill_diagonal(agree, False)
    kinds = sorted(set(sources))
    by_kind = {k: agree[:, src == k].any(axis=1) for k in kinds}
    return agree.sum(axis=1), [tuple(k for k in kinds if by_kind[k][r]) for r in range(len(sources))]


def prune(candidates: Sequence[Candidate], indicator: str, topic_entities: Sequence[str],
          subgraph_entities: set[str], vectors: Callable[[Sequence[str]], np.ndarray],
          config: ScoreConfig) -> Pruned:
    """Algorithm 4 steps 1-2: top W1 by relevance, then top W2 of those by cross-score.

    `vectors` embeds texts (DenseScorer.vectors); it is called once, for I and every path.
    """
    if not candidates:
        return Pruned([], [])
    relevance, paths = _relevance(candidates, indicator, topic_entities, vectors, config)
    kept = top(range(len(candidates)), relevance, config.w1)
    pool = [candidates[i] for i in kept]
    similarity = paths[kept] @ paths[kept].T
    counts, agreeing = _support([c.source for c in pool], similarity, config.gamma)
    is_kg = np.array([c.source == "kg" for c in pool])
    best_kg = similarity[:, is_kg].max(axis=1) if is_kg.any() else np.zeros(len(pool))
    known = {normal_name(e) for e in subgraph_entities}
    a1, a2, a3 = config.alpha_k
    scored: list[Scored] = []
    for r, (i, c) in enumerate(zip(kept, pool, strict=True)):
        item = Scored(c, relevance[i], source_prior(c.source, config.priors), support_sources=agreeing[r])
        item.support = support_score(int(counts[r]), len(agreeing[r]), config)
        if config.alignment == "code":
            item.alignment = 1.0 if c.source == "kg" else float(best_kg[r])
        else:
            item.alignment = _known_share(c.entities, known)
        item.verification = a1 * item.prior + a2 * item.support + a3 * item.alignment
        item.cross = config.alpha_cross * item.relevance + (1 - config.alpha_cross) * item.verification
        scored.append(item)
    # ties keep the input order, as at the relevance step
    crossed = sorted(range(len(scored)), key=lambda r: (-scored[r].cross, kept[r]))[:config.w2]
    return Pruned(scored, [scored[r] for r in crossed])
