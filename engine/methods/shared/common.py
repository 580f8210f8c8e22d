"""Helpers every method shares: a fresh record, stage timing, one structured call, a CoT call,
answers and their ranking."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from engine.llm.protocol import LLM, ChatResult
from engine.methods.shared import prompts
from engine.questions.answer_match import answer_set, normalise_answer
from engine.questions.answer_match import names as _contains
from engine.questions.record import AnswerRecord, Question
from index.entities import normalise
from ingest.base.errors import LocalkgError

if TYPE_CHECKING:
    from engine.access.documents import SearchHit
    from engine.access.protocols import DocumentStore, Embedder
    from engine.methods.context import Context

_BRACKETS = re.compile(r"[\[\]]")


def new_record(question: Question, method: str) -> AnswerRecord:
    return AnswerRecord(id=question.id, question=question.question, answers=list(question.answers),
                        method=method)


def question_text(question: Question) -> str:
    """The question as the model sees it: MetaQA's [topic] brackets removed."""
    return " ".join(_BRACKETS.sub("", question.question).split())


@contextmanager
def timed(record: AnswerRecord, stage: str) -> Iterator[None]:
    """Add the block's wall time to `record.stage_seconds[stage]`."""
    start = time.perf_counter()
    try:
        yield
    finally:
        spent = time.perf_counter() - start
        record.stage_seconds[stage] = round(record.stage_seconds.get(stage, 0.0) + spent, 6)


def ask(llm: LLM, record: AnswerRecord, *, system: str, user: str, schema: dict[str, Any],
        stage: str, temperature: float, max_tokens: int, seed: int = 0) -> Any | None:
    """One structured call (fixed system message, per-question user message).

    Returns the parsed reply, or None when the reply stayed invalid; such failures are listed
    in `record.extra["call_errors"]` (the method goes on with what it has).
    """
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    with timed(record, stage):
        result: ChatResult = llm.chat(messages, schema=schema, temperature=temperature,
                                      max_tokens=max_tokens, seed=seed, stage=stage)
    if result.error is not None or result.parsed is None:
        record.extra.setdefault("call_errors", []).append(
            {"stage": stage, "error": result.error or "no parsed reply"})
        return None
    return result.parsed


def answer_of(parsed: Any) -> str:
    """The "answer" field of a parsed reply, stripped ("" when missing)."""
    if isinstance(parsed, dict):
        value = parsed.get("answer")
        if isinstance(value, str):
            return " ".join(value.split()).strip(" .")
    return ""


def names_any(answer: str, labels: Sequence[str]) -> bool:
    """Whether the answer text is, or names, one of the labels (normalised, whole words)."""
    key = normalise(answer)
    return any((k := normalise(label)) and (k == key or _contains(key, k)) for label in labels)


def rank_answers(answer: str, candidates: Sequence[str],
                 asked_about: Sequence[str] = ()) -> tuple[str, list[str]]:
    """(prediction, predictions) from the model's answer text and ranked KG candidates.

    Candidates named in the answer come first (in the order the answer names them), then the
    answer text itself when it names none, then the other candidates in their given order.
    The prediction is the first of these: a KG label whenever the answer names one. An answer
    that merely repeats an entity the question is about (`asked_about`, the topic entities: a
    small model's favourite slip) goes after the candidates.
    """
    norm_answer = normalise(answer) if answer else ""
    if norm_answer and norm_answer in {normalise(a) for a in asked_about} and candidates:
        _, ranked = rank_answers("", candidates)
        ranked.append(answer)
        return ranked[0], ranked
    named: list[tuple[int, int, str]] = []
    for label in dict.fromkeys(candidates):
        key = normalise(label)
        if not key or not norm_answer:
            continue
        if key == norm_answer:
            named.append((-1, 0, label))
        elif _contains(norm_answer, key):
            named.append((norm_answer.find(key), -len(key), label))
    named.sort(key=lambda item: item[:2])
    first = [label for _, _, label in named]
    ranked = list(first)
    if answer and not first:
        ranked.append(answer)
    ranked.extend(c for c in dict.fromkeys(candidates) if c not in first)
    return (ranked[0] if ranked else ""), ranked


