"""`io` (the question alone) and `cot` (brief reasoning, then the answer): the LLM-only baselines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.methods.method_config import MethodConfig, option
from engine.methods.shared import prompts
from engine.methods.shared.common import ask, cot_once, new_record, question_text, set_answer
from engine.methods.spec import MethodSpec
from engine.questions.record import AnswerRecord, Question

if TYPE_CHECKING:
    from engine.methods.context import Context


@dataclass(frozen=True)
class IoConfig(MethodConfig):
    """`io`: one answer call."""

    temperature: float = option(0.0, "sampling temperature of the answer call", low=0)
    max_tokens: int = option(48, "token limit of the answer", low=1)
    seed: int = option(0, "sampling seed")


@dataclass(frozen=True)
class CotConfig(MethodConfig):
    """`cot`: one reasoning-then-answer call."""

    temperature: float = option(0.0, "sampling temperature of the call", low=0)
    max_tokens: int = option(160, "token limit of the reasoning and the answer", low=1)
    seed: int = option(0, "sampling seed")


IO_DEFAULTS: dict[str, Any] = IoConfig.defaults()
COT_DEFAULTS: dict[str, Any] = CotConfig.defaults()


def run_io(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """IO prompting: the model answers from its own knowledge."""
    cfg = IoConfig.from_config(config)
    record = new_record(question, "io")
    parsed = ask(ctx.llm, record, system=prompts.IO_SYSTEM,
                 user=prompts.question_user(question_text(question)), schema=prompts.ANSWER_SCHEMA,
                 stage="answer", temperature=cfg.temperature, max_tokens=cfg.max_tokens, seed=cfg.seed)
    set_answer(record, parsed)
    return record


def run_cot(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """Chain-of-thought: short reasoning, then the answer."""
    cfg = CotConfig.from_config(config)
    record = new_record(question, "cot")
    parsed = cot_once(question, ctx, record, temperature=cfg.temperature,
                      max_tokens=cfg.max_tokens, seed=cfg.seed, stage="answer")
    if isinstance(parsed, dict):
        record.extra["reasoning"] = parsed.get("reasoning", "")
    set_answer(record, parsed)
    return record


IO = MethodSpec.typed("io", run_io, IoConfig, "the model answers from its own knowledge (one call)")
COT = MethodSpec.typed("cot", run_cot, CotConfig, "chain-of-thought: brief reasoning, then the answer")
