"""Readable text for KG nodes and relations in prompts: no IRI or Freebase id reaches a model.

An entity without a usable label (a Freebase CVT `m.0abc`, a Wikidata `Q42` with no English
label, a blank node) is shown *to the model* as "unnamed entity" (`entity_text`). What a person
reads (ask's output, records, traces) names every entity by one rule, the same as `kg tails`:
its label, else its local id (`display_text`: "Q350", "m.0abc"). A relation followed backwards (an `in`
relation of the entity) gets the suffix "(reverse)": from an actor, "starred actors (reverse)"
leads to the films whose starred actors include the actor.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TypeVar

from engine.access.kg_protocol import KnowledgeGraph, Relation, is_literal
from ingest.terms import local_name, readable_relation

# Freebase bookkeeping relations that never answer a question (ToG drops them too).
SCHEMA_RELATION_PREFIXES = ("type.", "common.", "freebase.", "kg.", "user.", "base.kwebbase",
                            "dataworld.", "base.ontologies")

UNNAMED = "unnamed entity"
REVERSE_SUFFIX = " (reverse)"
MAX_LABEL_CHARS = 80

_ID_LIKE = re.compile(r"(?:[mg]\.[0-9a-z_]+|[QPL]\d+|_:.*|\w+://.*|urn:.*)", re.IGNORECASE)

T = TypeVar("T")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "…"


def entity_text(kg: KnowledgeGraph, node: str) -> str:
    """The label of an entity or a literal's value, or "unnamed entity" for a bare id."""
    label = kg.label(node)
    if not is_literal(node) and (not label.strip() or _ID_LIKE.fullmatch(label.strip())):
        return UNNAMED
    return _clip(label) or UNNAMED


def display_text(kg: KnowledgeGraph, node: str) -> str:
    """The entity's name for a person: its label, else its local id (as `kg tails` shows it);
    a literal's value."""
    return _clip(kg.label(node)) or (node if is_literal(node) else local_name(node))


def relation_text(kg: KnowledgeGraph, relation: Relation) -> str:
    """The relation's label, with " (reverse)" when it is followed from tail to head."""
    label = kg.relation_label(relation.id)
    if "://" in label or label.startswith("urn:"):
        label = readable_relation(label) or local_name(label)
    label = _clip(label)
    return label + REVERSE_SUFFIX if relation.direction == "in" else label


def unique_texts(items: Sequence[T], texts: Sequence[str]) -> dict[str, list[T]]:
    """Map each distinct display text to the items it stands for.

    Two items with the same text are one choice for the model (choosing it keeps both), except
    unnamed entities, which are numbered so that each stays a distinct choice.
    """
    result: dict[str, list[T]] = {}
    unnamed = 0
    for item, text in zip(items, texts, strict=True):
        if text == UNNAMED:
            unnamed += 1
            text = f"{UNNAMED} #{unnamed}"
        result.setdefault(text, []).append(item)
    return result


def triple_text(triple: Iterable[str]) -> str:
    """(head, relation, tail) as one line of a prompt."""
    return "(" + ", ".join(triple) + ")"
