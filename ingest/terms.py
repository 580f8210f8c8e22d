"""IRIs of the vocabularies the readers recognise, and minting of IRIs from plain names."""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SKOS_ALT_LABEL = "http://www.w3.org/2004/02/skos/core#altLabel"
SCHEMA_DESCRIPTION = "http://schema.org/description"
SCHEMA_ABOUT = "http://schema.org/about"
# Sitelinks (entity -> Wikipedia title) are stored in the meta graph with this predicate.
WIKIPEDIA_TITLE = "urn:localkg:wikipediaTitle"
# Labels, aliases, descriptions and sitelinks live in this named graph; facts in the default one.
META_GRAPH = "urn:localkg:graph:meta"

FREEBASE_NS = "http://rdf.freebase.com/ns/"
WIKIDATA_ENTITY = "http://www.wikidata.org/entity/"
WIKIDATA_DIRECT = "http://www.wikidata.org/prop/direct/"
# `wdtn:` (truthy value normalised to an IRI): Wikibase writes it only for external-identifier
# properties that have a "formatter URI for RDF resource" (P1921).
WIKIDATA_DIRECT_NORMALIZED = "http://www.wikidata.org/prop/direct-normalized/"
WIKIBASE_PROPERTY_TYPE = "http://wikiba.se/ontology#propertyType"
WIKIBASE_EXTERNAL_ID = "http://wikiba.se/ontology#ExternalId"
SCHEMA_NAME = "http://schema.org/name"

MINTED_ENTITY = "https://localkg.example/entity/"
MINTED_RELATION = "https://localkg.example/relation/"


def mint_entity(name: str) -> str:
    """A stable IRI for an entity known only by its name (TSV and MetaQA KBs)."""
    return MINTED_ENTITY + quote(name, safe="")


def mint_relation(name: str) -> str:
    return MINTED_RELATION + quote(name, safe="")


def local_name(iri: str) -> str:
    """The last segment of an IRI (after '#', '/' or ':'), percent-decoded."""
    for sep in ("#", "/", ":"):
        if sep in iri:
            iri = iri.rsplit(sep, 1)[1] or iri
    return unquote(iri)


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def readable_relation(iri: str) -> str:
    """A readable label for a relation IRI when the data gives none.

    Freebase keeps its dotted path (`film.film.directed_by`), the form ToG prompts use; a
    Wikidata property whose label is not in the dump keeps its id in upper case (`P569`, as
    Wikidata itself shows an unlabeled property); other vocabularies become words
    (`subsidiary_of` -> `subsidiary of`, `birthPlace` -> `birth place`).
    """
    if iri.startswith(FREEBASE_NS):
        return iri[len(FREEBASE_NS) :]
    if iri.startswith(WIKIDATA_DIRECT):
        return iri[len(WIKIDATA_DIRECT) :]
    name = local_name(iri)
    return _CAMEL.sub(" ", name).replace("_", " ").strip().lower() or iri


def expand_entity_id(text: str) -> str:
    """Turn the short ids users type (m.0abc, Q42, wd:Q42, fb:m.0abc) into full IRIs."""
    text = text.strip()
    if text.startswith("<") and text.endswith(">"):
        return text[1:-1]
    if re.fullmatch(r"(?:fb:|ns:)?[mg]\.[0-9a-z_]+", text):
        return FREEBASE_NS + text.split(":", 1)[-1]
    if re.fullmatch(r"(?:wd:)?[QPL][0-9]+", text):
        return WIKIDATA_ENTITY + text.split(":", 1)[-1]
    return text
