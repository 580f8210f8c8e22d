"""`OxigraphKG`: the `KnowledgeGraph` of an index's embedded Oxigraph store."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pyoxigraph as ox

from engine.access.kg_base import GraphBase, node_id, store_term
from engine.access.kg_protocol import (
    Direction,
    Directions,
    Edges,
    Relation,
    sample_edges,
    stable_sample,
)
from engine.access.sparql_guard import check_local_query
from index.manifest import read_manifest
from index.paths import IndexPaths, open_index
from ingest.base.errors import IndexError_
from ingest.terms import META_GRAPH, RDFS_LABEL


class OxigraphKG(GraphBase):
    """The embedded store of an index, opened read-only (many processes can share it).

    Queries go through `quads_for_pattern` with term objects, so no query string is ever built
    from an entity name; `sparql()` is for users' own queries.
    """

    def __init__(self, store: ox.Store) -> None:
        self.store = store
        self._meta = ox.NamedNode(META_GRAPH)
        self._label_predicate = ox.NamedNode(RDFS_LABEL)
        self._default = ox.DefaultGraph()

    @classmethod
    def open(cls, paths: IndexPaths) -> OxigraphKG:
        """The store of the index at `paths`, the previous or the new one while a build swaps
        it (`open_index`). RocksDB opens every file of the store at once, so the store stays
        whole when the build then deletes the previous index. A store that cannot be opened
        (damaged, not a store) is an IndexError_ naming it."""
        return open_index(paths, cls._open_once)

    @classmethod
    def _open_once(cls, paths: IndexPaths) -> OxigraphKG:
        read_manifest(paths)  # a clear error when the folder is not an index
        if not paths.kg.exists():
            raise IndexError_(f"{paths.root}: index has no KG store (was it built with --kg?)")
        try:
            return cls(ox.Store.read_only(str(paths.kg)))
        except (OSError, RuntimeError) as exc:  # RocksDB: `Corruption: ...` is a RuntimeError
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise IndexError_(f"{paths.kg}: cannot open the KG store read-only ({reason})") from exc

    def _fetch_label(self, node: str) -> str | None:
        term = store_term(node)
        if term is None:
            return None
        found = next(iter(self.store.quads_for_pattern(term, self._label_predicate, None, self._meta)), None)
        return found.object.value if found is not None else None

    def relations_of(self, entity: str, direction: Directions = "both") -> list[Relation]:
        term = store_term(entity)
        if term is None:
            return []
        found: set[Relation] = set()
        if direction in ("out", "both"):
            found.update(Relation(q.predicate.value, "out") for q in self.store.quads_for_pattern(term, None, None, self._default))
        if direction in ("in", "both"):
            found.update(Relation(q.predicate.value, "in") for q in self.store.quads_for_pattern(None, None, term, self._default))
        return sorted(found)

    def tails(self, entity: str, relation: str, direction: Direction = "out", limit: int | None = None) -> list[str]:
        term, predicate = store_term(entity), store_term(relation)
        if term is None or not isinstance(predicate, ox.NamedNode):
            return []
        if direction == "out":
            quads = self.store.quads_for_pattern(term, predicate, None, self._default)
            return stable_sample((node_id(q.object) for q in quads), limit)
        quads = self.store.quads_for_pattern(None, predicate, term, self._default)
        return stable_sample((node_id(q.subject) for q in quads), limit)

    def edges(self, entity: str, direction: Direction, limit: int | None = None) -> Edges:
        term = store_term(entity)
        if term is None:
            return Edges()
        found: Iterator[tuple[str, str]]
        if direction == "out":
            found = ((q.predicate.value, node_id(q.object))
                     for q in self.store.quads_for_pattern(term, None, None, self._default))
        else:
            found = ((q.predicate.value, node_id(q.subject))
                     for q in self.store.quads_for_pattern(None, None, term, self._default))
        return sample_edges(found, limit)

    def back_relations(self, relation: str, limit: int) -> tuple[int, Counter[str]]:
        predicate = store_term(relation)
        if not isinstance(predicate, ox.NamedNode):
            return 0, Counter()
        found = ((node_id(q.subject), node_id(q.object))
                 for q in self.store.quads_for_pattern(None, predicate, None, self._default)
                 if not isinstance(q.object, ox.Literal))
        facts = sample_edges(found, limit).pairs
        back: Counter[str] = Counter()
        for head, tail in facts:
            pattern = self.store.quads_for_pattern(store_term(tail), None, store_term(head), self._default)
            back.update({q.predicate.value for q in pattern} - {relation})
        return len(facts), back

    def sparql(self, query: str) -> Any:
        """Run a user's SPARQL query (read-only store: updates are refused). A query that could
        fetch anything (SERVICE, LOAD, ...) is refused before it reaches the store
        (`RefusedQuery`, see engine/access/sparql_guard.py)."""
        check_local_query(query)
        return self.store.query(query)