def majority(answers: Sequence[str]) -> list[tuple[str, int]]:
    """Distinct answers (first spelling seen) with their vote counts, most votes first;
    ties keep the order of first appearance."""
    counts: dict[str, int] = {}
    spelling: dict[str, str] = {}
    for answer in answers:
        key = normalise(answer)
        if not key:
            continue
        spelling.setdefault(key, answer)
        counts[key] = counts.get(key, 0) + 1
    order = list(counts)
    ranked = sorted(order, key=lambda k: (-counts[k], order.index(k)))
    return [(spelling[k], counts[k]) for k in ranked]


def set_answer(record: AnswerRecord, parsed: Any, source: str = "llm") -> None:
    """Fill prediction(s) and answer_source from a parsed {"answer": ...} reply."""
    answer = answer_of(parsed)
    record.prediction = answer
    record.predictions = [answer] if answer else []
    record.answer_source = source if answer else "none"  # type: ignore[assignment]
    if parsed is None:
        errors = record.extra.get("call_errors") or [{"error": "no reply"}]
        record.error = "the answer call failed: " + errors[-1]["error"]


def found_in(answer: str, texts: Sequence[str]) -> bool:
    """Whether the texts say the answer: each of its items ("A, B and C" has three) occurs in
    them as whole words, after answer normalisation (case, punctuation, articles)."""
    haystack = " | ".join(normalise_answer(t) for t in texts)
    items = [normalise_answer(i) for i in answer_set(answer, [answer])]
    items = [i for i in items if i]
    return bool(items) and all(_contains(haystack, i) for i in items)


def gold_held(answers: Sequence[str], names: Any, texts: Sequence[str] = ()) -> list[str]:
    """The gold answers a stage holds: a name equal to one, or (documents) a text saying it.
    For stage-recall statistics only; no method decides anything by it."""
    keys = {normalise_answer(n) for n in names}
    haystack = " | ".join(normalise_answer(t) for t in texts)
    return [a for a in answers
            if (k := normalise_answer(a)) and (k in keys or (texts and _contains(haystack, k)))]


def abstain(record: AnswerRecord, why: str) -> None:
    """Record that the method answers "not found": no prediction, source "none"."""
    record.abstained = True
    record.prediction, record.predictions = "", []
    record.answer_source = "none"
    record.extra["abstained_because"] = why


def cot_once(question: Question, ctx: Context, record: AnswerRecord, *, temperature: float,
             max_tokens: int, seed: int, stage: str) -> Any | None:
    """One chain-of-thought call; the parsed {"reasoning", "answer"} reply or None."""
    return ask(ctx.llm, record, system=prompts.COT_SYSTEM,
               user=prompts.question_user(question_text(question)), schema=prompts.COT_SCHEMA,
               stage=stage, temperature=temperature, max_tokens=max_tokens, seed=seed)


def optional_docs(ctx: Context) -> DocumentStore | None:
    """The index's documents, or None for an index without any (a KG-only index)."""
    try:
        return ctx.docs
    except (LocalkgError, RuntimeError):
        return None


def search_passages(docs: DocumentStore, text: str, k: int, *, first: str = "dense") -> list[SearchHit]:
    """The best `k` passages for `text` by the `first` search ("dense" or "sparse"), by the other one
    where the index was built without it (`--no-vectors`, no BM25)."""
    searches = [docs.dense_search, docs.sparse_search]
    if first == "sparse":
        searches.reverse()
    try:
        return searches[0](text, k)
    except LocalkgError:
        return searches[1](text, k)


def optional_embedder(ctx: Context, docs: DocumentStore | None) -> Embedder | None:
    """The documents' embedding model, else the index's, else None (no model at hand)."""
    try:
        return docs.embedder if docs is not None else ctx.embedder
    except (LocalkgError, RuntimeError):
        return None
