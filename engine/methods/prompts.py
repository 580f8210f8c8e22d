"""Every prompt text and reply schema of the methods, in one place.

Layout (token economy): each stage has one fixed system message (instructions and a tiny
example), reused verbatim so the LLM layer can load its cached KV state; everything that
depends on the question goes into the single user message. Replies are small JSON objects;
candidate lists are enums, so a model can only choose among real KG relations and entities.
Written for this project in the spirit of the ToG paper's appendix (not copied).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.llm import enum_array

# ------------------------------------------------------------------------------------------
# schemas
# ------------------------------------------------------------------------------------------

_STRING = {"type": "string"}

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"answer": _STRING}, "required": ["answer"],
}
COT_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"reasoning": _STRING, "answer": _STRING},
    "required": ["reasoning", "answer"],
}
REASONING_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"sufficient": {"type": "boolean"}, "answer": _STRING},
    "required": ["sufficient", "answer"],
}


def choice_schema(key: str, candidates: Sequence[str], k: int) -> dict[str, Any]:
    """{key: [1..k distinct candidates, best first]} with the candidates as an enum."""
    return {"type": "object", "properties": {key: enum_array(list(candidates), max_items=k, min_items=1)},
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


def question_user(question: str) -> str:
    return f"Question: {question}"


def rag_user(question: str, passages: Sequence[str]) -> str:
    numbered = "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, 1))
    return f"Passages:\n{numbered}\n\nQuestion: {question}"


# ------------------------------------------------------------------------------------------
# ToG / ToG-R
# ------------------------------------------------------------------------------------------

RELATION_PRUNE_SYSTEM = """You explore a knowledge graph to answer a question. You get the question, one entity of the graph and the relations of that entity. Choose the relations most likely to lead to the answer, best first, and no more than asked.
A relation marked "(reverse)" is followed backwards: from a writer, "author (reverse)" leads to the books whose author is that writer.
Reply with JSON {"relations": [...]}.
Example.
Question: which books did Mary Shelley write
Entity: Mary Shelley
Relations: author (reverse); place of birth; spouse
Choose up to 2.
{"relations": ["author (reverse)", "spouse"]}"""

ENTITY_PRUNE_SYSTEM = """You explore a knowledge graph to answer a question. You get the question, a fact with one open place "?" and the entities that fill it. Choose the entities most likely to be the answer or to lead to it, best first, and no more than asked.
Reply with JSON {"entities": [...]}.
Example.
Question: where was the wife of Percy Shelley born
Fact: (Percy Shelley, spouse, ?)
Entities: Mary Shelley; Harriet Westbrook; Field Place
Choose up to 2.
{"entities": ["Mary Shelley", "Harriet Westbrook"]}"""

REASONING_SYSTEM = """You answer a question from knowledge graph triples (head, relation, tail) and what you know. Decide whether the triples are enough to answer.
If they are, reply {"sufficient": true, "answer": "<short answer>"}, the answer being a name, a title, a date or a number, usually an entity of the triples. If they are not, reply {"sufficient": false, "answer": ""}.
Example.
Question: who directed the film that Tom Hanks starred in in 1994
Triples:
(Forrest Gump, starred actors, Tom Hanks)
(Forrest Gump, release year, 1994)
(Forrest Gump, directed by, Robert Zemeckis)
{"sufficient": true, "answer": "Robert Zemeckis"}"""

CHAIN_REASONING_SYSTEM = """You answer a question from relation chains of a knowledge graph and what you know. Each chain starts at an entity of the question, follows the listed relations ("(reverse)" means backwards) and ends at the entities it reaches. Decide whether the chains are enough to answer.
If they are, reply {"sufficient": true, "answer": "<short answer>"}, the answer being a name, a title, a date or a number, usually one of the entities reached. If they are not, reply {"sufficient": false, "answer": ""}.
Example.
Question: which books did Mary Shelley write
Chains:
Mary Shelley -> author (reverse) -> Frankenstein; The Last Man
{"sufficient": true, "answer": "Frankenstein"}"""


def relation_prune_user(question: str, entity: str, relations: Sequence[str], k: int) -> str:
    return (f"Question: {question}\nEntity: {entity}\nRelations: {'; '.join(relations)}\n"
            f"Choose up to {k}.")


def entity_prune_user(question: str, fact: str, entities: Sequence[str], k: int) -> str:
    return (f"Question: {question}\nFact: {fact}\nEntities: {'; '.join(entities)}\n"
            f"Choose up to {k}.")


def reasoning_user(question: str, triples: Sequence[str]) -> str:
    return f"Question: {question}\nTriples:\n" + "\n".join(triples)


def chain_reasoning_user(question: str, chains: Sequence[str]) -> str:
    return f"Question: {question}\nChains:\n" + "\n".join(chains)
