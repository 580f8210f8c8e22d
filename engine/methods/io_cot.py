"""`io` (the question alone) and `cot` (brief reasoning, then the answer): the LLM-only baselines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.methods import prompts
from engine.methods.common import ask, cot_once, new_record, question_text, set_answer
from engine.methods.spec import MethodSpec, positive_ints
from engine.questions.record import AnswerRecord, Question

if TYPE_CHECKING:
    from engine.methods.context import Context

IO_DEFAULTS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 48, "seed": 0}
COT_DEFAULTS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 160, "seed": 0}


def run_io(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """IO prompting: the model answers from its own knowledge."""
    record = new_record(question, "io")
    parsed = ask(ctx.llm, record, system=prompts.IO_SYSTEM,
                 user=prompts.question_user(question_text(question)), schema=prompts.ANSWER_SCHEMA,
                 stage="answer", temperature=config["temperature"],
                 max_tokens=config["max_tokens"], seed=config["seed"])
    set_answer(record, parsed)
    return record


def run_cot(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """Chain-of-thought: short reasoning, then the answer."""
    record = new_record(question, "cot")
    parsed = cot_once(question, ctx, record, temperature=config["temperature"],
                      max_tokens=config["max_tokens"], seed=config["seed"], stage="answer")
    if isinstance(parsed, dict):
        record.extra["reasoning"] = parsed.get("reasoning", "")
    set_answer(record, parsed)
    return record


IO = MethodSpec("io", run_io, IO_DEFAULTS, "the model answers from its own knowledge (one call)",
                (positive_ints("max_tokens"),))
COT = MethodSpec("cot", run_cot, COT_DEFAULTS, "chain-of-thought: brief reasoning, then the answer",
                 (positive_ints("max_tokens"),))
