"""The per-question record every method returns and every batch run writes (one JSONL line).

Evidence paths are `engine.access.graph.EvidencePath` (the graph module's model of a path with
its provenance)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from engine.access.graph import EvidencePath

AnswerSource = Literal["kg", "doc", "both", "llm", "none"]  # both: the KG paths and a document


@dataclass
class Question:
    """A question as read from any dataset file."""

    id: str
    question: str
    answers: list[str] = field(default_factory=list)
    topic_entities: list[str] = field(default_factory=list)  # ids or names; linking resolves them
    gold_relations: list[str] | None = None  # gold relation path where the dataset has one
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class AnswerRecord:
    """What a method produced for one question, with its full trace and cost."""

    id: str
    question: str
    answers: list[str]
    method: str
    prediction: str = ""
    predictions: list[str] = field(default_factory=list)
    answer_source: AnswerSource = "none"
    topic_entities: list[dict[str, Any]] = field(default_factory=list)  # {id, label, mention, reason}
    paths: list[EvidencePath] = field(default_factory=list)
    llm_calls: list[dict[str, Any]] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    config_hash: str = ""
    correct: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # The method said "not found" (an option of the evidence methods, e.g. `--set abstain=true`):
    # no prediction, answer_source "none".
    abstained: bool = False
    # Every LLM call of the question: {stage, messages, reply, error, cache_hit}. A batch moves it
    # to RUN/calls/<method>.jsonl (engine/runs/transcripts.py), so record files stay readable.
    llm_transcript: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AnswerRecord:
        data = dict(data)
        data["paths"] = [EvidencePath.from_dict(p) for p in data.get("paths", [])]
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})
