"""Profiles decide, quad by quad, what is a fact, what is entity metadata and what is dropped.

A profile sees already-parsed quads (validated by pyoxigraph), so it only filters and routes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import unquote

import pyoxigraph as ox

from ingest.freebase import FREEBASE_DROP_PREFIXES
from ingest.kg_batch import ALIAS, DESCRIPTION, LABEL, WIKIPEDIA, KgBatch
from ingest.terms import (
    FREEBASE_NS,
    RDFS_LABEL,
    SCHEMA_ABOUT,
    SCHEMA_DESCRIPTION,
    SCHEMA_NAME,
    SKOS_ALT_LABEL,
    WIKIBASE_EXTERNAL_ID,
    WIKIBASE_PROPERTY_TYPE,
    WIKIDATA_DIRECT,
    WIKIDATA_DIRECT_NORMALIZED,
    WIKIDATA_ENTITY,
)

DEFAULT_GRAPH = ox.DefaultGraph()
_PROPERTY_ID = re.compile(r"P[0-9]+")
# Not a fact, but not filtered either: routed to the entity's metadata (not counted).
_METADATA = ""
_META_PREDICATES = {RDFS_LABEL: LABEL, SKOS_ALT_LABEL: ALIAS, SCHEMA_DESCRIPTION: DESCRIPTION}
_META_PREDICATE_BYTES = tuple(f"<{iri}>".encode() for iri in _META_PREDICATES)
META_PREDICATE_IRIS = tuple(_META_PREDICATES)  # what GenericProfile routes to metadata

FREEBASE_META = {
    "type.object.name": LABEL,
    "common.topic.alias": ALIAS,
    "common.topic.description": DESCRIPTION,
}


class Profile(Protocol):
    """Routes parsed quads into a batch."""

    def all_facts(self, ntriples: bytes) -> bool:
        """Whether every triple of this N-Triples text is a fact as it stands, so routing can be
        skipped. A profile that filters or rewrites says False."""
        ...

    def route(self, quads: Iterable[ox.Quad], batch: KgBatch) -> None: ...


def _never_all_facts(ntriples: bytes) -> bool:
    return False


def _lang_ok(literal: ox.Literal, languages: frozenset[str]) -> bool:
    lang = literal.language
    return lang is None or lang in languages or lang.split("-")[0] in languages


@dataclass
class GenericProfile:
    """Plain RDF: rdfs:label / skos:altLabel / schema:description become metadata, the rest facts.

    N-Quads graph names are dropped: every fact goes to the default graph.
    """

    languages: frozenset[str] = frozenset({"en"})

    def all_facts(self, ntriples: bytes) -> bool:
        """Whether every triple of this N-Triples text is a fact, told from the bytes alone: no
        metadata predicate occurs, and no \\u escape could spell one. Saves routing quad by quad."""
        return b"\\u" not in ntriples and b"\\U" not in ntriples and not any(
            iri in ntriples for iri in _META_PREDICATE_BYTES)

    def route(self, quads: Iterable[ox.Quad], batch: KgBatch) -> None:
        facts, meta = batch.facts, batch.meta
        for quad in quads:
            kind = _META_PREDICATES.get(quad.predicate.value)
            if kind is not None:
                obj = quad.object
                if isinstance(obj, ox.Literal) and _lang_ok(obj, self.languages):
                    if isinstance(quad.subject, ox.NamedNode):
                        meta.append((kind, quad.subject.value, obj.value))
                else:
                    batch.filtered["other-language metadata"] += 1
                batch.not_facts.append(quad)
                continue
            if quad.graph_name != DEFAULT_GRAPH:
                quad = ox.Quad(quad.subject, quad.predicate, quad.object)
            facts.append(quad)


@dataclass
class FreebaseProfile:
    """The Freebase RDF dump: m./g. subjects, entity or English/untyped/typed literal objects.

    Predicates whose local name starts with one of `drop_prefixes` are dropped (metadata
    predicates are routed first and never dropped).
    """

    languages: frozenset[str] = frozenset({"en"})
    drop_prefixes: tuple[str, ...] = FREEBASE_DROP_PREFIXES
    _drop_cache: dict[str, bool] = field(default_factory=dict)

    def _dropped(self, local: str) -> bool:
        hit = self._drop_cache.get(local)
        if hit is None:
            hit = local.startswith(self.drop_prefixes)
            if len(self._drop_cache) < 200_000:
                self._drop_cache[local] = hit
        return hit

    all_facts = staticmethod(_never_all_facts)

    def route(self, quads: Iterable[ox.Quad], batch: KgBatch) -> None:
        ns, n = FREEBASE_NS, len(FREEBASE_NS)
        for quad in quads:
            subject = quad.subject.value
            if not subject.startswith(ns) or subject[n : n + 2] not in ("m.", "g."):
                batch.filtered["non-entity subject"] += 1
                batch.not_facts.append(quad)
                continue
            predicate = quad.predicate.value
            local = predicate[n:] if predicate.startswith(ns) else predicate
            obj = quad.object
            kind = FREEBASE_META.get(local) or _META_PREDICATES.get(predicate)
            if kind is not None:
                if isinstance(obj, ox.Literal) and _lang_ok(obj, self.languages):
                    batch.meta.append((kind, subject, obj.value))
                else:
                    batch.filtered["other-language metadata"] += 1
                batch.not_facts.append(quad)
                continue
            if self._dropped(local):
                batch.filtered["dropped predicate"] += 1
                batch.not_facts.append(quad)
                continue
            if isinstance(obj, ox.Literal):
                if not _lang_ok(obj, self.languages):
                    batch.filtered["other-language literal"] += 1
                    batch.not_facts.append(quad)
                    continue
            elif not (obj.value.startswith(ns) and obj.value[n : n + 2] in ("m.", "g.")):
                batch.filtered["non-entity object"] += 1
                batch.not_facts.append(quad)
                continue
            batch.facts.append(quad)


@dataclass
class WikidataProfile:
    """Wikidata RDF (truthy N-Triples or the full Turtle dump).

    `wdt:` edges between entities and `wdt:` literals are facts; statement, qualifier, reference
    and value nodes are skipped; labels/aliases/descriptions in the chosen languages become
    metadata (a property's label, `wd:P569 rdfs:label "date of birth"`, names its `wdt:P569`
    relation); `<https://LANG.wikipedia.org/wiki/T> schema:about wd:Q` becomes a sitelink.

    External-identifier properties are recognised from the dump itself: a declaration
    `wd:P214 wikibase:propertyType wikibase:ExternalId`, or a `wdtn:P214` (normalised) value,
    which Wikibase writes only for external identifiers. Their `wdt:` statements are left out
    once known (unless `keep_external_ids`); the ones read before the property was recognised
    are removed by the KG stage, which gets the properties in `KgBatch.external_id_properties`.
    """

    languages: frozenset[str] = frozenset({"en"})
    keep_external_ids: bool = False
    external_ids: set[str] = field(default_factory=set)

    all_facts = staticmethod(_never_all_facts)

    def route(self, quads: Iterable[ox.Quad], batch: KgBatch) -> None:
        ent = WIKIDATA_ENTITY
        sites = tuple(f"https://{lang}.wikipedia.org/wiki/" for lang in sorted(self.languages))
        for quad in quads:
            subject = quad.subject.value
            predicate = quad.predicate.value
            obj = quad.object
            if predicate == SCHEMA_ABOUT:
                if subject.startswith(sites) and obj.value.startswith(ent):
                    title = unquote(subject.split("/wiki/", 1)[1]).replace("_", " ")
                    batch.meta.append((WIKIPEDIA, obj.value, title))
                else:
                    batch.filtered["other sitelink"] += 1
                batch.not_facts.append(quad)
                continue
            if not subject.startswith(ent) or not isinstance(quad.subject, ox.NamedNode):
                batch.filtered["non-entity subject"] += 1
                batch.not_facts.append(quad)
                continue
            reason = self._route_entity_quad(quad, batch)
            if reason is not None:
                if reason != _METADATA:
                    batch.filtered[reason] += 1
                batch.not_facts.append(quad)
                continue
            if quad.graph_name != DEFAULT_GRAPH:
                quad = ox.Quad(quad.subject, quad.predicate, quad.object)
            batch.facts.append(quad)

    def _route_entity_quad(self, quad: ox.Quad, batch: KgBatch) -> str | None:
        """None when `quad` (about an entity) is a fact; else why not (metadata is added here)."""
        subject, predicate, obj = quad.subject.value, quad.predicate.value, quad.object
        kind = _META_PREDICATES.get(predicate)
        if kind is None and predicate == SCHEMA_NAME and _is_property(subject):
            kind = LABEL  # the Turtle dump names a property by rdfs:label and schema:name
        if kind is not None:
            if isinstance(obj, ox.Literal) and _lang_ok(obj, self.languages):
                batch.meta.append((kind, subject, obj.value))
                return _METADATA
            return "other-language metadata"
        if predicate == WIKIBASE_PROPERTY_TYPE:
            if obj.value == WIKIBASE_EXTERNAL_ID and _is_property(subject):
                self._learn_external_id(WIKIDATA_DIRECT + subject[len(WIKIDATA_ENTITY) :], batch)
            return "property declaration"
        if predicate.startswith(WIKIDATA_DIRECT_NORMALIZED):
            self._learn_external_id(WIKIDATA_DIRECT + predicate[len(WIKIDATA_DIRECT_NORMALIZED) :], batch)
            return "normalised external-id value"
        if not predicate.startswith(WIKIDATA_DIRECT):
            return "non-truthy predicate"
        if predicate in self.external_ids and not self.keep_external_ids:
            return "external-id statement"
        if isinstance(obj, ox.Literal):
            if not _lang_ok(obj, self.languages):
                return "other-language literal"
        elif not obj.value.startswith(WIKIDATA_ENTITY):
            return "non-entity object"
        return None

    def _learn_external_id(self, direct_claim: str, batch: KgBatch) -> None:
        self.external_ids.add(direct_claim)
        batch.external_id_properties.add(direct_claim)


def _is_property(iri: str) -> bool:
    return iri.startswith(WIKIDATA_ENTITY) and _PROPERTY_ID.fullmatch(iri[len(WIKIDATA_ENTITY) :]) is not None
