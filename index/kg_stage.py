"""The KG stage of a build: stream every KG source into a fresh Oxigraph store, then derive the
entity and relation tables from the store itself (so duplicates and --kg-keep are counted right).
"""

from __future__ import annotations

import json
import os
import queue
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from itertools import groupby
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pyoxigraph as ox

from index.paths import IndexPaths
from ingest.kg_batch import ALIAS, DESCRIPTION, LABEL, WIKIPEDIA, KgBatch
from ingest.kg_readers import KgOptions, read_kg, resolved_format
from ingest.progress import console, progress_bar
from ingest.rejects import RejectLog
from ingest.terms import (
    META_GRAPH,
    RDFS_LABEL,
    SCHEMA_DESCRIPTION,
    SKOS_ALT_LABEL,
    WIKIDATA_DIRECT,
    WIKIDATA_ENTITY,
    WIKIPEDIA_TITLE,
    readable_relation,
)

_META_PREDICATE = {
    LABEL: ox.NamedNode(RDFS_LABEL),
    ALIAS: ox.NamedNode(SKOS_ALT_LABEL),
    DESCRIPTION: ox.NamedNode(SCHEMA_DESCRIPTION),
    WIKIPEDIA: ox.NamedNode(WIKIPEDIA_TITLE),
}
_META_KIND = {node.value: kind for kind, node in _META_PREDICATE.items()}
_META_GRAPH = ox.NamedNode(META_GRAPH)
# Facts dropped by --kg-keep wait here (not in memory) until they are rendered as documents;
# the graph is removed before the stage ends.
_DROPPED_GRAPH = ox.NamedNode("urn:localkg:graph:dropped")

ENTITY_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("label", pa.string()),
        ("aliases", pa.list_(pa.string())),
        ("description", pa.string()),
        ("degree", pa.int64()),
        ("wikipedia_title", pa.string()),
    ]
)
RELATION_SCHEMA = pa.schema([("id", pa.string()), ("label", pa.string()), ("count", pa.int64())])


@dataclass(frozen=True)
class KgSource:
    """One KG input: a file (or a MetaQA folder) and its format name."""

    path: Path
    format: str


def build_kg(paths: IndexPaths, sources: list[KgSource], options: KgOptions, rejects: RejectLog) -> dict[str, Any]:
    """Load `sources` into `paths.kg` and write entities/relations tables; return counts."""
    store = ox.Store(str(paths.kg))
    rng = random.Random(options.seed)
    dropped = 0
    filtered: Counter[str] = Counter()
    degree: Counter[str] = Counter()
    per_source: list[dict[str, Any]] = []
    with _StoreWriter(store) as writer:
        for source in sources:
            fmt = resolved_format(source.path, source.format)
            loaded = 0
            before = rejects.total
            with progress_bar(f"kg {source.path.name}", total=_input_size(source.path), unit="bytes") as bar:
                read, started = 0, time.monotonic()
                for batch in read_kg(source.path, fmt, options):
                    facts = batch.facts
                    if options.keep_fraction < 1.0:
                        facts, lost = _keep(batch, options.keep_fraction, rng)
                        writer.extend(facts)
                        dropped += len(lost)
                        if options.dropped_as_docs:
                            writer.extend([ox.Quad(q.subject, q.predicate, q.object, _DROPPED_GRAPH) for q in lost])
                    elif batch.raw is not None and len(batch.not_facts) <= len(facts) // 5:
                        writer.load_raw(batch.raw, batch.not_facts)
                    else:
                        writer.extend(facts)
                    writer.extend(_meta_quads(batch))
                    _count_degrees(facts, degree)
                    rejects.extend(batch.rejects)
                    filtered.update(batch.filtered)
                    loaded += len(facts)
                    rate = loaded / max(time.monotonic() - started, 1e-6)
                    bar.advance(max(batch.bytes_read - read, 0), status=f"{loaded:,} facts, {rate:,.0f} facts/s")
                    read = batch.bytes_read
            per_source.append(
                {"path": str(source.path), "format": fmt, "facts_read": loaded, "rejects": rejects.total - before}
            )
            console.print(f"[green]kg[/] {source.path}: {loaded:,} facts, {rejects.total - before:,} rejected")
    store.flush()
    console.print("[dim]computing entity and relation tables...[/]")
    relations = _write_relations(store, paths.relations)
    entities = _write_entities(store, paths.entities, degree)
    counts: dict[str, Any] = {
        "triples": int(sum(relations.values())),
        "entities": entities,
        "relations": len(relations),
        "filtered": dict(filtered),
        "sources": per_source,
    }
    if options.keep_fraction < 1.0:
        counts["kg_keep"] = {"fraction": options.keep_fraction, "seed": options.seed, "dropped": dropped}
        if options.dropped_as_docs:
            lost = store.quads_for_pattern(None, None, None, _DROPPED_GRAPH)
            counts["kg_keep"]["dropped_documents"] = _write_dropped_docs(store, lost, paths.dropped_docs)
            store.remove_graph(_DROPPED_GRAPH)
    if options.kg_as_docs:
        facts = store.quads_for_pattern(None, None, None, ox.DefaultGraph())
        counts["kg_documents"] = _write_dropped_docs(store, facts, paths.dropped_docs, prefix="kgdoc", append=True)
    del store
    return counts


