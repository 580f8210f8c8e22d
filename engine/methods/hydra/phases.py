"""The helpers of HydraRAG's refined and predicted phases: the follow-up question and its
indicator, the model's predicted answers, and their alignment with subgraph entities."""

from __future__ import annotations

from collections.abc import Sequence

from engine.methods.hydra import prompts as hp
from engine.methods.hydra.answer import HydraRun
from engine.methods.hydra.score import Candidate
from engine.methods.hydra.state import Analysis, Attempt
from engine.methods.shared.common import timed
from index.entities import normalise
from ingest.base.errors import LocalkgError


def refine(run: HydraRun, analysis: Analysis, last: Attempt) -> tuple[str, str, list[str]]:
    """The follow-up question, its indicator and its topic entities (linked; the question's own
    first). A failed call keeps the question and the skyline."""
    parsed = run._ask(hp.REFINE_SYSTEM, hp.refine_user([c.text for c in last.selected], analysis.skyline, run.text),
                      hp.REFINE_SCHEMA, "refine", "temperature_exploration", "refine_max_tokens")
    if not isinstance(parsed, dict):
        return run.text, analysis.skyline, list(run.topics)
    q_new = " ".join(str(parsed["question"]).split())
    i_new = " ".join(str(parsed["skyline"]).split()) or analysis.skyline
    topics = list(run.topics)
    try:
        linker = run.ctx.linker
        topics += [c.entity for c in linker.link(q_new) if linker.has(c.entity)][: run.config.max_topic_entities]
    except (LocalkgError, RuntimeError):
        pass
    return q_new, i_new, list(dict.fromkeys(topics))


def predict(run: HydraRun, pool: Sequence[Candidate]) -> list[tuple[str, str]]:
    k = run.config.w_max
    shown = list(dict.fromkeys(c.text for c in pool))[: 2 * k]  # the paths chosen in both phases
    parsed = run._ask(hp.PREDICT_SYSTEM, hp.predict_user(shown, run.text, k), hp.predict_schema(k), "predict",
                      "temperature_exploration", "predict_max_tokens")
    if not isinstance(parsed, dict):
        return []
    found = [(" ".join(str(p["answer"]).split()), " ".join(str(p["skyline"]).split()))
             for p in parsed["predictions"]]
    return [(a, s) for a, s in found if a]


def align(run: HydraRun, answer: str) -> tuple[str | None, float]:
    """A predicted answer's entity in the subgraph: its name exactly, else the most similar name
    (cosine >= align_threshold) among the first `max_align_nodes` entities by hop distance."""
    labels = run.subgraph_labels()
    key = normalise(answer)
    for node, label in labels.items():
        if normalise(label) == key:
            return node, 1.0
    if run.scorer is None or run.sub is None:
        return None, 0.0
    depth = run.sub.depth
    nodes = sorted((n for n in labels if n not in run.topics), key=lambda n: (depth.get(n, 99), n))
    nodes = nodes[: run.config.max_align_nodes]
    if not nodes:
        return None, 0.0
    with timed(run.record, "alignment"):
        best = run.scorer.rank(answer, [labels[n] for n in nodes], 1)[0]
    return (nodes[best[0]], best[1]) if best[1] >= run.config.align_threshold else (None, best[1])
