"""Every prompt text and reply schema of the methods, in one place.

Layout (token economy): each stage has one fixed system message (instructions and a tiny
example), reused verbatim so the LLM layer can load its cached KV state; everything that
depends on the question goes into the single user message. Replies are small JSON objects;
candidate lists are enums, so a model can only choose among real KG relations and entities.
Written for this project in the spirit of the ToG paper's appendix (not copied).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from engine.llm.protocol import enum_array
from engine.questions.answer_match import answer_set, names, normalise_answer

# ------------------------------------------------------------------------------------------
# example names
# ------------------------------------------------------------------------------------------

# Every name the examples of the prompt modules (this one, tog2_prompts, hydra_prompts) use: a
# small model that is unsure copies an example's answer (hydra answered "Tokyo", an example's
# answer, 4 times on AdvHotpotQA), so a retrieval method's prediction that is one of these while
# its evidence does not hold it is refused (`is_prompt_example`, applied in engine/runs/answer.py).
# tests/test_prompt_examples.py checks that every example's names are listed here. The papers'
# methods keep their prompts as measured (their README numbers were made with them); `chains`
# prompts carry no example names at all.
EXAMPLE_NAMES: tuple[str, ...] = (
    "Mona Lisa", "Leonardo da Vinci", "Rashomon", "Akira Kurosawa", "Tokyo", "Japan",
    "Mary Shelley", "Frankenstein", "The Last Man", "Mathilda", "Percy Bysshe Shelley", "1818",
    "Golden Lion", "1950", "Indonesia", "Inter Miami", "Miami", "David Beckham",
)


def example_answers() -> frozenset[str]:
    """Every name the prompts' examples use, answers included (all prompt modules)."""
    return frozenset(EXAMPLE_NAMES)


def is_prompt_example(answer: str, evidence_texts: Sequence[str], examples: Iterable[str] | None = None) -> bool:
    """Whether the answer (or one of its items: "A, B and C" has three, "A and B" two) is a name
    from a prompt example (`example_answers()` unless `examples` is given) that the evidence
    texts do not hold; such an answer was copied from the prompt, not found."""
    known = {normalise_answer(e) for e in (example_answers() if examples is None else examples)}
    items = {answer, *answer_set(answer, [answer]), *re.split(r"\s+and\s+", answer)}
    copied = {key for i in items if (key := normalise_answer(i)) in known}
    if not copied:  # the usual case: the evidence is not read at all
        return False
    haystack = " | ".join(normalise_answer(t) for t in evidence_texts)
    return any(not names(haystack, key) for key in copied)



# ------------------------------------------------------------------------------------------
# schemas
# ------------------------------------------------------------------------------------------

# Free-text fields are bounded in the grammar itself: a 0.5B model at temperature 0 can repeat
# a phrase until max_tokens, and a cut-off reply does not parse (before these bounds: 7 of 50
# CoT replies on MetaQA 2-hop, 1 of 50 RAG replies on three datasets). At the bound the grammar
# closes the string and the reply stays valid JSON. An answer of up to 240 characters still
# holds a list of a dozen titles; shorter replies decode exactly as without the bound.
ANSWER_MAX_CHARS = 240
COT_REASONING_MAX_CHARS = 400
_ANSWER = {"type": "string", "maxLength": ANSWER_MAX_CHARS}

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"answer": _ANSWER}, "required": ["answer"],
}
COT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reasoning": {"type": "string", "maxLength": COT_REASONING_MAX_CHARS}, "answer": _ANSWER},
    "required": ["reasoning", "answer"],
}
REASONING_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"sufficient": {"type": "boolean"}, "answer": _ANSWER},
    "required": ["sufficient", "answer"],
}


def choice_schema(key: str, candidates: Sequence[str], k: int) -> dict[str, Any]:
    """{key: [k candidates, best first]} with the candidates as an enum (ToG asks for k)."""
    n = min(k, len(set(candidates)))
    return {"type": "object", "properties": {key: enum_array(list(candidates), max_items=n, min_items=n)},
            "required": [key]}


# ------------------------------------------------------------------------------------------
# io, cot, sc, rag
# ------------------------------------------------------------------------------------------

IO_SYSTEM = """You answer questions with the short answer only: a name, a title, a date or a number, never a sentence.
Reply with JSON {"answer": "..."}.
Example. Question: who painted the Mona Lisa
{"answer": "Leonardo da Vinci"}"""

COT_SYSTEM = """You answer questions. First reason briefly, in one to three short sentences, then give the short answer only: a name, a title, a date or a number.
Reply with JSON {"reasoning": "...", "answer": "..."}.
Example. Question: in which country was the director of Rashomon born
{"reasoning": "Rashomon was directed by Akira Kurosawa. Akira Kurosawa was born in Tokyo, Japan.", "answer": "Japan"}"""

