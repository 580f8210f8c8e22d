"""`Answer`: what `Index.ask` returns, a typed view of one per-question record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.questions.record import AnswerRecord


@dataclass(frozen=True)
class Answer:
    """One question answered by one method: the answer, its cost, its error, and the full
    record (`raw`, the JSONL line a batch run writes; `record`, the same as an AnswerRecord)."""

    question: str
    method: str
    prediction: str
    predictions: list[str]
    answer_source: str
    abstained: bool
    calls: int  # LLM calls made (cache hits included)
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    error: str | None
    correct: dict[str, Any] = field(default_factory=dict)  # scores, when gold answers were given
    topic_entities: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """The question was answered without a question-level error."""
        return self.error is None

    @property
    def record(self) -> AnswerRecord:
        """The record as an AnswerRecord (evidence paths as EvidencePath objects)."""
        from engine.questions.record import AnswerRecord

        return AnswerRecord.from_dict(self.raw)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Answer:
        """The typed view of a record dict (a line of a batch run's `<method>.jsonl` too)."""
        calls = raw.get("llm_calls") or []
        return cls(
            question=raw.get("question", ""), method=raw.get("method", ""),
            prediction=raw.get("prediction", ""), predictions=list(raw.get("predictions") or []),
            answer_source=raw.get("answer_source", "none"), abstained=bool(raw.get("abstained")),
            calls=len(calls), prompt_tokens=sum(int(c.get("prompt_tokens") or 0) for c in calls),
            completion_tokens=sum(int(c.get("completion_tokens") or 0) for c in calls),
            seconds=float(raw.get("seconds") or 0.0), error=raw.get("error"),
            correct=dict(raw.get("correct") or {}), topic_entities=list(raw.get("topic_entities") or []),
            raw=raw,
        )
