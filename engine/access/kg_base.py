"""What both KG backends share: labels with caching, and the store's rule for which ids are
terms (an id the embedded store cannot make a term of is not in the KG, on either backend)."""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import Any

import pyoxigraph as ox

from engine.access.kg_protocol import (
    Direction,
    Directions,
    Edges,
    Relation,
    is_literal,
    literal_value,
)
from ingest.terms import WIKIDATA_DIRECT, WIKIDATA_ENTITY, local_name, readable_relation


class GraphBase:
    """Shared logic: labels with caching."""

    def _fetch_label(self, node: str) -> str | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def label(self, node: str) -> str:
        if is_literal(node):
            return literal_value(node)
        return self._cached_label(node)

    @lru_cache(maxsize=200_000)  # noqa: B019 - one cache per graph object, lives as long as it
    def _cached_label(self, node: str) -> str:
        return self._fetch_label(node) or local_name(node)

    @lru_cache(maxsize=20_000)  # noqa: B019
    def relation_label(self, relation: str) -> str:
        if relation.startswith(WIKIDATA_DIRECT):
            found = self._fetch_label(WIKIDATA_ENTITY + relation[len(WIKIDATA_DIRECT) :])
            if found:
                return found
        return readable_relation(relation)

    def relations_of(self, entity: str, direction: Directions = "both") -> list[Relation]:  # pragma: no cover
        raise NotImplementedError

    def tails(self, entity: str, relation: str, direction: Direction = "out", limit: int | None = None) -> list[str]:  # pragma: no cover
        raise NotImplementedError

    def edges(self, entity: str, direction: Direction, limit: int | None = None) -> Edges:  # pragma: no cover
        raise NotImplementedError

    def back_relations(self, relation: str, limit: int) -> tuple[int, Counter[str]]:  # pragma: no cover
        raise NotImplementedError


def store_term(entity: str) -> ox.NamedNode | ox.BlankNode | None:
    """The store term for an entity id; None when it cannot be a valid term (so: not in the KG)."""
    try:
        if entity.startswith("_:"):
            return ox.BlankNode(entity[2:])
        return ox.NamedNode(entity)
    except ValueError:
        return None


def node_id(term: Any) -> str:
    if isinstance(term, ox.Literal):
        return '"' + term.value + '"'
    if isinstance(term, ox.BlankNode):
        return "_:" + term.value
    return term.value
