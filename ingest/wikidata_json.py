"""The Wikidata JSON dump (`latest-all.json[.gz|.bz2]`): `[`, one entity per line with a trailing comma.

Main snaks whose value is an entity become `wdt:` edges; other values (strings, times, quantities,
monolingual text) become literal attributes. Deprecated statements are skipped and, where a
property has preferred statements, only those are kept (the truthy view). Labels, aliases,
descriptions and sitelinks in the chosen languages become metadata; a property entity's
(`"id": "P569"`) label names its relation. Statements of external-identifier properties (the
snak's `"datatype": "external-id"`) are left out unless `keep_external_ids`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from ingest.kg_batch import ALIAS, DESCRIPTION, LABEL, WIKIPEDIA, KgBatch
from ingest.rejects import Reject
from ingest.sources import iter_lines
from ingest.terms import WIKIDATA_DIRECT, WIKIDATA_ENTITY

XSD = "http://www.w3.org/2001/XMLSchema#"
EXTERNAL_ID = "external-id"
# Exceptions that mean "this entity's JSON has an unexpected shape" while routing it.
_SHAPE_ERRORS = (KeyError, TypeError, AttributeError, ValueError)


@dataclass
class _Routed:
    """What one entity contributes; merged into the batch only once the whole entity is routed."""

    facts: list[ox.Quad] = field(default_factory=list)
    meta: list[tuple[str, str, str]] = field(default_factory=list)
    no_value: int = 0
    external_ids: set[str] = field(default_factory=set)
    external_id_statements: int = 0


def read_wikidata_json(path: Path, languages: Iterable[str], keep_external_ids: bool = False) -> Iterator[KgBatch]:
    """Read the dump as batches; a line that is not a usable entity is rejected with its line number.

    `languages` are in priority order: an entity's label, description and Wikipedia title come
    from the first of them that has one (a set has no order and is sorted instead).
    """
    name = str(path)
    order = language_order(languages)
    for first_line, lines, bytes_read in iter_lines(path, batch_bytes=8 << 20):
        batch = KgBatch(lines=len(lines), bytes_read=bytes_read)
        for offset, raw in enumerate(lines):
            text = raw.strip().rstrip(b",")
            if text in (b"", b"[", b"]"):
                continue
            routed = _entity_or_reason(text, order, keep_external_ids)
            if isinstance(routed, str):
                batch.rejects.append(Reject(name, first_line + offset, routed, raw[:200].decode("utf-8", "replace")))
                continue
            batch.facts.extend(routed.facts)
            batch.meta.extend(routed.meta)
            if routed.no_value:
                batch.filtered["no usable value"] += routed.no_value
            if routed.external_id_statements:
                batch.filtered["external-id statement"] += routed.external_id_statements
            batch.external_id_properties |= routed.external_ids
        yield batch


def language_order(languages: Iterable[str]) -> tuple[str, ...]:
    """Languages in priority order, without repeats; an unordered set is sorted (same every run)."""
    if isinstance(languages, set | frozenset):
        return tuple(sorted(languages))
    return tuple(dict.fromkeys(languages))


def _entity_or_reason(text: bytes, languages: tuple[str, ...], keep_external_ids: bool = False) -> _Routed | str:
    """The routed entity of one dump line, or why the line is rejected."""
    try:
        entity = json.loads(text)
    except UnicodeDecodeError as exc:
        return f"invalid UTF-8 at byte {exc.start}"
    except json.JSONDecodeError as exc:
        return f"invalid JSON: {exc.msg} (column {exc.colno})"
    except (ValueError, RecursionError) as exc:
        return f"invalid JSON ({exc})"
    if not isinstance(entity, dict):
        return f"expected a JSON object, got {type(entity).__name__}"
    try:
        return _route_entity(entity, languages, keep_external_ids)
    except _SHAPE_ERRORS as exc:
        return f"unexpected entity shape ({exc!r})"


def _route_entity(entity: dict[str, Any], languages: tuple[str, ...], keep_external_ids: bool = False) -> _Routed:
    """Facts and metadata of one entity; raises one of _SHAPE_ERRORS on unexpected JSON."""
    qid = entity["id"]
    if not isinstance(qid, str) or not qid:
        raise ValueError(f"bad entity id {qid!r}")
    iri = WIKIDATA_ENTITY + qid
    subject = ox.NamedNode(iri)
    routed = _Routed(meta=_entity_meta(entity, iri, languages))
    if entity.get("type") == "property" and entity.get("datatype") == EXTERNAL_ID:
        routed.external_ids.add(WIKIDATA_DIRECT + qid)
    for prop, statements in _section(entity, "claims").items():
        predicate = ox.NamedNode(WIKIDATA_DIRECT + prop)
        truthy = _truthy(statements)
        if any(s.get("mainsnak", {}).get("datatype") == EXTERNAL_ID for s in truthy):
            routed.external_ids.add(predicate.value)
            if not keep_external_ids:
                routed.external_id_statements += len(truthy)
                continue
        for statement in truthy:
            obj = _value(statement.get("mainsnak", {}), languages)
            if obj is None:
                routed.no_value += 1
                continue
            routed.facts.append(ox.Quad(subject, predicate, obj))
    return routed


def _entity_meta(entity: dict[str, Any], iri: str, languages: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """Label, description and Wikipedia title from the first language that has each; all aliases."""
    meta: list[tuple[str, str, str]] = []
    label = _first(_section(entity, "labels"), languages)
    if label is not None:
        meta.append((LABEL, iri, label["value"]))
    aliases = _section(entity, "aliases")
    for alias in dict.fromkeys(a["value"] for lang in languages for a in aliases.get(lang) or []):
        meta.append((ALIAS, iri, alias))
    description = _first(_section(entity, "descriptions"), languages)
    if description is not None:
        meta.append((DESCRIPTION, iri, description["value"]))
    sitelink = _first(_section(entity, "sitelinks"), [f"{lang}wiki" for lang in languages])
    if sitelink is not None:
        meta.append((WIKIPEDIA, iri, sitelink["title"]))
    return meta


def _section(entity: dict[str, Any], key: str) -> dict[str, Any]:
    """A keyed part of an entity (`labels`, `claims`...); an empty one may be written as `[]`."""
    return entity.get(key) or {}


def _first(values: dict[str, Any], keys: Iterable[str]) -> Any:
    """The value of the first key that has a non-empty one, else None."""
    for key in keys:
        value = values.get(key)
        if value:
            return value
    return None


def _truthy(statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    preferred = [s for s in statements if s.get("rank") == "preferred"]
    return preferred or [s for s in statements if s.get("rank") != "deprecated"]


def _value(snak: dict[str, Any], languages: tuple[str, ...]) -> ox.NamedNode | ox.Literal | None:
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
