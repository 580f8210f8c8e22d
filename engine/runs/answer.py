"""Answering one question with one method: the single place where a question-level failure is
caught, and where cost, config hash, gold side and scores are stamped on the record.

    record = answer_question("tog", Question("q1", "what movies did [Temuera Morrison] act in"),
                             ctx, {"width": 3, "depth": 2})

`answer_question` never raises for a question-level failure (a KG error, a reply that stays
invalid, a bug in a method): it returns a record with `error` set. It raises `ValueError` for
an unknown method or config key (a caller's mistake) and lets `ModelError` through (the model
cannot be used at all, so the next question would fail the same way). A batch also stops on
`IndexError_` raised while opening its context.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from engine.llm.protocol import CallRecord
from engine.methods import registry
from engine.methods.context import Context
from engine.methods.shared.common import new_record
from engine.methods.shared.prompts import is_prompt_example
from engine.questions.answer_match import score_record
from engine.questions.record import AnswerRecord, Question
from ingest.base.errors import IndexError_, ModelError

# Not question-level failures: a batch stops on them (and resumes once they are fixed). Inside a
# method only a ModelError is; an index without what the method needs is that question's error.
FATAL_ERRORS: tuple[type[Exception], ...] = (ModelError, IndexError_)


def answer_question(method: str, question: Question, ctx: Context,
                    config: Mapping[str, Any] | None = None, *,
                    on_call: Callable[[CallRecord], None] | None = None) -> AnswerRecord:
    """Answer one question; the record carries cost, stage times, config, scores and the
    transcript of every LLM call (`llm_transcript`). `on_call` sees each call as it ends
    (`ask --trace`)."""
    spec = registry.get(method)
    resolved = spec.config(config)
    start = time.perf_counter()
    with ctx.llm.recording() as calls:
        calls.on_call = on_call
        try:
            record = spec.run(question, ctx, resolved)
        except ModelError:
            raise
        except Exception as exc:  # a question-level failure: recorded, the run goes on
            record = new_record(question, method)
            record.error = f"{type(exc).__name__}: {exc}"
            record.extra["traceback"] = traceback.format_exc(limit=6)
    record.method = method
    refuse_prompt_examples(record)
    record.seconds = round(time.perf_counter() - start, 6)
    record.llm_calls = calls.to_dicts()
    record.llm_transcript = calls.transcripts()
    record.config_hash = registry.config_hash(method, resolved)
    record.extra["config"] = resolved
    record.extra["llm_summary"] = calls.summary()
    return stamp_gold(record, question)


def refuse_prompt_examples(record: AnswerRecord) -> None:
    """A retrieval method's prediction that names a prompt example (`prompts.example_answers`)
    while its evidence does not hold it was copied from the prompt (hydra answered "Tokyo", its
    example's answer, 4 times on AdvHotpotQA): it goes, and the next ranked prediction takes its
    place (none left: an abstention). Methods without evidence (io, cot, sc) answer from the
    model's own knowledge and keep their answers."""
    if not record.paths or not record.predictions:
        return
    evidence = [" ".join(t) for p in record.paths for t in p.triples]
    evidence += [text for p in record.paths for text in [*p.sentences, *p.titles]]
    kept = [p for p in record.predictions if not is_prompt_example(p, evidence)]
    if len(kept) == len(record.predictions):
        return
    record.extra["refused_prompt_examples"] = [p for p in record.predictions if p not in kept]
    record.predictions = kept
    record.prediction = kept[0] if kept else ""
    if not kept:
        record.abstained, record.answer_source = True, "none"
        record.extra["abstained_because"] = "the only answer was a prompt example the evidence does not hold"


def stamp_gold(record: AnswerRecord, question: Question) -> AnswerRecord:
    """The gold side (answers, alias groups, gold relations) and the scores, on the record."""
    record.id, record.question = question.id, question.question
    record.answers = list(question.answers)
    gold: dict[str, Any] = {}
    if question.extra.get("answer_groups"):
        gold["answer_groups"] = question.extra["answer_groups"]
    if question.gold_relations:
        gold["relations"] = list(question.gold_relations)
    if gold:
        record.extra = {**record.extra, "gold": gold}
    fields = {"answers": record.answers, "prediction": record.prediction, "predictions": record.predictions,
              "extra": record.extra, "paths": record.paths}  # what score_record reads
    scored = score_record(fields) if question.answers else None
    record.correct = scored.to_dict() if scored is not None else {}
    return record
