"""The unit that KG readers yield: parsed facts, entity metadata and rejects of one slice of input."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyoxigraph as ox

from ingest.rejects import Reject

# Kinds of metadata a reader can attach to an entity (stored in the meta graph, not counted as facts).
LABEL, ALIAS, DESCRIPTION, WIKIPEDIA = "label", "alias", "description", "wikipedia_title"


@dataclass
class KgBatch:
    """Facts (default graph quads), metadata rows (kind, entity IRI, text), rejects, counters."""

    facts: list[ox.Quad] = field(default_factory=list)
    # Quads of `raw` that are not facts (metadata, filtered): removed again when `raw` is loaded.
    not_facts: list[ox.Quad] = field(default_factory=list)
    # The batch's N-Triples bytes when they parsed cleanly: loading them in Rust is faster than
    # loading `facts` object by object.
    raw: bytes | None = None
    meta: list[tuple[str, str, str]] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    filtered: Counter[str] = field(default_factory=Counter)
    # Wikidata direct-claim predicates (wdt:P...) seen to be external identifiers in this slice
    # (a property declaration, a `wdtn:` value or the JSON dump's datatype): the KG stage removes
    # their facts once every source is read, unless asked to keep them.
    external_id_properties: set[str] = field(default_factory=set)
    lines: int = 0
    bytes_read: int = 0
    # An unparsed batch (plain N-Triples read by ingest/nt_scan.py): its facts are only in `raw`,
    # counted in `unparsed_facts`, their degrees in `degrees` (id, n); metadata rows, besides
    # `meta`, in `unparsed_meta` (N-Quads in the metadata graph), counted in
    # `unparsed_meta_count`; `reparse` gives the same slice parsed and validated line by line,
    # for when the store's parser rejects `raw` or `unparsed_meta`.
    unparsed_facts: int = 0
    degrees: pa.Table | None = None
    unparsed_meta: bytes = b""
    unparsed_meta_count: int = 0
    reparse: Callable[[], KgBatch] | None = None
