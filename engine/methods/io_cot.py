"""`io` (the question alone) and `cot` (brief reasoning, then the answer): the LLM-only baselines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.methods import prompts
from engine.methods.common import answer_of, ask, new_record, question_text
from engine.record import AnswerRecord, Question

if TYPE_CHECKING:
    from engine.methods.base import Context

IO_DEFAULTS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 48, "seed": 0}
COT_DEFAULTS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 160, "seed": 0}


def set_answer(record: AnswerRecord, parsed: Any, source: str = "llm") -> None:
    """Fill prediction(s) and answer_source from a parsed {"answer": ...} reply."""
    answer = answer_of(parsed)
    record.prediction = answer
    record.predictions = [answer] if answer else []
    record.answer_source = source if answer else "none"  # type: ignore[assignment]
    if parsed is None:
        errors = record.extra.get("call_errors") or [{"error": "no reply"}]
        record.error = "the answer call failed: " + errors[-1]["error"]


def run_io(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """IO prompting: the model answers from its own knowledge."""
    record = new_record(question, "io")
    parsed = ask(ctx.llm, record, system=prompts.IO_SYSTEM,
                 user=prompts.question_user(question_text(question)), schema=prompts.ANSWER_SCHEMA,
                 stage="answer", temperature=config["temperature"],
                 max_tokens=config["max_tokens"], seed=config["seed"])
    set_answer(record, parsed)
    return record


def cot_once(question: Question, ctx: Context, record: AnswerRecord, *, temperature: float,
             max_tokens: int, seed: int, stage: str) -> Any | None:
    """One chain-of-thought call; the parsed {"reasoning", "answer"} reply or None."""
    return ask(ctx.llm, record, system=prompts.COT_SYSTEM,
               user=prompts.question_user(question_text(question)), schema=prompts.COT_SCHEMA,
               stage=stage, temperature=temperature, max_tokens=max_tokens, seed=seed)


def run_cot(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """Chain-of-thought: short reasoning, then the answer."""
    record = new_record(question, "cot")
    parsed = cot_once(question, ctx, record, temperature=config["temperature"],
                      max_tokens=config["max_tokens"], seed=config["seed"], stage="answer")
    if isinstance(parsed, dict):
        record.extra["reasoning"] = parsed.get("reasoning", "")
    set_answer(record, parsed)
    return record
