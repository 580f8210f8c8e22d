"""`SparqlEndpointKG`: the `KnowledgeGraph` of a SPARQL 1.1 endpoint (Oxigraph server, QLever,
Virtuoso)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from typing import Any

import pyoxigraph as ox

from engine.access import sparql_escape
from engine.access.kg_base import GraphBase, store_term
from engine.access.kg_protocol import (
    SCAN_FACTOR,
    Direction,
    Directions,
    Edges,
    Relation,
    sample_edges,
    stable_sample,
)
from engine.access.sparql_guard import check_local_query
from ingest.base.errors import InputError, LocalkgError
from ingest.terms import META_GRAPH, RDFS_LABEL

TAIL_FETCH_LIMIT = 10_000
"""Rows an endpoint is asked for when `tails` has a limit (see `SparqlEndpointKG.tails`)."""

_ACCEPT = "application/sparql-results+json, application/n-triples;q=0.9"


class SparqlEndpointKG(GraphBase):
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
        if not isinstance(store_term(node), ox.NamedNode):
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

    def back_relations(self, relation: str, limit: int) -> tuple[int, Counter[str]]:
        """Like `OxigraphKG.back_relations`, in one query: the facts (the first `limit` with an entity
        tail in SPARQL order), each with the relations back from its tail, if any."""
        r = self._iri(relation)
        if r is None:
            return 0, Counter()
        facts = f"SELECT DISTINCT ?h ?t WHERE {{ {self._facts(f'?h {r} ?t')} FILTER(!isLiteral(?t)) }} ORDER BY ?h ?t LIMIT {max(limit, 1)}"
        query = f"SELECT ?h ?t ?p WHERE {{ {{ {facts} }} OPTIONAL {{ {self._facts('?t ?p ?h')} FILTER(?p != {r}) }} }}"
        rows = self.select(query)
        read = len({(row["h"]["value"], row["t"]["value"]) for row in rows})
        return read, Counter(row["p"]["value"] for row in rows if "p" in row)
