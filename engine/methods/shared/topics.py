"""Topic entities of a question, shared by every KG method (ToG, ToG-R, ToG-2, HydraRAG)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.methods.shared.common import search_passages, timed
from engine.questions.record import AnswerRecord, Question
from ingest.base.errors import LocalkgError

if TYPE_CHECKING:
    from engine.methods.context import Context


def select_topic_entities(question: Question, ctx: Context, record: AnswerRecord, limit: int,
                          label: Callable[[str], str]) -> list[str]:
    """Up to `limit` topic entity ids, best first, each recorded in `record.topic_entities`.

    Pre-linked ids from the dataset (Freebase MIDs, Wikidata QIDs: `extra["topic_entity_ids"]`)
    come first, then given names (resolved one by one), else the linker reads the question.
    One entity per mention; an id the index does not know is skipped.
    """
    with timed(record, "linking"):
        linker = ctx.linker
        ids = question.extra.get("topic_entity_ids")
        if ids:  # pre-linked MIDs / QIDs ({id: name}): the id first, its name if absent
            found = linker.link(question.question, topic_entities=ids)
        elif question.topic_entities:  # names: resolved one by one
            found = [c for t in question.topic_entities for c in linker.resolve(t, "given", 1)]
        else:
            found = linker.link(question.question)
    chosen: list[str] = []
    seen_mentions: set[str] = set()
    for c in found:
        if c.mention in seen_mentions or not linker.has(c.entity) or c.entity in chosen:
            continue
        seen_mentions.add(c.mention)
        chosen.append(c.entity)
        record.topic_entities.append({"id": c.entity, "label": label(c.entity), "mention": c.mention,
                                      "reason": c.reason, "score": c.score})
        if len(chosen) >= limit:
            break
    return chosen


def topic_entities_from_search(question: Question, ctx: Context, record: AnswerRecord, limit: int,
                               passages: int, label: Callable[[str], str]) -> list[str]:
    """When the question names no entity the linker knows (AdvHotpotQA: "the 1993 World Champion
    figure skater"), the entities whose documents the question's `passages` best passages come
    from: dense search, or BM25 on an index without vectors. Recorded with reason "search".

    Not in ToG-2, whose topic entities come from an entity linker over Wikidata; here, on a
    corpus whose KG is its document titles, the documents are the way in.
    """
    if passages <= 0:
        return []
    with timed(record, "linking"):
        try:
            docs = ctx.docs
        except (LocalkgError, RuntimeError):  # no documents: nothing to search
            return []
        hits = search_passages(docs, question.question, passages)
    chosen: list[str] = []
    for hit in hits:
        entity = hit.chunk.entity
        if not entity or entity in chosen or not ctx.linker.has(entity):
            continue
        chosen.append(entity)
        record.topic_entities.append({"id": entity, "label": label(entity), "mention": hit.chunk.title,
                                      "reason": "search", "score": round(float(hit.score), 4)})
        if len(chosen) >= limit:
            break
    return chosen


def linked_or_searched(question: Question, ctx: Context, record: AnswerRecord, limit: int, passages: int,
                       label: Callable[[str], str]) -> list[str]:
    """`select_topic_entities`, and when it links nothing, `topic_entities_from_search` over the
    question's `passages` best passages (0: linking only)."""
    return (select_topic_entities(question, ctx, record, limit, label)
            or topic_entities_from_search(question, ctx, record, limit, passages, label))
