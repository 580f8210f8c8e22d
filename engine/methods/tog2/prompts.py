"""Prompts and reply schemas of `tog2` (ToG-2 §3, Appendix E), written for this project.

Same layout as `prompts.py`: per stage one fixed system message (instructions first, a tiny
example), identical in every call of that stage so the llama.cpp prefix cache pays for it once
per run; everything that depends on the question goes into the one user message, with the
question text last but one and the request last. Candidate lists are enums in the grammar.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.llm.protocol import enum_array
from engine.methods.shared.prompts import ANSWER_MAX_CHARS

CLUES_MAX_CHARS = 240
QUERY_MAX_CHARS = 160
SCORE_MAX = 10  # relation scores are integers 0..10, as in the paper's prompt

# ------------------------------------------------------------------------------------------
# topic prune (§3.1)
# ------------------------------------------------------------------------------------------

TOPIC_PRUNE_SYSTEM = """You choose where to start searching a knowledge graph for the answer to a question. You get the question and entities found in it. Keep the entities that are specific starting points for the question; drop broad concepts. You may keep none.
Reply with JSON {"entities": [...]}.
Example.
Entities:
Indonesia
island
Question: on which island is the capital of Indonesia
{"entities": ["Indonesia"]}"""


def topic_prune_user(question: str, entities: Sequence[str]) -> str:
    return "Entities:\n" + "\n".join(entities) + f"\nQuestion: {question}"


def topic_prune_schema(entities: Sequence[str]) -> dict[str, Any]:
    return {"type": "object", "properties": {"entities": enum_array(list(entities), max_items=len(entities))},
            "required": ["entities"]}


# ------------------------------------------------------------------------------------------
# relation prune (§3.2.1, Eq. 2 per entity and Eq. 3 combined)
# ------------------------------------------------------------------------------------------

RELATION_PRUNE_SYSTEM = """You explore a knowledge graph to answer a question. For each numbered entity you get its relations. For each entity, choose as many relations as asked, those most likely to lead to entities whose documents help answer the question, and score each from 0 (useless) to 10 (most useful).
A relation marked "(reverse)" is followed backwards: from a company, "supplier of (reverse)" leads to the companies that supply it.
Reply with JSON {"entity_1": [{"relation": "...", "score": 0}], "entity_2": [...]}.
Example.
Entity 1: Mary Shelley
Relations:
place of birth
spouse
author (reverse)
Question: where was the husband of Mary Shelley born
Choose 2 relations for each entity.
{"entity_1": [{"relation": "spouse", "score": 9}, {"relation": "place of birth", "score": 2}]}"""


def relation_prune_user(question: str, entities: Sequence[tuple[str, Sequence[str]]], k: int) -> str:
    blocks = [f"Entity {i}: {name}\nRelations:\n" + "\n".join(relations)
              for i, (name, relations) in enumerate(entities, 1)]
    return "\n".join(blocks) + f"\nQuestion: {question}\nChoose {k} relations for each entity."


def relation_prune_schema(entities: Sequence[Sequence[str]], k: int) -> dict[str, Any]:
    """{"entity_i": [{"relation": enum, "score": 0..10}] × min(k, n_i)} for each entity."""
    properties: dict[str, Any] = {}
    for i, relations in enumerate(entities, 1):
        n = min(k, len(set(relations)))
        item = {"type": "object",
                "properties": {"relation": {"type": "string", "enum": list(dict.fromkeys(relations))},
                               "score": {"type": "integer", "minimum": 0, "maximum": SCORE_MAX}},
                "required": ["relation", "score"]}
        properties[f"entity_{i}"] = {"type": "array", "items": item, "minItems": n, "maxItems": n}
    return {"type": "object", "properties": properties, "required": list(properties)}


# ------------------------------------------------------------------------------------------
# reasoning (§3.3, Eq. 7) and query re-forming
# ------------------------------------------------------------------------------------------

REASONING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"sufficient": {"type": "boolean"},
                   "answer": {"type": "string", "maxLength": ANSWER_MAX_CHARS},
                   "clues": {"type": "string", "maxLength": CLUES_MAX_CHARS}},
    "required": ["sufficient", "answer", "clues"],
}

# The last round's call must name a best answer: the grammar forces a non-empty one (the 0.5B
# model otherwise keeps to the system message's "answer": "" and writes the answer into the clues).
REASONING_LAST_SCHEMA: dict[str, Any] = {
    **REASONING_SCHEMA,
    "properties": {**REASONING_SCHEMA["properties"],
                   "answer": {"type": "string", "minLength": 1, "maxLength": ANSWER_MAX_CHARS}},
}

REASONING_SYSTEM = """You answer a question from knowledge graph triples, passages from documents, clues found earlier and what you know. First decide whether this knowledge is enough to answer.
If it is, reply {"sufficient": true, "answer": "...", "clues": ""} with the short answer only: a name, a title, a date or a number.
If it is not, reply {"sufficient": false, "answer": "", "clues": "..."} where clues states in one sentence the useful facts found so far.
Example.
Triples:
(Inter Miami, owner, David Beckham)
Passages:
[1] Inter Miami: The club was founded in 2018 and plays in Miami.
Question: who coaches the club owned by David Beckham
{"sufficient": false, "answer": "", "clues": "David Beckham owns the club Inter Miami."}"""

LAST_ROUND_NOTE = "This is the last round: if the knowledge is not enough, give your best answer anyway."


def reasoning_user(question: str, clues: str, triples: Sequence[str], passages: Sequence[str],
                   last_round: bool = False) -> str:
    parts = []
    if clues:
        parts.append(f"Clues: {clues}")
    if triples:
        parts.append("Triples:\n" + "\n".join(triples))
    if passages:
        parts.append("Passages:\n" + "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, 1)))
    parts.append(f"Question: {question}")
    if last_round:
        parts.append(LAST_ROUND_NOTE)
    return "\n".join(parts)


QUERY_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"query": {"type": "string", "maxLength": QUERY_MAX_CHARS}},
    "required": ["query"],
}

QUERY_REFORM_SYSTEM = """You help search documents for the answer to a question. You get the question and the clues found so far. Write one short search query for the fact that is still missing.
Reply with JSON {"query": "..."}.
Example.
Clues: David Beckham owns the club Inter Miami.
Question: who coaches the club owned by David Beckham
{"query": "head coach of Inter Miami"}"""


def query_reform_user(question: str, clues: str) -> str:
    return f"Clues: {clues or 'none'}\nQuestion: {question}"
