"""The Wikidata JSON dump (`latest-all.json[.gz|.bz2]`): `[`, one entity per line with a trailing comma.

Main snaks whose value is an entity become `wdt:` edges; other values (strings, times, quantities,
monolingual text) become literal attributes. Deprecated statements are skipped and, where a
property has preferred statements, only those are kept (the truthy view). Labels, aliases,
descriptions and sitelinks in the chosen languages become metadata.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from ingest.kg_batch import ALIAS, DESCRIPTION, LABEL, WIKIPEDIA, KgBatch
from ingest.rejects import Reject
from ingest.sources import iter_lines
from ingest.terms import WIKIDATA_DIRECT, WIKIDATA_ENTITY

XSD = "http://www.w3.org/2001/XMLSchema#"


def read_wikidata_json(path: Path, languages: frozenset[str]) -> Iterator[KgBatch]:
    name = str(path)
    for first_line, lines, bytes_read in iter_lines(path, batch_bytes=8 << 20):
        batch = KgBatch(lines=len(lines), bytes_read=bytes_read)
        for offset, raw in enumerate(lines):
            text = raw.strip().rstrip(b",")
            if text in (b"", b"[", b"]"):
                continue
            try:
                entity = json.loads(text)
                _route_entity(entity, languages, batch)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                reason = "invalid JSON" if isinstance(exc, ValueError) else f"unexpected entity shape ({exc!r})"
                if isinstance(exc, UnicodeDecodeError):
                    reason = "invalid UTF-8"
                batch.rejects.append(
                    Reject(name, first_line + offset, reason, raw[:200].decode("utf-8", "replace"))
                )
        yield batch


def _route_entity(entity: dict[str, Any], languages: frozenset[str], batch: KgBatch) -> None:
    qid = entity["id"]
    iri = WIKIDATA_ENTITY + qid
    subject = ox.NamedNode(iri)
    for lang in languages:
        label = entity.get("labels", {}).get(lang)
        if label:
            batch.meta.append((LABEL, iri, label["value"]))
        for alias in entity.get("aliases", {}).get(lang, []):
            batch.meta.append((ALIAS, iri, alias["value"]))
        description = entity.get("descriptions", {}).get(lang)
        if description:
            batch.meta.append((DESCRIPTION, iri, description["value"]))
        sitelink = entity.get("sitelinks", {}).get(f"{lang}wiki")
        if sitelink:
            batch.meta.append((WIKIPEDIA, iri, sitelink["title"]))
    for prop, statements in entity.get("claims", {}).items():
        predicate = ox.NamedNode(WIKIDATA_DIRECT + prop)
        for statement in _truthy(statements):
            obj = _value(statement.get("mainsnak", {}), languages)
            if obj is None:
                batch.filtered["no usable value"] += 1
                continue
            batch.facts.append(ox.Quad(subject, predicate, obj))


def _truthy(statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    preferred = [s for s in statements if s.get("rank") == "preferred"]
    return preferred or [s for s in statements if s.get("rank") != "deprecated"]


def _value(snak: dict[str, Any], languages: frozenset[str]) -> ox.NamedNode | ox.Literal | None:
    if snak.get("snaktype") != "value":
        return None
    datavalue = snak["datavalue"]
    kind, value = datavalue["type"], datavalue["value"]
    if kind == "wikibase-entityid":
        entity_id = value.get("id") or f"Q{value['numeric-id']}"
        return ox.NamedNode(WIKIDATA_ENTITY + entity_id)
    if kind == "string":
        return ox.Literal(value)
    if kind == "monolingualtext":
        if value["language"] not in languages:
            return None
        return ox.Literal(value["text"], language=value["language"])
    if kind == "time":
        return ox.Literal(value["time"].lstrip("+"), datatype=ox.NamedNode(XSD + "dateTime"))
    if kind == "quantity":
        return ox.Literal(value["amount"].lstrip("+"), datatype=ox.NamedNode(XSD + "decimal"))
    if kind == "globecoordinate":
        return ox.Literal(f"Point({value['longitude']} {value['latitude']})")
    return None
