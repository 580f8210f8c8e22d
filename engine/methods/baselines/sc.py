"""`sc`: self-consistency, k chain-of-thought samples (different seeds) and a majority vote."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.methods.method_config import MethodConfig, option
from engine.methods.shared.common import answer_of, cot_once, majority, new_record
from engine.methods.spec import MethodSpec
from engine.questions.record import AnswerRecord, Question

if TYPE_CHECKING:
    from engine.methods.context import Context


@dataclass(frozen=True)
class ScConfig(MethodConfig):
    """`sc`: k sampled chain-of-thought calls, majority vote."""

    samples: int = option(5, "sampled CoT answers k (the paper samples 40; 5 for a CPU)", "SC (Wang et al. 2023) §3", low=1)
    temperature: float = option(0.7, "sampling temperature of each sample", "SC (Wang et al. 2023) §3", low=0)
    max_tokens: int = option(160, "token limit of each sample", low=1)
    seed: int = option(0, "seed of the first sample (sample i uses seed + i)")


SC_DEFAULTS: dict[str, Any] = ScConfig.defaults()


def run_sc(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """Sample k CoT answers and keep the most frequent (ties: the first seen)."""
    cfg = ScConfig.from_config(config)
    record = new_record(question, "sc")
    answers: list[str] = []
    for i in range(cfg.samples):
        parsed = cot_once(question, ctx, record, temperature=cfg.temperature,
                          max_tokens=cfg.max_tokens, seed=cfg.seed + i,
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


SC = MethodSpec.typed("sc", run_sc, ScConfig, "self-consistency: k sampled CoT answers, majority vote")
