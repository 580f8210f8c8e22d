"""`rag`: vanilla retrieval-augmented answering, top-k chunks by dense search, then answer.

The answer is marked "from doc" only when the passages the model read say it (every item of the
answer is found in them, whole words, normalised); otherwise the model answered from elsewhere
(its own knowledge, or a guess) and the record says `answer_source` "llm" and
`extra["grounding"]` "not in evidence". With `abstain` (off by default: the default prompt is
unchanged) the model answers from the passages only or says it did not find the answer, and the
record is an abstention (`abstained`, no prediction).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.access.graph import EvidencePath
from engine.methods import prompts
from engine.methods.common import (
    abstain,
    ask,
    found_in,
    new_record,
    question_text,
    set_answer,
    timed,
)
from engine.methods.spec import MethodSpec, booleans, one_of, positive_ints
from engine.questions.record import AnswerRecord, Question

if TYPE_CHECKING:
    from engine.methods.context import Context

RAG_DEFAULTS: dict[str, Any] = {
    "top_k": 5, "collection": None, "max_chunk_chars": 500,
    "temperature": 0.0, "max_tokens": 48, "seed": 0,
    "abstain": False,  # answer from the passages only, or "not found"
}
_SOURCES = ("wiki", "web", "domain")
DENSE_SCORE = "cosine to the question"


def run_rag(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """Dense search for the question's top-k chunks; the model answers from them."""
    record = new_record(question, "rag")
    text = question_text(question)
    with timed(record, "retrieval"):
        hits = ctx.docs.dense_search(text, int(config["top_k"]), config["collection"])
    limit = int(config["max_chunk_chars"])
    passages = []
    for hit in hits:
        chunk = hit.chunk
        body = " ".join(chunk.text.split())[:limit]
        passages.append(f"{chunk.title}: {body}" if chunk.title else body)
        record.paths.append(EvidencePath(
            source=chunk.collection if chunk.collection in _SOURCES else "domain",  # type: ignore[arg-type]
            sentences=[body], chunk_ids=[chunk.chunk_id], score=round(hit.score, 6),
            titles=[chunk.title], score_kind=DENSE_SCORE))
    if not passages:
        record.extra["note"] = "no chunk found; answered without passages"
    if config["abstain"]:
        _answer_or_abstain(record, ctx, config, text, passages)
        return record
    parsed = ask(ctx.llm, record, system=prompts.RAG_SYSTEM,
                 user=prompts.rag_user(text, passages) if passages else prompts.question_user(text),
                 schema=prompts.ANSWER_SCHEMA, stage="answer", temperature=config["temperature"],
                 max_tokens=config["max_tokens"], seed=config["seed"])
    set_answer(record, parsed, "doc" if passages else "llm")
    _mark_grounding(record, passages)
    return record


def _answer_or_abstain(record: AnswerRecord, ctx: Context, config: dict[str, Any], text: str,
                       passages: list[str]) -> None:
    """The `abstain` variant: an answer the passages hold, or an abstention."""
    if not passages:
        abstain(record, "no chunk found")
        return
    parsed = ask(ctx.llm, record, system=prompts.RAG_ABSTAIN_SYSTEM, user=prompts.rag_user(text, passages),
                 schema=prompts.FOUND_ANSWER_SCHEMA, stage="answer", temperature=config["temperature"],
                 max_tokens=config["max_tokens"], seed=config["seed"])
    if isinstance(parsed, dict) and (parsed.get("found") is False or not str(parsed.get("answer", "")).strip()):
        abstain(record, "the model found no answer in the passages")
        return
    set_answer(record, parsed, "doc")
    _mark_grounding(record, passages)


def _mark_grounding(record: AnswerRecord, passages: list[str]) -> None:
    """"from doc" only when the passages say the answer; else "llm", "not in evidence"."""
    if not passages or not record.prediction:
        return
    grounded = found_in(record.prediction, passages)
    record.extra["grounding"] = "in evidence" if grounded else "not in evidence"
    if not grounded:
        record.answer_source = "llm"


RAG = MethodSpec("rag", run_rag, RAG_DEFAULTS, "dense search for the top-k chunks, then the answer",
                 (positive_ints("top_k", "max_chunk_chars", "max_tokens"),
                  one_of("collection", (None, *_SOURCES)), booleans("abstain")),
                 hash_when_set=("abstain",))