def remove_doc_ids(entities: Path) -> None:
    """Drop the `doc_ids` column that the documents stage adds to entities.parquet (for an index
    that no longer has documents). Temp file + rename: the old file may be hard-linked into the
    live index and must not change. Nothing to do when there is no such column."""
    source = pq.ParquetFile(entities)
    schema = source.schema_arrow
    if "doc_ids" not in schema.names:
        return
    schema = schema.remove(schema.get_field_index("doc_ids"))
    tmp = entities.with_name(entities.name + ".tmp")
    with pq.ParquetWriter(tmp, schema) as writer:
        for batch in source.iter_batches(batch_size=65536, columns=schema.names):
            writer.write_table(pa.Table.from_batches([batch]).cast(schema))
    os.replace(tmp, entities)


class _StoreWriter:
    """Writes to the store on a background thread, in order, while the caller parses the next
    batch. `bulk_load` of raw bytes releases the GIL, so parsing and loading overlap on two cores.
    Quads that a raw load brought in but that are not facts (labels, filtered predicates) are
    removed by the same thread right after that load, so memory stays bounded by a batch.
    """

    def __init__(self, store: ox.Store) -> None:
        self.store = store
        self._queue: queue.Queue[tuple[str, Any] | None] = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="kg-writer", daemon=True)

    def __enter__(self) -> _StoreWriter:
        self._thread.start()
        return self

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            if self._error is not None:
                continue
            kind, payload = item
            try:
                if kind == "raw":
                    data, not_facts = payload
                    self.store.bulk_load(data, ox.RdfFormat.N_TRIPLES)
                    for quad in not_facts:
                        self.store.remove(quad)
                else:
                    self.store.bulk_extend(payload)
            except BaseException as exc:  # surfaced in the caller's thread
                self._error = exc

    def _put(self, item: tuple[str, Any]) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(item)

    def load_raw(self, data: bytes, not_facts: list[ox.Quad]) -> None:
        self._put(("raw", (data, not_facts)))

    def extend(self, quads: list[ox.Quad]) -> None:
        if quads:
            self._put(("extend", quads))

    def __exit__(self, *exc_info: object) -> None:
        self._queue.put(None)
        self._thread.join()
        if self._error is not None and exc_info[0] is None:
            raise self._error


def _count_degrees(facts: list[ox.Quad], degree: Counter[str]) -> None:
    # Keyed by id strings (as `_term_id` writes them): Python hashes a str far faster than a
    # pyoxigraph term, 2.5x on the whole count; this loop is the ingest's main Python cost.
    named = ox.NamedNode
    degree.update([s.value if type(s := q.subject) is named else f"_:{s.value}" for q in facts])
    degree.update([o.value if type(o) is named else f"_:{o.value}" for q in facts
                   if type(o := q.object) is not ox.Literal])


def _input_size(path: Path) -> int | None:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.glob("*.txt")) or None
    return path.stat().st_size


