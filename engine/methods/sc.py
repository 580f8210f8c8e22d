"""`sc`: self-consistency, k chain-of-thought samples (different seeds) and a majority vote."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.methods.common import answer_of, cot_once, majority, new_record
from engine.methods.spec import MethodSpec, positive_ints
from engine.questions.record import AnswerRecord, Question

if TYPE_CHECKING:
    from engine.methods.context import Context

SC_DEFAULTS: dict[str, Any] = {"samples": 5, "temperature": 0.7, "max_tokens": 160, "seed": 0}


def run_sc(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """Sample k CoT answers and keep the most frequent (ties: the first seen)."""
    record = new_record(question, "sc")
    answers: list[str] = []
    for i in range(int(config["samples"])):
        parsed = cot_once(question, ctx, record, temperature=config["temperature"],
                          max_tokens=config["max_tokens"], seed=int(config["seed"]) + i,
                          stage="sample")
        answer = answer_of(parsed)
        if answer:
            answers.append(answer)
    votes = majority(answers)
    record.extra["samples"] = answers
    record.extra["votes"] = [{"answer": a, "votes": n} for a, n in votes]
    record.predictions = [a for a, _ in votes]
    record.prediction = record.predictions[0] if votes else ""
    record.answer_source = "llm" if votes else "none"
    if not votes:
        record.error = "no sample gave an answer"
    return record


SC = MethodSpec("sc", run_sc, SC_DEFAULTS, "self-consistency: k sampled CoT answers, majority vote",
                (positive_ints("samples", "max_tokens"),))
