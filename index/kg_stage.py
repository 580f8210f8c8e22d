"""The KG stage of a build: stream every KG source into a fresh Oxigraph store, then derive the
entity and relation tables from the store itself (so duplicates and --kg-keep are counted right).
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import groupby
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyoxigraph as ox

from index.graph_docs import GRAPH_DOC_PREFIX
from index.kg_degrees import DegreeSum, counter_table
from index.paths import IndexPaths
from index.store_writer import StoreWriter
from ingest.base.errors import InputError
from ingest.base.progress import console, progress_bar
from ingest.kg_batch import ALIAS, DESCRIPTION, LABEL, WIKIPEDIA, KgBatch
from ingest.kg_readers import KgOptions, read_kg, resolved_format
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
_WIKIDATA_PROPERTY = re.compile(re.escape(WIKIDATA_ENTITY) + r"P[0-9]+")

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
    """Load `sources` into `paths.kg` and write entities/relations tables; return counts.

    A source that yields neither a fact nor any entity metadata fails the build (InputError
    naming the file and why its lines were skipped) unless `options.allow_empty`.
    """
    store = ox.Store(str(paths.kg))
    with StoreWriter(store) as writer:
        load = _Load(writer, options, rejects)
        filtered, per_source = _load_sources(load, sources, options, rejects)
    dropped, external_ids = load.dropped, load.external_ids
    store.flush()
    lost: Counter[str] = Counter()
    removed = 0 if options.keep_external_ids else _remove_statements(store, sorted(external_ids), lost)
    console.print("[dim]computing entity and relation tables...[/]")
    # The relation counts are one SPARQL aggregate, which runs without the GIL: in a thread,
    # beside the degree sums and the entity table.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kg-relations") as pool:
        relation_table = pool.submit(write_relation_table, store, paths.relations)
        entities = _write_entities(store, paths.entities, load.degrees(lost))
        relations, unlabeled = relation_table.result()
    counts: dict[str, Any] = {
        "triples": int(sum(relations.values())),
        "entities": entities,
        "relations": len(relations),
        "filtered": dict(filtered),
        "sources": per_source,
    }
    if external_ids or any(s["format"] in WIKIDATA_FORMATS for s in per_source):
        statements = removed + filtered.get("external-id statement", 0)
        counts["external_ids"] = {"properties": len(external_ids), "statements_left_out": 0 if options.keep_external_ids else statements,
                                  "kept": options.keep_external_ids}
    if unlabeled:
        counts["unlabeled_relations"] = {"count": len(unlabeled), "examples": unlabeled[:5]}
    _write_fact_documents(store, paths, options, dropped, counts)
    del store
    return counts


def _load_sources(load: _Load, sources: list[KgSource], options: KgOptions,
                  rejects: RejectLog) -> tuple[Counter[str], list[dict[str, Any]]]:
    """Load every source in turn; returns the filter reasons of all and each source's entry. An
    empty source fails the build unless `options.allow_empty`."""
    filtered: Counter[str] = Counter()
    per_source: list[dict[str, Any]] = []
    for source in sources:
        fmt, tally, rejected = _load_source(load, source, options, rejects)
        filtered.update(tally.filtered)
        entry = tally.entry(source.path, fmt, rejected)
        per_source.append(entry)
        console.print(f"[green]kg[/] {source.path}: {tally.loaded:,} facts, {rejected:,} rejected")
        if tally.facts_seen == 0 and tally.metadata == 0 and not options.allow_empty:
            raise InputError(empty_source_message(entry))
    return filtered, per_source


def _load_source(load: _Load, source: KgSource, options: KgOptions,
                 rejects: RejectLog) -> tuple[str, _SourceTally, int]:
    """Load one source with a progress bar; returns its format, its tally and its reject count."""
    fmt = resolved_format(source.path, source.format)
    tally = _SourceTally()
    before = rejects.total
    with progress_bar(f"kg {source.path.name}", total=_input_size(source.path), unit="bytes") as bar:
        read, started = 0, time.monotonic()
        for batch in read_kg(source.path, fmt, options):
            load.add(batch, tally)
            rate = tally.loaded / max(time.monotonic() - started, 1e-6)
            bar.advance(max(batch.bytes_read - read, 0), status=f"{tally.loaded:,} facts, {rate:,.0f} facts/s")
            read = batch.bytes_read
        load.finish_source(tally)
    return fmt, tally, rejects.total - before


def _write_fact_documents(store: ox.Store, paths: IndexPaths, options: KgOptions, dropped: int,
                          counts: dict[str, Any]) -> None:
    """--kg-keep's counts and, as asked, the facts left out (`dropped_as_docs`) or every fact
    (`kg_as_docs`) written as documents."""
    if options.keep_fraction < 1.0:
        counts["kg_keep"] = {"fraction": options.keep_fraction, "seed": options.seed, "dropped": dropped}
        if options.dropped_as_docs:
            lost = store.quads_for_pattern(None, None, None, _DROPPED_GRAPH)
            counts["kg_keep"]["dropped_documents"] = _write_dropped_docs(store, lost, paths.dropped_docs)
            store.remove_graph(_DROPPED_GRAPH)
    if options.kg_as_docs:
        facts = store.quads_for_pattern(None, None, None, ox.DefaultGraph())
        counts["kg_documents"] = _write_dropped_docs(store, facts, paths.dropped_docs, prefix=GRAPH_DOC_PREFIX,
                                                     append=True)


class _Load:
    """Takes the batches of every source into the store and keeps what the tables need: degrees,
    --kg-keep's dropped count, the external-id properties seen.

    A parsed batch is taken at once. An unparsed one (plain N-Triples) is counted only once the
    store has parsed it; one that the store rejects is taken again parsed line by line, so its
    bad lines become rejects naming their lines (what the store loaded of it is loaded again).
    A parsed batch waits for the unparsed ones before it, so rejects are logged in file order.
    """

    def __init__(self, writer: StoreWriter, options: KgOptions, rejects: RejectLog) -> None:
        self.writer, self.options, self.rejects = writer, options, rejects
        self.rng = random.Random(options.seed)
        self.degree: Counter[str] = Counter()
        self.degree_sum = DegreeSum()
        self.dropped = 0
        self.external_ids: set[str] = set()
        self._in_flight = 0  # unparsed batches not settled yet

    def add(self, batch: KgBatch, tally: _SourceTally) -> None:
        if batch.reparse is not None:
            self.writer.load_unparsed(batch, _meta_quads(batch))
            self._in_flight += 1
        else:
            if self._in_flight:
                self.finish_source(tally)
            self._take(batch, tally)
        self._settle_finished(tally)

    def finish_source(self, tally: _SourceTally) -> None:
        """Wait for the store to load every batch of the source, so that its counts are whole."""
        self.writer.drain()
        self._settle_finished(tally)

    def _settle_finished(self, tally: _SourceTally) -> None:
        for done, loaded in self.writer.finished():
            self._in_flight -= 1
            self._settle(done, loaded, tally)

    def degrees(self, lost: Counter[str]) -> pa.Table:
        """(id, n) of every entity with a positive degree, less the `lost` counts."""
        self.degree.subtract(lost)
        self.degree_sum.add(counter_table(self.degree))
        return self.degree_sum.total()

    def _settle(self, batch: KgBatch, loaded: bool, tally: _SourceTally) -> None:
        if not loaded:
            assert batch.reparse is not None
            self._take(batch.reparse(), tally)
            return
        assert batch.degrees is not None
        self.degree_sum.add(batch.degrees)
        tally.facts_seen += batch.unparsed_facts
        tally.add(batch, batch.unparsed_facts)
        self.external_ids |= batch.external_id_properties

    def _take(self, batch: KgBatch, tally: _SourceTally) -> None:
        writer, options = self.writer, self.options
        facts = batch.facts
        tally.facts_seen += len(facts)
        if options.keep_fraction < 1.0:
            facts, lost = _keep(batch, options.keep_fraction, self.rng)
            writer.extend(facts)
            self.dropped += len(lost)
            if options.dropped_as_docs:
                writer.extend([ox.Quad(q.subject, q.predicate, q.object, _DROPPED_GRAPH) for q in lost])
        elif batch.raw is not None and len(batch.not_facts) <= len(facts) // 5:
            writer.load_raw(batch.raw, batch.not_facts)
        else:
            writer.extend(facts)
        writer.extend(_meta_quads(batch))
        _count_degrees(facts, self.degree)
        self.rejects.extend(batch.rejects)
        tally.add(batch, len(facts))
        self.external_ids |= batch.external_id_properties


WIKIDATA_FORMATS = ("wikidata", "wikidata-json")
_TOP_REASONS = 10


@dataclass
class _SourceTally:
    """What one source gave: facts read and kept, metadata rows, filter and reject reasons."""

    facts_seen: int = 0
    loaded: int = 0
    metadata: int = 0
    filtered: Counter[str] = field(default_factory=Counter)
    reject_reasons: Counter[str] = field(default_factory=Counter)

    def add(self, batch: KgBatch, kept: int) -> None:
        self.loaded += kept
        self.metadata += len(batch.meta) + batch.unparsed_meta_count
        self.filtered.update(batch.filtered)
        self.reject_reasons.update(r.reason for r in batch.rejects)

    def entry(self, path: Path, fmt: str, rejected: int) -> dict[str, Any]:
        return {
            "path": str(path), "format": fmt, "facts_read": self.loaded, "rejects": rejected,
            "metadata": self.metadata, "filtered": dict(self.filtered.most_common()),
            "reject_reasons": dict(self.reject_reasons.most_common(_TOP_REASONS)),
        }


# Why a whole source can come out empty, by format and filter reason: said with the counts.
_EMPTY_HINTS = {
    ("freebase", "non-entity subject"): "no subject is a Freebase entity (m./g. id); the head of a Freebase dump "
    "is its schema section (types and properties), which holds no entity facts",
    ("wikidata", "non-entity subject"): "no subject is a Wikidata entity (wd:Q.../wd:P...)",
    ("wikidata", "non-truthy predicate"): "no wdt: (truthy) statement was found",
}


def source_reasons(entry: dict[str, Any], top: int = 3) -> str:
    """The top filter and reject reasons of one source, as `reason: count` text."""
    reasons: Counter[str] = Counter(entry.get("filtered") or {})
    reasons.update({f"rejected: {k}": v for k, v in (entry.get("reject_reasons") or {}).items()})
    return ", ".join(f"{reason} {n:,}" for reason, n in reasons.most_common(top))


def _why_empty(entry: dict[str, Any]) -> str:
    """The top reasons of a source without facts, with what they mean where that is known."""
    reasons = source_reasons(entry) or "the file holds no triple"
    top = next(iter(entry.get("filtered") or {}), "")
    hint = _EMPTY_HINTS.get((entry["format"], top))
    return f"{reasons} ({hint})" if hint else reasons


def empty_source_message(entry: dict[str, Any]) -> str:
    """The error for a source that gave no fact and no metadata, naming the file and why."""
    message = f"{entry['path']}: 0 facts read ({entry['format']}): {_why_empty(entry)}"
    return message + "; nothing was indexed (an existing index is unchanged); pass --allow-empty to build anyway"


def kg_summary_lines(counts: dict[str, Any]) -> list[str]:
    """Plain lines for the build summary: per source facts, metadata, filtered and rejected
    lines with their top reasons; external identifiers left out; relations without a label."""
    lines = []
    for entry in counts.get("sources", []):
        line = f"  kg {entry['path']} ({entry['format']}): {entry['facts_read']:,} facts, {entry['rejects']:,} rejected"
        if entry.get("metadata"):
            line += f", {entry['metadata']:,} metadata rows (labels, aliases, descriptions, sitelinks)"
        if entry.get("filtered"):
            line += f", {sum(entry['filtered'].values()):,} filtered"
        lines.append(line)
        if entry["facts_read"] == 0:
            what = "no facts, metadata only" if entry.get("metadata") else "NOTHING from this source"
            lines.append(f"    {what}: {_why_empty(entry)}")
        elif reasons := source_reasons(entry, top=5):
            lines.append(f"    filtered/rejected: {reasons}")
    external = counts.get("external_ids")
    if external is not None:
        if external["kept"]:
            lines.append(f"  external identifiers: {external['properties']:,} properties recognised, kept as facts (--keep-external-ids)")
        else:
            lines.append(f"  external identifiers: {external['statements_left_out']:,} statements of {external['properties']:,} "
                         "recognised properties left out of the fact graph (--keep-external-ids keeps them)")
    unlabeled = counts.get("unlabeled_relations")
    if unlabeled is not None:
        lines.append(f"  {unlabeled['count']:,} of {counts['relations']:,} relations have no label in the dump: shown as "
                     f"their property id ({', '.join(unlabeled['examples'])}...); add the property entities (their "
                     "rdfs:label lines) as another --kg source to name them")
    return lines


def _remove_statements(store: ox.Store, predicates: list[str], lost: Counter[str]) -> int:
    """Remove every statement of `predicates` (facts and --kg-keep's dropped facts, not metadata)
    and count in `lost` the degree each entity loses; return how many were removed."""
    removed = 0
    for predicate in predicates:
        for graph in (ox.DefaultGraph(), _DROPPED_GRAPH):
            quads = list(store.quads_for_pattern(None, ox.NamedNode(predicate), None, graph))
            for quad in quads:
                store.remove(quad)
                if graph == _DROPPED_GRAPH:
                    continue
                removed += 1
                for term in (quad.subject, quad.object):
                    if not isinstance(term, ox.Literal):
                        lost[_term_id(term)] += 1
    return removed


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


def write_relation_table(store: ox.Store, path: Path) -> tuple[dict[str, int], list[str]]:
    """Write relations.parquet; return the triple count per relation and the ids of the
    Wikidata properties that have no label in the store (shown by their id)."""
    counts = {
        row["p"].value: int(row["n"].value)
        for row in store.query("SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p")  # type: ignore[union-attr]
    }
    labels = {}
    unlabeled = []
    for iri in counts:
        label = None
        if iri.startswith(WIKIDATA_DIRECT):
            prop = ox.NamedNode(WIKIDATA_ENTITY + iri[len(WIKIDATA_DIRECT) :])
            label = next(iter(store.quads_for_pattern(prop, _META_PREDICATE[LABEL], None, _META_GRAPH)), None)
            if label is None:
                unlabeled.append(iri[len(WIKIDATA_DIRECT) :])
        else:
            label = next(iter(store.quads_for_pattern(ox.NamedNode(iri), _META_PREDICATE[LABEL], None, _META_GRAPH)), None)
        labels[iri] = label.object.value if label is not None else readable_relation(iri)
    ids = sorted(counts)
    table = pa.table(
        {"id": ids, "label": [labels[i] for i in ids], "count": [counts[i] for i in ids]}, schema=RELATION_SCHEMA
    )
    pq.write_table(table, path)
    return counts, sorted(unlabeled, key=lambda p: (len(p), p))


def _write_entities(store: ox.Store, path: Path, degrees: pa.Table) -> int:
    """Write entities.parquet: every entity with a degree or metadata, sorted by id (with Arrow
    kernels: a Python loop over millions of entities costs seconds)."""
    meta = _meta_rows(store)
    # A Wikidata property named in the dump but in no fact is a relation, not an entity.
    named = pa.array([e for e in meta if not _WIKIDATA_PROPERTY.fullmatch(e)], pa.string())
    ids = pc.unique(pa.concat_arrays([degrees.column("id").combine_chunks(), named]))
    ids = ids.take(pc.sort_indices(ids))  # UTF-8 byte order is code point order, as `sorted`
    # Row i of each looked-up column is entity i's; one extra last row stands for "none".
    degree = pa.concat_arrays([degrees.column("n").combine_chunks(), pa.array([0], pa.int64())])
    where = pc.fill_null(pc.index_in(ids, value_set=degrees.column("id")), len(degrees))
    rows = [*meta.values(), {"label": None, "aliases": [], "description": None, "wikipedia_title": None}]
    in_meta = pc.fill_null(pc.index_in(ids, value_set=pa.array(list(meta), pa.string())), len(meta))
    columns = {"id": ids, "degree": degree.take(where)}
    for name in ("label", "aliases", "description", "wikipedia_title"):
        columns[name] = pa.array([row[name] for row in rows], ENTITY_SCHEMA.field(name).type).take(in_meta)
    pq.write_table(pa.table({name: columns[name] for name in ENTITY_SCHEMA.names}, schema=ENTITY_SCHEMA), path)
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

    @lru_cache(maxsize=100_000)
    def relation(iri: str) -> str:
        if iri.startswith(WIKIDATA_DIRECT):  # a Wikidata property is named by its entity's label
            prop = ox.NamedNode(WIKIDATA_ENTITY + iri[len(WIKIDATA_DIRECT) :])
            found = next(iter(store.quads_for_pattern(prop, _META_PREDICATE[LABEL], None, _META_GRAPH)), None)
            if found is not None:
                return str(found.object.value)
        return readable_relation(iri)

    written = 0
    with path.open("a" if append else "w", encoding="utf-8") as fh:
        for head, quads in groupby(facts, key=lambda q: q.subject):
            sentences = [
                f"{label(head)} {relation(q.predicate.value)} "
                f"{q.object.value if isinstance(q.object, ox.Literal) else label(q.object)}."
                for q in quads
            ]
            doc = {"id": f"{prefix}-{written:07d}", "title": label(head), "text": " ".join(sentences),
                   "entity": _term_id(head)}
            fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
            written += 1
    return written
