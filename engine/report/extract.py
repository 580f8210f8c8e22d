"""Records -> the report's compact data: a light index of every question (what the browser
filters and lists) and, per question, the details one opens (calls, prompts, evidence).

Index (decoded when the page opens):
    {"datasets": [label], "methods": [name], "strings": [shared long texts],
     "questions": [[id, dataset, question, [gold...], {method: [prediction, ok, error, calls,
                    prompt tokens, seconds]}], ...]}
`ok` is 1 (right, Hits@1 as `eval` scores it), 0 (wrong) or null (no gold answers); a method
without a record for the question is absent from its dict.

Details (one entry per question, read by the page only when the question is opened):
    {method: {"ps": predictions, "src": answer source, "ab": abstained, "e": error,
              "x": {phase, stopped, support}, "calls": [[stage, prompt tokens, completion tokens,
              seconds, cache hit, error]], "tx": [[stage, [[role, text or string index]], reply,
              error]], "g": evidence graph}}
System prompts repeat in every question of a method, so they are stored once in `strings` and
referred to by index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.questions.answer_match import score_record
from engine.report.evidence import record_evidence

PREDICTION_CHARS = 300
EXTRA_KEYS = ("phase", "stopped", "depth", "support", "grounding")


def _clip(text: Any, limit: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class ReportData:
    """What the HTML writer embeds; filled run by run, method by method."""

    datasets: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    questions: list[list[Any]] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)
    prompt_chars: int = 6000
    _slots: dict[tuple[int, str], int] = field(default_factory=dict)
    _string_ids: dict[str, int] = field(default_factory=dict)

    def question_slot(self, dataset: int, qid: str, text: str, gold: list[str]) -> int:
        """The position of a question (made on first sight; a later record may fill its text)."""
        key = (dataset, qid)
        if key not in self._slots:
            self._slots[key] = len(self.questions)
            self.questions.append([qid, dataset, text, gold, {}])
            self.details.append({})
        slot = self._slots[key]
        if text and not self.questions[slot][2]:
            self.questions[slot][2], self.questions[slot][3] = text, gold
        return slot

    def shared(self, text: str) -> int:
        if text not in self._string_ids:
            self._string_ids[text] = len(self.strings)
            self.strings.append(text)
        return self._string_ids[text]

    def add_record(self, dataset: int, record: dict[str, Any], calls: list[dict[str, Any]] | None) -> None:
        """One method's record of one question (its transcript `calls` when the run kept one)."""
        method = str(record.get("method") or "?")
        if method not in self.methods:
            self.methods.append(method)
        slot = self.question_slot(dataset, str(record["id"]), str(record.get("question") or ""),
                                  [str(a) for a in record.get("answers") or []])
        scored = score_record(record)
        costs = [c for c in record.get("llm_calls") or [] if isinstance(c, dict)]
        self.questions[slot][4][method] = [
            _clip(record.get("prediction"), PREDICTION_CHARS),
            None if scored is None else int(bool(scored.hits1)),
            1 if record.get("error") else 0,
            len(costs),
            sum(int(c.get("prompt_tokens") or 0) for c in costs),
            round(float(record.get("seconds") or 0.0), 3),
        ]
        extra = record.get("extra") if isinstance(record.get("extra"), dict) else {}
        self.details[slot][method] = {
            "ps": [_clip(p, PREDICTION_CHARS) for p in (record.get("predictions") or [])[:10]],
            "src": str(record.get("answer_source") or "none"),
            "ab": bool(record.get("abstained")),
            "e": _clip(record.get("error"), 2000) if record.get("error") else None,
            "x": {k: extra[k] for k in EXTRA_KEYS if isinstance(extra.get(k), str | int | float)},
            "calls": [[str(c.get("stage") or "?"), int(c.get("prompt_tokens") or 0),
                       int(c.get("completion_tokens") or 0),
                       round(float(c.get("compute_seconds") or c.get("seconds") or 0.0), 3),
                       bool(c.get("cache_hit")), c.get("error")] for c in costs],
            "tx": [self._transcript(call) for call in calls or [] if isinstance(call, dict)],
            "g": record_evidence(record).to_json(),
        }

    def _transcript(self, call: dict[str, Any]) -> list[Any]:
        messages = []
        for message in call.get("messages") or []:
            if not isinstance(message, dict):
                continue
            role, text = str(message.get("role") or "?"), str(message.get("content") or "")
            messages.append([role, self.shared(text) if role == "system" else self._cut(text)])
        return [str(call.get("stage") or "?"), messages, self._cut(str(call.get("reply") or "")),
                call.get("error")]

    def _cut(self, text: str) -> str:
        if len(text) <= self.prompt_chars:
            return text
        return text[: self.prompt_chars] + f"\n… ({len(text) - self.prompt_chars:,} more characters in calls/)"

    def index_json(self) -> dict[str, Any]:
        return {"datasets": self.datasets, "methods": self.methods, "strings": self.strings,
                "questions": self.questions}