def _keep(batch: KgBatch, fraction: float, rng: random.Random) -> tuple[list[ox.Quad], list[ox.Quad]]:
    """(kept, dropped) facts of one batch: each kept with probability `fraction`."""
    kept, dropped = [], []
    for quad in batch.facts:
        (kept if rng.random() < fraction else dropped).append(quad)
    return kept, dropped


def _meta_quads(batch: KgBatch) -> list[ox.Quad]:
    return [
        ox.Quad(ox.NamedNode(iri), _META_PREDICATE[kind], ox.Literal(text), _META_GRAPH)
        for kind, iri, text in batch.meta
    ]


def _term_id(term: Any) -> str:
    return f"_:{term.value}" if isinstance(term, ox.BlankNode) else term.value


def _meta_rows(store: ox.Store) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = defaultdict(lambda: {"label": None, "aliases": [], "description": None, "wikipedia_title": None})
    for quad in store.quads_for_pattern(None, None, None, _META_GRAPH):
        kind = _META_KIND.get(quad.predicate.value)
        if kind is None:
            continue
        row = rows[_term_id(quad.subject)]
        text = quad.object.value
        if kind == ALIAS:
            if text not in row["aliases"]:
                row["aliases"].append(text)
        elif row[kind] is None:
            row[kind] = text
    return rows


def _write_relations(store: ox.Store, path: Path) -> dict[str, int]:
    counts = {
        row["p"].value: int(row["n"].value)
        for row in store.query("SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p")  # type: ignore[union-attr]
    }
    labels = {}
    for iri in counts:
        label = None
        if iri.startswith(WIKIDATA_DIRECT):
            prop = ox.NamedNode(WIKIDATA_ENTITY + iri[len(WIKIDATA_DIRECT) :])
            label = next(iter(store.quads_for_pattern(prop, _META_PREDICATE[LABEL], None, _META_GRAPH)), None)
        else:
            label = next(iter(store.quads_for_pattern(ox.NamedNode(iri), _META_PREDICATE[LABEL], None, _META_GRAPH)), None)
        labels[iri] = label.object.value if label is not None else readable_relation(iri)
    ids = sorted(counts)
    table = pa.table(
        {"id": ids, "label": [labels[i] for i in ids], "count": [counts[i] for i in ids]}, schema=RELATION_SCHEMA
    )
    pq.write_table(table, path)
    return counts


def _write_entities(store: ox.Store, path: Path, degree: Counter[str]) -> int:
    meta = _meta_rows(store)
    ids = sorted(set(degree) | set(meta))
    empty = {"label": None, "aliases": [], "description": None, "wikipedia_title": None}
    columns: dict[str, list[Any]] = {name: [] for name in ENTITY_SCHEMA.names}
    for entity in ids:
        row = meta.get(entity, empty)
        columns["id"].append(entity)
        columns["label"].append(row["label"])
        columns["aliases"].append(row["aliases"])
        columns["description"].append(row["description"])
        columns["degree"].append(degree.get(entity, 0))
        columns["wikipedia_title"].append(row["wikipedia_title"])
    pq.write_table(pa.table(columns, schema=ENTITY_SCHEMA), path)
    return len(ids)


def _write_dropped_docs(
    store: ox.Store, facts: Iterable[ox.Quad], path: Path, prefix: str = "dropped", append: bool = False
) -> int:
    """Render each triple as a sentence in a short document about its head entity.

    `facts` must come grouped by subject, as the store's own scans return them: documents are
    written as each subject ends, so memory holds one entity's sentences and a bounded label cache.
    """

    @lru_cache(maxsize=100_000)
    def label(term: Any) -> str:
        found = next(iter(store.quads_for_pattern(term, _META_PREDICATE[LABEL], None, _META_GRAPH)), None)
        return found.object.value if found is not None else readable_relation(_term_id(term))

    written = 0
    with path.open("a" if append else "w", encoding="utf-8") as fh:
        for head, quads in groupby(facts, key=lambda q: q.subject):
            sentences = [
                f"{label(head)} {readable_relation(q.predicate.value)} "
                f"{q.object.value if isinstance(q.object, ox.Literal) else label(q.object)}."
                for q in quads
            ]
            doc = {"id": f"{prefix}-{written:07d}", "title": label(head), "text": " ".join(sentences),
                   "entity": _term_id(head)}
            fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
            written += 1
    return written