RAG_SYSTEM = """You answer questions using the numbered passages given with the question. Prefer what the passages say; if they do not say it, answer from what you know.
Give the short answer only: a name, a title, a date or a number.
Reply with JSON {"answer": "..."}."""


# `--set abstain=true` (rag): answer from the passages only, or say that they do not hold it.
# Used only with the option on, so the default prompts (and their cached replies) are unchanged.
FOUND_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"found": {"type": "boolean"}, "answer": _ANSWER},
    "required": ["found", "answer"],
}

RAG_ABSTAIN_SYSTEM = """You answer questions using only the numbered passages given with the question. Never answer from what you know.
If the passages say the answer, reply {"found": true, "answer": "..."} with the short answer only: a name, a title, a date or a number.
If they do not say it, reply {"found": false, "answer": ""}."""


def question_user(question: str) -> str:
    return f"Question: {question}"


def rag_user(question: str, passages: Sequence[str]) -> str:
    numbered = "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, 1))
    return f"Passages:\n{numbered}\n\nQuestion: {question}"


# ------------------------------------------------------------------------------------------
# ToG / ToG-R
# ------------------------------------------------------------------------------------------

RELATION_PRUNE_SYSTEM = """You explore a knowledge graph to answer a question. You get an entity, its relations and the question. Choose as many relations as asked, those that lead to what the question asks for, best first.
A relation marked "(reverse)" is followed backwards: from a writer, "author (reverse)" leads to the books whose author is that writer.
Reply with JSON {"relations": [...]}.
Example.
Entity: Mary Shelley
Relations:
author (reverse)
place of birth
spouse
Question: where was Mary Shelley born
Choose 2 relations for this question.
{"relations": ["place of birth", "spouse"]}"""

ENTITY_PRUNE_SYSTEM = """You explore a knowledge graph to answer a question. You get a fact with an open place "?", the entities that fill it and the question. Choose as many entities as asked, those that are the answer or lead to it, best first.
Reply with JSON {"entities": [...]}.
Example.
Fact: (?, author, Mary Shelley)
Entities:
Frankenstein
The Last Man
Mathilda
Question: which novel by Mary Shelley is set in a future world
Choose 2 entities for this question.
{"entities": ["The Last Man", "Frankenstein"]}"""

REASONING_SYSTEM = """You answer a question from knowledge graph triples (head, relation, tail) and what you know. First decide whether the triples contain what the question asks for.
If they do, reply {"sufficient": true, "answer": "..."} with the short answer: the entity of the triples that the question asks for, never the entity the question names. If they do not, reply {"sufficient": false, "answer": ""}.
Examples.
Triples:
(Frankenstein, author, Mary Shelley)
(Frankenstein, publication year, 1818)
Question: which books did Mary Shelley write
{"sufficient": true, "answer": "Frankenstein"}
Triples:
(Frankenstein, author, Mary Shelley)
Question: where was Mary Shelley born
{"sufficient": false, "answer": ""}"""

CHAIN_REASONING_SYSTEM = """You answer a question from relation chains of a knowledge graph and what you know. Each chain starts at an entity of the question, follows the listed relations ("(reverse)" means backwards) and ends at the entities it reaches. First decide whether the chains reach what the question asks for.
If they do, reply {"sufficient": true, "answer": "..."} with the short answer: one of the entities reached, never the entity the question names. If they do not, reply {"sufficient": false, "answer": ""}.
Examples.
Chains:
Mary Shelley -> author (reverse) -> Frankenstein; The Last Man
Question: which books did Mary Shelley write
{"sufficient": true, "answer": "Frankenstein"}
Chains:
Mary Shelley -> spouse -> Percy Bysshe Shelley
Question: where was Mary Shelley born
{"sufficient": false, "answer": ""}"""


def _lines(items: Sequence[str]) -> str:
    return "\n".join(items)


def relation_prune_user(question: str, entity: str, relations: Sequence[str], k: int) -> str:
    return (f"Entity: {entity}\nRelations:\n{_lines(relations)}\nQuestion: {question}\n"
            f"Choose {k} relations for this question.")


def entity_prune_user(question: str, fact: str, entities: Sequence[str], k: int) -> str:
    return (f"Fact: {fact}\nEntities:\n{_lines(entities)}\nQuestion: {question}\n"
            f"Choose {k} entities for this question.")


def reasoning_user(question: str, triples: Sequence[str]) -> str:
    return f"Triples:\n{_lines(triples)}\nQuestion: {question}"


def chain_reasoning_user(question: str, chains: Sequence[str]) -> str:
    return f"Chains:\n{_lines(chains)}\nQuestion: {question}"
