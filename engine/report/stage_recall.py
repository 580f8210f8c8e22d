"""HydraRAG's stage recall from the traces of its records: where a question's gold answer was
still held along the pipeline (question subgraph, BFS paths, relevance pruning W1, cross-score
pruning W2, the LLM's selection W_max, the final answer). Used by `bench.trace_stats` and the
HTML run report's funnel plot.

The trace layout read here is the one `engine/methods/hydra/method.py` writes:
- `extra.subgraph`: the question subgraph's summary, with `gold` (the gold answers among its
  entity names);
- `extra.trace`: one step per phase run, `{"phase": "initial" | "refined" | "predicted" |
  "fallback", ...}`, with `bfs` (a list, one entry per path search: `entities`, `gold`),
  `relevance` and `cross` (`n`, `top`, `entities`, `gold`), `selected` (`texts`,
  `entities`, `gold`) and, with `answer_windows`, `read` (`texts`, `gold`: the windows the answer
  call read beside the selection; the stage is None where no record has it).
Each stage's `gold` list is what counts (the method computes it before capping `entities` at
`trace_max_entities`); a stage without `gold` is matched here by its `entities` (names equal
to a gold answer or alias, normalised) and `texts` (gold named as whole words).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from engine.questions.answer_match import answer_groups, names, normalise_answer, score_record

# HydraRAG's pipeline stages, in order: (key, what the report calls it)
HYDRA_STAGES = (("subgraph", "in the question subgraph"), ("bfs", "in the BFS paths"),
                ("relevance", "after relevance pruning (W1)"), ("cross", "after cross-score pruning (W2)"),
                ("selected", "after the LLM's selection (W_max)"),
                ("read", "in the windows read beside the selection (answer_windows)"),
                ("answer", "in the final answer (Hits@1)"))
# a stage that only some configurations have: its share is None where no record reached it
_OPTIONAL_STAGES = ("read",)


def _gold_names(record: dict[str, Any]) -> set[str]:
    """Every gold answer and alias of a record, normalised."""
    groups = answer_groups([str(a) for a in record.get("answers") or []],
                           ((record.get("extra") or {}).get("gold") or {}).get("answer_groups"))
    return {k for group in groups for name in group if (k := normalise_answer(name))}


def holds_gold(stage: Any, gold: set[str]) -> bool:
    """Whether a trace stage (a dict, or a list of them) holds a gold answer: its `gold` list when
    it has one, else its `entities` (equal names) and `texts` (named as whole words)."""
    if isinstance(stage, list):
        return any(holds_gold(part, gold) for part in stage)
    if not isinstance(stage, dict):
        return False
    if "gold" in stage:
        return bool(stage["gold"])
    if gold & {normalise_answer(str(n)) for n in stage.get("entities") or []}:
        return True
    texts = " | ".join(normalise_answer(str(t)) for t in stage.get("texts") or [])
    return any(names(texts, g) for g in gold)


def is_hydra(record: dict[str, Any]) -> bool:
    return bool((record.get("extra") or {}).get("phase"))


def hydra_stages(record: dict[str, Any], phases: Sequence[str] | None = None) -> dict[str, bool]:
    """Per stage, whether the record's gold answer reached it (in any of `phases`; all when None)."""
    extra = record.get("extra") or {}
    gold = _gold_names(record)
    steps = [s for s in extra.get("trace") or []
             if isinstance(s, dict) and (phases is None or s.get("phase") in phases)]
    scored = score_record(record)
    reached = {"subgraph": holds_gold(extra.get("subgraph"), gold),
               "answer": bool(scored.hits1) if scored else bool((record.get("correct") or {}).get("hits1"))}
    for key, _ in HYDRA_STAGES:
        if key not in reached:  # the stages the phases' steps hold
            reached[key] = any(holds_gold(step.get(key), gold) for step in steps)
    return reached


def _has_stage(record: dict[str, Any], key: str) -> bool:
    return any(isinstance(s, dict) and key in s for s in (record.get("extra") or {}).get("trace") or [])


def stage_recall(records: Sequence[dict[str, Any]], phases: Sequence[str] | None = None) -> dict[str, Any]:
    """The stage recall of hydra records with gold answers: {"n", stage: share}; and `lost`: for
    the wrongly answered, the last stage (in pipeline order) that still held the gold answer
    ("none" when not even the subgraph did)."""
    counted = [r for r in records if is_hydra(r) and _gold_names(r)]
    result: dict[str, Any] = {"n": len(counted)}
    hits: Counter[str] = Counter()
    lost: Counter[str] = Counter()
    for record in counted:
        reached = hydra_stages(record, phases)
        hits.update(k for k, v in reached.items() if v)
        if not reached["answer"]:
            held = [k for k, _ in HYDRA_STAGES[:-1] if reached[k]]
            lost[held[-1] if held else "none"] += 1
    for key, _ in HYDRA_STAGES:
        result[key] = hits[key] / len(counted) if counted else None
    for key in _OPTIONAL_STAGES:
        if not any(_has_stage(r, key) for r in counted):
            result[key] = None
    result["lost"] = dict(lost)
    return result
