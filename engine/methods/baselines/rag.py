"""`rag`: vanilla retrieval-augmented answering, top-k chunks by dense search, then answer.

The answer is marked "from doc" only when the passages the model read say it (every item of the
answer is found in them, whole words, normalised); otherwise the model answered from elsewhere
(its own knowledge, or a guess) and the record says `answer_source` "llm" and
`extra["grounding"]` "not in evidence". With `abstain` (off by default: the default prompt is
unchanged) the model answers from the passages only or says it did not find the answer, and the
record is an abstention (`abstained`, no prediction).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.access.graph import EvidencePath
from engine.methods.method_config import MethodConfig, option
from engine.methods.shared import prompts
from engine.methods.shared.common import (
    abstain,
    ask,
    found_in,
    new_record,
    question_text,
    set_answer,
    timed,
)
from engine.methods.spec import MethodSpec
from engine.questions.record import AnswerRecord, Question

if TYPE_CHECKING:
    from engine.methods.context import Context

_SOURCES = ("wiki", "web", "domain")


@dataclass(frozen=True)
class RagConfig(MethodConfig):
    """`rag`: dense search for the top-k chunks, one answer call."""

    top_k: int = option(5, "chunks retrieved by dense search and shown", low=1)
    collection: str | None = option(None, "search one document collection only (null: all)",
                                    choices=(None, *_SOURCES))
    max_chunk_chars: int = option(500, "characters kept of each chunk", low=1)
    temperature: float = option(0.0, "sampling temperature of the answer call", low=0)
    max_tokens: int = option(48, "token limit of the answer", low=1)
    seed: int = option(0, "sampling seed")
    abstain: bool = option(False, 'answer from the passages only, or "not found"')


RAG_DEFAULTS: dict[str, Any] = RagConfig.defaults()
DENSE_SCORE = "cosine to the question"


def run_rag(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    """Dense search for the question's top-k chunks; the model answers from them."""
    cfg = RagConfig.from_config(config)
    record = new_record(question, "rag")
    text = question_text(question)
    with timed(record, "retrieval"):
        hits = ctx.docs.dense_search(text, cfg.top_k, cfg.collection)
    limit = cfg.max_chunk_chars
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
    if cfg.abstain:
        _answer_or_abstain(record, ctx, cfg, text, passages)
        return record
    parsed = ask(ctx.llm, record, system=prompts.RAG_SYSTEM,
                 user=prompts.rag_user(text, passages) if passages else prompts.question_user(text),
                 schema=prompts.ANSWER_SCHEMA, stage="answer", temperature=cfg.temperature,
                 max_tokens=cfg.max_tokens, seed=cfg.seed)
    set_answer(record, parsed, "doc" if passages else "llm")
    _mark_grounding(record, passages)
    return record


def _answer_or_abstain(record: AnswerRecord, ctx: Context, cfg: RagConfig, text: str,
                       passages: list[str]) -> None:
    """The `abstain` variant: an answer the passages hold, or an abstention."""
    if not passages:
        abstain(record, "no chunk found")
        return
    parsed = ask(ctx.llm, record, system=prompts.RAG_ABSTAIN_SYSTEM, user=prompts.rag_user(text, passages),
                 schema=prompts.FOUND_ANSWER_SCHEMA, stage="answer", temperature=cfg.temperature,
                 max_tokens=cfg.max_tokens, seed=cfg.seed)
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


RAG = MethodSpec.typed("rag", run_rag, RagConfig, "dense search for the top-k chunks, then the answer",
                       hash_when_set=("abstain",))
