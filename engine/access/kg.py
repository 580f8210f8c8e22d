"""`KnowledgeGraph`: the KG access methods depend on, with an embedded Oxigraph backend and a
SPARQL 1.1 endpoint backend (Oxigraph server, QLever, Virtuoso).

Entity ids are IRIs (blank nodes as `_:id`). A literal tail is returned as its value wrapped in
double quotes (`"1999"`), which no IRI can start with, so one list can hold both kinds.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Protocol

import pyoxigraph as ox

from engine.access import sparql_escape
from engine.access.sparql_guard import check_local_query
from index.manifest import read_manifest
from index.paths import IndexPaths, open_index
from ingest.errors import IndexError_, InputError, LocalkgError
from ingest.terms import (
    META_GRAPH,
    RDFS_LABEL,
    WIKIDATA_DIRECT,
    WIKIDATA_ENTITY,
    local_name,
    readable_relation,
)

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


class _GraphBase:
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


def _node(entity: str) -> ox.NamedNode | ox.BlankNode | None:
    """The store term for an entity id; None when it cannot be a valid term (so: not in the KG)."""
    try:
        if entity.startswith("_:"):
            return ox.BlankNode(entity[2:])
        return ox.NamedNode(entity)
    except ValueError:
        return None


def _node_id(term: Any) -> str:
    if isinstance(term, ox.Literal):
        return '"' + term.value + '"'
    if isinstance(term, ox.BlankNode):
        return "_:" + term.value
    return term.value


class OxigraphKG(_GraphBase):
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
        term = _node(node)
        if term is None:
            return None
        found = next(iter(self.store.quads_for_pattern(term, self._label_predicate, None, self._meta)), None)
        return found.object.value if found is not None else None

    def relations_of(self, entity: str, direction: Directions = "both") -> list[Relation]:
        term = _node(entity)
        if term is None:
            return []
        found: set[Relation] = set()
        if direction in ("out", "both"):
            found.update(Relation(q.predicate.value, "out") for q in self.store.quads_for_pattern(term, None, None, self._default))
        if direction in ("in", "both"):
            found.update(Relation(q.predicate.value, "in") for q in self.store.quads_for_pattern(None, None, term, self._default))
        return sorted(found)

    def tails(self, entity: str, relation: str, direction: Direction = "out", limit: int | None = None) -> list[str]:
        term, predicate = _node(entity), _node(relation)
        if term is None or not isinstance(predicate, ox.NamedNode):
            return []
        if direction == "out":
            quads = self.store.quads_for_pattern(term, predicate, None, self._default)
            return stable_sample((_node_id(q.object) for q in quads), limit)
        quads = self.store.quads_for_pattern(None, predicate, term, self._default)
        return stable_sample((_node_id(q.subject) for q in quads), limit)

    def edges(self, entity: str, direction: Direction, limit: int | None = None) -> Edges:
        term = _node(entity)
        if term is None:
            return Edges()
        found: Iterator[tuple[str, str]]
        if direction == "out":
            found = ((q.predicate.value, _node_id(q.object))
                     for q in self.store.quads_for_pattern(term, None, None, self._default))
        else:
            found = ((q.predicate.value, _node_id(q.subject))
                     for q in self.store.quads_for_pattern(None, None, term, self._default))
        return sample_edges(found, limit)

    def sparql(self, query: str) -> Any:
        """Run a user's SPARQL query (read-only store: updates are refused). A query that could
        fetch anything (SERVICE, LOAD, ...) is refused before it reaches the store
        (`RefusedQuery`, see engine/access/sparql_guard.py)."""
        check_local_query(query)
        return self.store.query(query)


TAIL_FETCH_LIMIT = 10_000
"""Rows an endpoint is asked for when `tails` has a limit (see `SparqlEndpointKG.tails`)."""

_ACCEPT = "application/sparql-results+json, application/n-triples;q=0.9"


class SparqlEndpointKG(_GraphBase):
    """A SPARQL 1.1 endpoint over HTTP. Every term is escaped before it enters a query string.

    An entity or relation id that is no valid IRI (for the same rule as the embedded store) is
    not in the KG: the method returns "nothing" and sends no query. Blank nodes are not
    addressable across requests, so they have no relations here. `default_graph`: the IRI of
    the named graph that holds the facts (None: the endpoint's default graph); labels are looked
    up in localkg's meta graph, then among the facts.
    """

    def __init__(self, url: str, timeout: float = 30.0, default_graph: str | None = None,
                 max_fetch: int = TAIL_FETCH_LIMIT) -> None:
        if not url.startswith(("http://", "https://")):
            raise InputError(f"a SPARQL endpoint is an http(s) URL, not {url!r}")
        self.url = url
        self.timeout = timeout
        self.default_graph = default_graph
        self.max_fetch = max_fetch
        self._graph = sparql_escape.iri(default_graph) if default_graph is not None else None

    def _request(self, query: str) -> tuple[str, bytes]:
        """POST `query`; the answer's content type and body. LocalkgError when it fails."""
        data = urllib.parse.urlencode({"query": query}).encode()
        request = urllib.request.Request(
            self.url, data=data, headers={"Accept": _ACCEPT, "Content-Type": "application/x-www-form-urlencoded"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.headers.get_content_type(), response.read()
        except urllib.error.HTTPError as exc:
            raise LocalkgError(f"SPARQL endpoint {self.url} answered {exc.code}: {exc.read()[:200]!r}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise LocalkgError(f"SPARQL endpoint {self.url} unreachable: {exc}") from exc

    def _decode(self, body: bytes) -> dict[str, Any]:
        """A SPARQL JSON result; LocalkgError when the body is none."""
        try:
            payload = json.loads(body)
        except ValueError as exc:
            raise LocalkgError(f"SPARQL endpoint {self.url} returned invalid JSON") from exc
        if not isinstance(payload, dict) or not ("boolean" in payload or "results" in payload):
            raise LocalkgError(f"SPARQL endpoint {self.url} returned JSON that is no SPARQL result")
        return payload

    def _json(self, query: str) -> dict[str, Any]:
        return self._decode(self._request(query)[1])

    def select(self, query: str) -> list[dict[str, Any]]:
        """The bindings of a SELECT query."""
        return list(self._json(query).get("results", {}).get("bindings", []))

    def check(self) -> None:
        """A clear LocalkgError now when the endpoint cannot answer a query (`ASK {}`)."""
        if "boolean" not in self._json("ASK {}"):
            raise LocalkgError(f"SPARQL endpoint {self.url} did not answer ASK {{}} with a boolean")

    def sparql(self, query: str) -> bool | list[dict[str, str | None]] | str:
        """Run a user's query: ASK gives a bool, SELECT rows of {variable: value or None},
        CONSTRUCT/DESCRIBE the N-Triples text. Refused, before anything is sent, when it could
        make the endpoint fetch something (SERVICE, LOAD, updates; see sparql_guard)."""
        check_local_query(query)
        content_type, body = self._request(query)
        if "json" not in content_type:
            return body.decode("utf-8", errors="replace")
        payload = self._decode(body)
        if "boolean" in payload:
            return bool(payload["boolean"])
        names = list(payload.get("head", {}).get("vars", []))
        return [{n: row[n]["value"] if n in row else None for n in names} for row in payload["results"]["bindings"]]

    @staticmethod
    def _value(binding: dict[str, Any]) -> str:
        if binding["type"] == "literal":
            return '"' + binding["value"] + '"'
        if binding["type"] == "bnode":
            return "_:" + binding["value"]
        return str(binding["value"])

    @staticmethod
    def _iri(node: str) -> str | None:
        """`<node>` for a query; None when `node` is no IRI the embedded store would accept."""
        if not isinstance(_node(node), ox.NamedNode):
            return None
        try:
            return sparql_escape.iri(node)
        except ValueError:
            return None

    def _facts(self, pattern: str) -> str:
        """A triple pattern over the facts: in `default_graph` when one is set."""
        return f"GRAPH {self._graph} {{ {pattern} }}" if self._graph else pattern

    def _fetch_label(self, node: str) -> str | None:
        n = self._iri(node)
        if n is None:
            return None
        label = sparql_escape.iri(RDFS_LABEL)
        query = (
            f"SELECT ?l WHERE {{ {{ GRAPH {sparql_escape.iri(META_GRAPH)} {{ {n} {label} ?l }} }} "
            f"UNION {{ {self._facts(f'{n} {label} ?l')} }} }} LIMIT 1"
        )
        rows = self.select(query)
        return rows[0]["l"]["value"] if rows else None

    def relations_of(self, entity: str, direction: Directions = "both") -> list[Relation]:
        e = self._iri(entity)
        if e is None:
            return []
        found: set[Relation] = set()
        if direction in ("out", "both"):
            rows = self.select(f"SELECT DISTINCT ?p WHERE {{ {self._facts(f'{e} ?p ?o')} }}")
            found.update(Relation(r["p"]["value"], "out") for r in rows)
        if direction in ("in", "both"):
            rows = self.select(f"SELECT DISTINCT ?p WHERE {{ {self._facts(f'?s ?p {e}')} }}")
            found.update(Relation(r["p"]["value"], "in") for r in rows)
        return sorted(found)

    def tails(self, entity: str, relation: str, direction: Direction = "out", limit: int | None = None) -> list[str]:
        """Like `OxigraphKG.tails`. With a limit, the endpoint sends at most
        max(limit, max_fetch) tails, the first in SPARQL order (deterministic on any endpoint),
        and `stable_sample` picks from those: the very sample of the embedded store whenever
        the entity has at most that many tails over the relation. Only a hub above it gets a
        different (still stable) sample, drawn from its first tails; the alternative, the exact
        sample, would transfer every tail of the hub, which is what the limit is for."""
        e, r = self._iri(entity), self._iri(relation)
        if e is None or r is None:
            return []
        pattern = f"{e} {r} ?t" if direction == "out" else f"?t {r} {e}"
        query = f"SELECT DISTINCT ?t WHERE {{ {self._facts(pattern)} }}"
        if limit is not None:
            query += f" ORDER BY ?t LIMIT {max(limit, self.max_fetch)}"
        return stable_sample((self._value(row["t"]) for row in self.select(query)), limit)


    def edges(self, entity: str, direction: Direction, limit: int | None = None) -> Edges:
        """Like `OxigraphKG.edges`; the endpoint is asked for at most SCAN_FACTOR * limit rows in
        SPARQL order, so the sample equals the embedded store's when the scan reads everything."""
        e = self._iri(entity)
        if e is None:
            return Edges()
        pattern = f"{e} ?p ?t" if direction == "out" else f"?t ?p {e}"
        query = f"SELECT DISTINCT ?p ?t WHERE {{ {self._facts(pattern)} }}"
        if limit is not None:
            query += f" ORDER BY ?p ?t LIMIT {max(limit, 1) * SCAN_FACTOR + 1}"
        rows = self.select(query)
        return sample_edges(((r["p"]["value"], self._value(r["t"])) for r in rows), limit)


def open_kg(index: Path | None = None, endpoint: str | None = None) -> KnowledgeGraph:
    """The KG of an index folder, or of a SPARQL endpoint URL when one is given (asked `ASK {}`
    once, so a wrong URL fails here rather than on every question)."""
    if endpoint:
        remote = SparqlEndpointKG(endpoint)
        remote.check()
        return remote
    if index is None:
        raise IndexError_("give an index folder or a SPARQL endpoint")
    return OxigraphKG.open(IndexPaths(index))
