"""The documents stage of an index build (its vectors stage: index/vectors_stage.py).

`build_documents`: read every document source (plus `dropped_docs.jsonl` when the KG stage wrote
one), link documents to KG entities, chunk them, and write documents.parquet, chunks.parquet,
bm25/ and the `doc_ids` column of entities.parquet. An index without a KG gets an entity table
made from its documents (`TitleEntities`: each document title, and each entity a document
names), so that linking, `docs chunks` and the methods that look up an entity's documents work
on a documents-only index too.

Memory of the documents stage is bounded by a batch (CHUNK_ROW_GROUP chunk rows or
STAGE_BUFFER_CHARS characters of text), except for the set of document ids already read (to
reject duplicates: about 100 bytes per document with Wikipedia's short numeric ids) and the
title-link cache (at most LINK_CACHE_SIZE titles). The chunk sort, the doc ids of each entity and
the entity table made from documents are DuckDB queries over the staged Parquet files, which
spill to disk beyond DUCKDB_MEMORY; `--sparse tantivy` builds the BM25 index on disk.

Chunk rows are ordered by collection, then entity, so that a collection is one contiguous row
range (filtered dense and sparse search) and DuckDB can skip row groups when looking up an
entity's chunks.

Here: the stage itself and what writes its files. Its options and sources are in
index/doc_options.py, linking by title in index/doc_linking.py, the DuckDB helpers in
index/doc_duckdb.py, and the chunk texts read back in index/chunk_texts.py.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from index.bm25_index import build_sparse
from index.chunk_texts import chunk_texts
from index.chunking import ChunkSpan, chunk_spans
from index.doc_duckdb import _DOC_IDS_QUERY, _count_linked_entities, _duckdb, _sql_str
from index.doc_linking import TitleLinker
from index.doc_options import COLLECTIONS, DocOptions, DocSource, _check_options, detect_doc_format
from index.kg_stage import ENTITY_SCHEMA
from index.paths import IndexPaths
from ingest.base.errors import InputError
from ingest.doc_records import Document
from ingest.docs_map import DocsMap
from ingest.documents import iter_documents
from ingest.rejects import Reject, RejectLog
from ingest.terms import expand_entity_id, local_name, mint_entity

# Rows per Parquet row group of chunks.parquet: small enough for DuckDB to skip most of them.
CHUNK_ROW_GROUP = 8192
# Entity rows per batch when the entity table is written with its doc ids.
ENTITY_BATCH_ROWS = 65536
# Characters of document text buffered before a row group is written (documents without chunks
# fill no chunk row group).
STAGE_BUFFER_CHARS = 32 << 20

CHUNK_SCHEMA = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("doc_id", pa.string()),
        ("entity", pa.string()),
        ("collection", pa.string()),
        ("title", pa.string()),
        ("text", pa.string()),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("seq", pa.int64()),
    ]
)
DOC_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("title", pa.string()),
        ("text", pa.string()),
        ("entity", pa.string()),
        ("link_reason", pa.string()),
        ("collection", pa.string()),
        ("source", pa.string()),
        ("chunks", pa.int64()),
    ]
)


def build_documents(paths: IndexPaths, sources: list[DocSource], options: DocOptions, rejects: RejectLog) -> dict[str, object]:
    """Ingest, link and chunk all document sources; returns counts for the manifest."""
    _check_options(sources, options)
    sources = list(sources)
    if paths.dropped_docs.exists() and paths.dropped_docs.stat().st_size > 0:
        sources.append(DocSource(paths.dropped_docs, "jsonl", "wiki"))
    docs_map = DocsMap.read(Path(p) for p in options.docs_map)
    linker = TitleLinker.open(paths)
    # no KG: entities from the documents
    titles = TitleEntities(paths.root / ".title-entities-staging.parquet") if linker.table is None else None
    unknown: list[str] = []  # mapped entities the KG does not have, with the place of the mapping
    mapped = 0  # documents whose entity a --docs-map row or front matter gives
    staging = paths.root / ".chunks-staging.parquet"
    doc_tmp = paths.documents.with_name(paths.documents.name + ".tmp")
    seen: set[str] = set()  # the one per-document state: duplicates are rejected as they come
    with _StageWriter(doc_tmp, staging) as writer, titles or contextlib.nullcontext():
        for source in sources:
            for doc in _documents(source, rejects, docs_map):
                if doc.id in seen:
                    rejects.add(Reject(str(source.path), None, f"duplicate document id {doc.id!r} (the first one is kept)", doc.title))
                    continue
                seen.add(doc.id)
                entity, reason = (titles or linker).link(doc, source.collection)
                if doc.entity_origin:
                    mapped += 1
                    if entity is None:
                        unknown.append(f"{doc.entity_origin}: {doc.entity!r}")
                writer.add(doc, source, entity, reason, chunk_spans(doc.text, options.chunk_size, options.chunk_overlap))
    _check_mapping(docs_map, unknown)
    if writer.counts["chunks"] == 0:
        staging.unlink(missing_ok=True)
        doc_tmp.unlink(missing_ok=True)
        names = ", ".join(str(s.path) for s in sources) or "(none)"
        raise InputError(f"no documents could be read from {names} ({rejects.total} records rejected)")
    os.replace(doc_tmp, paths.documents)
    ranges = _write_sorted_chunks(staging, paths.chunks)
    staging.unlink()
    _build_sparse(paths, options.sparse)
    title_entities = None
    if titles is not None:
        title_entities = titles.write(paths.entities, paths.documents)
    elif paths.entities.exists():
        _write_doc_ids(paths.entities, paths.documents)
    counts: dict[str, object] = {
        "documents": writer.counts["documents"],
        "chunks": writer.counts["chunks"],
        "linked_documents": writer.counts["linked_documents"],
        "linked_entities": _count_linked_entities(paths.documents),
        "collections": dict(writer.collections),
        "chunk_ranges": {name: list(r) for name, r in ranges.items()},
        "link_reasons": dict(writer.reasons),
        "doc_rejects": rejects.total,
    }
    if title_entities is not None:
        counts["title_entities"] = title_entities
    if mapped:
        counts["mapped_documents"] = mapped
    return counts


def _check_mapping(docs_map: DocsMap, unknown: list[str]) -> None:
    """InputError for mapped entities the index does not have and for map rows naming a file
    that no `files` source read (both name the place of the mapping)."""
    if unknown:
        more = f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else ""
        raise InputError(
            f"{len(unknown)} document(s) are mapped to an entity the KG does not have (give an IRI, or a label "
            f"or alias of a KG entity): {'; '.join(unknown[:5])}{more}"
        )
    unused = docs_map.unused()
    if unused:
        file, entry = unused[0]
        more = f" (and {len(unused) - 1} more rows)" if len(unused) > 1 else ""
        raise InputError(f"{entry.origin}: {file} is not a document of any --docs source of format files{more}")


class _StageWriter:
    """Streams documents to documents.parquet (temp name) and their chunks to a staging file,
    in row groups, and counts what it wrote."""

    def __init__(self, documents: Path, chunks: Path) -> None:
        self._docs = pq.ParquetWriter(documents, DOC_SCHEMA)
        self._chunks = pq.ParquetWriter(chunks, CHUNK_SCHEMA)
        self._doc_rows: list[dict[str, Any]] = []
        self._chunk_rows: list[dict[str, Any]] = []
        self._buffered_chars = 0
        self.counts: Counter[str] = Counter()
        self.collections: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()

    def __enter__(self) -> _StageWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._flush()
        self._docs.close()
        self._chunks.close()

    def add(self, doc: Document, source: DocSource, entity: str | None, reason: str | None, spans: list[ChunkSpan]) -> None:
        seq = self.counts["documents"]
        for n, span in enumerate(spans):
            self._chunk_rows.append({
                "chunk_id": f"{doc.id}#{n}", "doc_id": doc.id, "entity": entity, "collection": source.collection,
                "title": doc.title, "text": doc.text[span.start:span.end], "start": span.start, "end": span.end, "seq": seq,
            })
        self._doc_rows.append({
            "doc_id": doc.id, "title": doc.title, "text": doc.text, "entity": entity, "link_reason": reason,
            "collection": source.collection, "source": str(source.path), "chunks": len(spans),
        })
        self.counts["documents"] += 1
        self.counts["chunks"] += len(spans)
        self.collections[source.collection] += 1
        if entity is not None:
            self.counts["linked_documents"] += 1
        if reason is not None:
            self.reasons[reason] += 1
        self._buffered_chars += 2 * len(doc.text)  # the document's text and its chunks' texts
        if len(self._chunk_rows) >= CHUNK_ROW_GROUP or self._buffered_chars >= STAGE_BUFFER_CHARS:
            self._flush()

    def _flush(self) -> None:
        if self._doc_rows:
            self._chunks.write_table(pa.Table.from_pylist(self._chunk_rows, CHUNK_SCHEMA))
            self._docs.write_table(pa.Table.from_pylist(self._doc_rows, DOC_SCHEMA))
            self._chunk_rows, self._doc_rows = [], []
            self._buffered_chars = 0


def _documents(source: DocSource, rejects: RejectLog, docs_map: DocsMap | None = None) -> Iterator[Document]:
    fmt = detect_doc_format(source.path) if source.format == "auto" else source.format
    return iter_documents(source.path, fmt, rejects, docs_map)


class TitleEntities:
    """The entity table of an index without a KG, made from its documents: every linkable,
    titled document outside `web` links to the entity of its title (minted as a TSV KG would
    mint that name, so a KG added later names it the same), and a document that names an entity
    (JSONL `entity`, `--docs-map`, front matter) links to that one (an id as it is, a name
    minted). AdvHotpotQA's distractors and untitled documents stay unlinked.

    Each link is staged as an (entity, label) row in `staging` (in row groups, so memory stays
    bounded); `write` keeps the first label of each entity, in first-seen order."""

    _SCHEMA = pa.schema([("entity", pa.string()), ("label", pa.string())])

    def __init__(self, staging: Path) -> None:
        self._staging = staging
        self._writer = pq.ParquetWriter(staging, self._SCHEMA)
        self._entities: list[str] = []
        self._labels: list[str] = []

    def __enter__(self) -> TitleEntities:
        return self

    def __exit__(self, *exc: object) -> None:
        self._flush()
        self._writer.close()

    def link(self, doc: Document, collection: str) -> tuple[str | None, str | None]:
        """(entity id, reason) with reason in given|title; (None, None) for no entity."""
        if doc.entity:
            given = doc.entity.strip()
            if _is_entity_id(given):
                entity = expand_entity_id(given)
                return self._add(entity, doc.title.strip() or local_name(entity)), "given"
            return self._add(mint_entity(given), given), "given"
        title = doc.title.strip()
        if not doc.linkable or not title or collection == "web":
            return None, None
        return self._add(mint_entity(title), title), "title"

    def _add(self, entity: str, label: str) -> str:
        self._entities.append(entity)
        self._labels.append(label)
        if len(self._entities) >= CHUNK_ROW_GROUP:
            self._flush()
        return entity

    def _flush(self) -> None:
        if self._entities:
            self._writer.write_table(pa.table({"entity": self._entities, "label": self._labels}, schema=self._SCHEMA))
            self._entities, self._labels = [], []

    def write(self, entities: Path, documents: Path) -> int:
        """entities.parquet (KG columns, degree 0) with the `doc_ids` of each entity; returns
        the number of entities. Removes the staging file."""
        schema = ENTITY_SCHEMA.append(pa.field("doc_ids", pa.list_(pa.string())))
        query = f"""
            WITH firsts AS (
                SELECT entity, arg_min(label, file_row_number) AS label, min(file_row_number) AS first
                FROM read_parquet('{_sql_str(str(self._staging))}', file_row_number = true) GROUP BY entity
            ), docs AS ({_DOC_IDS_QUERY.format(documents=_sql_str(str(documents)))})
            SELECT f.entity, f.label, coalesce(d.doc_ids, []::VARCHAR[]) FROM firsts f
            LEFT JOIN docs d ON d.entity = f.entity ORDER BY f.first
        """
        tmp = entities.with_name(entities.name + ".tmp")
        count = 0
        with _duckdb(entities.parent) as con, pq.ParquetWriter(tmp, schema) as writer:
            for batch in con.sql(query).to_arrow_reader(ENTITY_BATCH_ROWS):
                ids, labels, doc_ids = batch.columns
                n = len(ids)
                writer.write_table(pa.table({
                    "id": ids.cast(pa.string()), "label": labels.cast(pa.string()), "aliases": [[] for _ in range(n)], "description": [None] * n,
                    "degree": [0] * n, "wikipedia_title": [None] * n, "doc_ids": doc_ids.cast(pa.list_(pa.string())),
                }, schema=schema))
                count += n
        os.replace(tmp, entities)
        self._staging.unlink(missing_ok=True)
        return count


def _is_entity_id(text: str) -> bool:
    """An IRI or a short id (Q42, m.0abc, <iri>) rather than a name ("Acme Corp")."""
    return expand_entity_id(text) != text or re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:\S+", text) is not None


def _write_sorted_chunks(staging: Path, out: Path) -> dict[str, tuple[int, int]]:
    """chunks.parquet ordered by collection, entity, document, chunk; with a `row` column."""
    order = ", ".join(f"'{c}'" for c in COLLECTIONS)
    tmp = out.with_name(out.name + ".tmp")
    with _duckdb(staging.parent) as con:
        query = f"""
            SELECT row_number() OVER (ORDER BY coalesce(list_position([{order}], collection), 99), collection,
                                      entity NULLS LAST, seq, start) - 1 AS row,
                   chunk_id, doc_id, entity, collection, title, text, start, "end"
            FROM read_parquet('{_sql_str(str(staging))}')
            ORDER BY row
        """
        con.execute(f"COPY ({query}) TO '{_sql_str(str(tmp))}' (FORMAT parquet, ROW_GROUP_SIZE {CHUNK_ROW_GROUP})")
        ranges = con.execute(
            f"SELECT collection, min(row), max(row) + 1 FROM read_parquet('{_sql_str(str(tmp))}') GROUP BY collection"
        ).fetchall()
    os.replace(tmp, out)
    return {name: (int(start), int(end)) for name, start, end in ranges}


def _build_sparse(paths: IndexPaths, engine: str) -> None:
    build_sparse(engine, chunk_texts(paths.chunks), paths.bm25)


def _write_doc_ids(entities: Path, documents: Path) -> None:
    """Rewrite entities.parquet with a `doc_ids` column (temp file + rename: the old file may be
    hard-linked into the live index and must not change). The doc ids come from a DuckDB query
    ordered by entity row, merged with the entity rows as both stream."""
    source = pq.ParquetFile(entities)
    schema = source.schema_arrow
    if "doc_ids" in schema.names:
        schema = schema.remove(schema.get_field_index("doc_ids"))
    schema = schema.append(pa.field("doc_ids", pa.list_(pa.string())))
    tmp = entities.with_name(entities.name + ".tmp")
    query = f"""
        WITH docs AS ({_DOC_IDS_QUERY.format(documents=_sql_str(str(documents)))})
        SELECT e.file_row_number, d.doc_ids FROM read_parquet('{_sql_str(str(entities))}', file_row_number = true) e
        JOIN docs d ON d.entity = e.id ORDER BY e.file_row_number
    """
    with _duckdb(entities.parent) as con, pq.ParquetWriter(tmp, schema) as writer:
        linked = _rows_and_values(con.sql(query).to_arrow_reader(ENTITY_BATCH_ROWS))
        pending = next(linked, None)
        first = 0
        for batch in source.iter_batches(batch_size=ENTITY_BATCH_ROWS):
            table = pa.Table.from_batches([batch])
            if "doc_ids" in table.column_names:
                table = table.drop_columns(["doc_ids"])
            doc_ids: list[list[str]] = [[] for _ in range(table.num_rows)]
            while pending is not None and pending[0] < first + table.num_rows:
                doc_ids[pending[0] - first] = pending[1]
                pending = next(linked, None)
            first += table.num_rows
            table = table.append_column("doc_ids", pa.array(doc_ids, pa.list_(pa.string())))
            writer.write_table(table.cast(schema))
    os.replace(tmp, entities)


def _rows_and_values(reader: Any) -> Iterator[tuple[int, Any]]:
    """(row, value) pairs of a two-column Arrow record batch reader."""
    for batch in reader:
        yield from zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True)
