"""`KnowledgeGraph`: the KG access methods depend on, and its value types (`Relation`, `Edges`)
and the deterministic sampling every backend shares. No backend is imported here: the embedded
store is engine/access/oxigraph_kg.py, a SPARQL 1.1 endpoint engine/access/sparql_endpoint_kg.py,
and engine/access/open_kg.py opens either.

Entity ids are IRIs (blank nodes as `_:id`). A literal tail is returned as its value wrapped in
double quotes (`"1999"`), which no IRI can start with, so one list can hold both kinds.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, Protocol

Direction = Literal["out", "in"]
Directions = Literal["out", "in", "both"]


@dataclass(frozen=True, order=True)
class Relation:
    """A relation seen from an entity: `out` means entity -> relation -> tail."""

    id: str
    direction: Direction


@dataclass
class Edges:
    """The facts of one entity in one direction, as (relation, other end) pairs.

    `complete` is False when the entity has more facts than were read: the pairs are then a
    deterministic sample of the first `scanned` facts in store order (see `KnowledgeGraph.edges`).
    """

    pairs: list[tuple[str, str]] = field(default_factory=list)
    scanned: int = 0
    complete: bool = True


SCAN_FACTOR = 4
"""`edges(limit=n)` reads at most SCAN_FACTOR * n facts: the cost of a hub is bounded by the cap."""


def sample_edges(found: Iterable[tuple[str, str]], limit: int | None) -> Edges:
    """Read at most SCAN_FACTOR * limit pairs of `found`; keep a stable hash sample of `limit`."""
    if limit is None:
        pairs = sorted(set(found))
        return Edges(pairs, len(pairs), True)
    scan = max(limit, 1) * SCAN_FACTOR
    read = list(itertools.islice(found, scan + 1))
    complete = len(read) <= scan
    unique = sorted(set(read[:scan]))
    if len(unique) > limit:
        unique = sorted(sorted(unique, key=lambda e: stable_key(f"{e[0]}\t{e[1]}"))[:limit])
        complete = False
    return Edges(unique, min(len(read), scan), complete)


def is_literal(node: str) -> bool:
    return node.startswith('"')


def literal_value(node: str) -> str:
    return node[1:-1] if is_literal(node) else node


def stable_key(text: str, salt: bytes = b"") -> bytes:
    """The sort key of every deterministic sample: a short hash, unrelated to store order."""
    return hashlib.blake2b(text.encode(), digest_size=8, salt=salt[:16]).digest()


def stable_sample(items: Iterable[str], limit: int | None) -> list[str]:
    """Up to `limit` items, the same ones on every run (ordered by a hash, not by store order)."""
    unique = sorted(set(items))
    if limit is None or len(unique) <= limit:
        return unique
    return sorted(unique, key=stable_key)[:limit]


class KnowledgeGraph(Protocol):
    """What every method needs from a KG."""

    def label(self, node: str) -> str: ...

    def relation_label(self, relation: str) -> str: ...

    def relations_of(self, entity: str, direction: Directions = "both") -> list[Relation]: ...

    def tails(self, entity: str, relation: str, direction: Direction = "out", limit: int | None = None) -> list[str]: ...

    def edges(self, entity: str, direction: Direction, limit: int | None = None) -> Edges:
        """The entity's facts in one direction. With `limit`, at most `limit` pairs, sampled
        deterministically from a bounded scan: a hub costs the cap, not its degree."""
        ...

    def back_relations(self, relation: str, limit: int) -> tuple[int, Counter[str]]:
        """Of up to `limit` facts `h -relation-> t` with an entity tail (sampled deterministically
        from a bounded scan, as `edges`): how many were read, and per other relation `r2` how many
        have a fact `t -r2-> h` back. What `relation_inverses.graph_inverses` reads."""
        ...
