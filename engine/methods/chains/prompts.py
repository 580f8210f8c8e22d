"""Prompts and reply schemas of the `chains` method (ours): one choice among a few relation chains,
one answer from the chosen chain's entities and the best document windows.

Each system message is fixed (its KV state is cached by the LLM layer); the question and the
candidates go into the user message. No example holds a real answer, so none can be copied
into a prediction. Both replies are enums: the model can only name a shown chain, a candidate
or a span of the shown text, or say "not found".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

NONE_CHAIN = "none"
NOT_FOUND = "not found"

CHOOSE_SYSTEM = """You pick the route through a knowledge graph that leads from the question's entity to its answer.
Each route starts at the entity, follows relations (arrows) and ends at the entities it reaches.
"(reverse)" means the relation is followed backwards: from a person, "directed by (reverse)" leads to the films the person directed.
Pick the route whose relations, in order, say what the question asks; its last step must give the kind of thing asked for.
Reply with JSON {"route": "R<number>"}, or {"route": "none"} if no route fits."""

ANSWER_SYSTEM = """You answer a question from the evidence given with it: facts from a knowledge graph and passages from documents.
Give the short answer only, as written in the evidence: a name, a title, a date or a number, or yes or no.
If the evidence does not hold the answer, reply "not found".
Reply with JSON {"answer": "..."}."""


def choose_user(question: str, routes: Sequence[str]) -> str:
    lines = "\n".join(f"R{i}: {r}" for i, r in enumerate(routes, 1))
    return f"Question: {question}\nRoutes:\n{lines}\nWhich route answers the question?"


def choose_schema(n: int) -> dict[str, Any]:
    return {"type": "object",
            "properties": {"route": {"type": "string", "enum": [*(f"R{i}" for i in range(1, n + 1)), NONE_CHAIN]}},
            "required": ["route"]}


def answer_user(question: str, facts: Sequence[str], passages: Sequence[str], facts_last: bool = True) -> str:
    """The evidence, then the question (the reply's enum holds the allowed answers). A small model
    reads the end best, so the evidence likelier to answer goes last, nearest the question: the
    graph's facts by default, the passages with `facts_last=False`."""
    blocks = []
    if passages:
        blocks.append("Passages:\n" + "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, 1)))
    if facts:
        blocks.append("Facts:\n" + "\n".join(f"- {f}" for f in facts))
    if not facts_last:
        blocks.reverse()
    return "\n".join([*blocks, f"Question: {question}"])


ANSWER_ROUTE_SYSTEM = """You answer a question from the evidence given with it: facts from a knowledge graph and passages from documents.
Give the short answer only, as written in the evidence: a name, a title, a date or a number, or yes or no.
Reply with JSON {"answer": "..."}."""


def answer_schema(allowed: Sequence[str], offer_not_found: bool = True) -> dict[str, Any]:
    values = list(dict.fromkeys([*allowed, *([NOT_FOUND] if offer_not_found else [])]))
    return {"type": "object", "properties": {"answer": {"type": "string", "enum": values}},
            "required": ["answer"]}
