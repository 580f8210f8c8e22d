"""`rag`: vanilla retrieval-augmented answering, top-k chunks by dense search, then answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.access.graph import EvidencePath
from engine.methods import prompts
from engine.methods.common import ask, new_record, question_text, set_answer, timed
from engine.methods.spec import MethodSpec, one_of, positive_ints
from engine.questions.record import AnswerRecord, Question

if TYPE_CHECKING:
    from engine.methods.context import Context

RAG_DEFAULTS: dict[str, Any] = {
    "top_k": 5, "collection": None, "max_chunk_chars": 500,
    "temperature": 0.0, "max_tokens": 48, "seed": 0,
}
_SOURCES = ("wiki", "web", "domain")


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
            sentences=[body], chunk_ids=[chunk.chunk_id], score=round(hit.score, 6)))
    if not passages:
        record.extra["note"] = "no chunk found; answered without passages"
    parsed = ask(ctx.llm, record, system=prompts.RAG_SYSTEM,
                 user=prompts.rag_user(text, passages) if passages else prompts.question_user(text),
                 schema=prompts.ANSWER_SCHEMA, stage="answer", temperature=config["temperature"],
                 max_tokens=config["max_tokens"], seed=config["seed"])
    set_answer(record, parsed, "doc" if passages else "llm")
    return record


RAG = MethodSpec("rag", run_rag, RAG_DEFAULTS, "dense search for the top-k chunks, then the answer",
                 (positive_ints("top_k", "max_chunk_chars", "max_tokens"),
                  one_of("collection", (None, *_SOURCES))))
