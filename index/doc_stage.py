"""The documents stage of an index build, and its vectors stage.

`build_documents`: read every document source (plus `dropped_docs.jsonl` when the KG stage wrote
one), link documents to KG entities, chunk them, and write documents.parquet, chunks.parquet,
bm25/ and the `doc_ids` column of entities.parquet. An index without a KG gets an entity table
made from its documents (`TitleEntities`: each document title, and each entity a document
names), so that linking, `docs chunks` and the methods that look up an entity's documents work
on a documents-only index too.
`build_vectors`: embed chunks and entity labels (resumable shards) and write vectors/.

Memory of the documents stage is bounded by a batch (CHUNK_ROW_GROUP chunk rows or
STAGE_BUFFER_CHARS characters of text), except for the set of document ids already read (to
reject duplicates: about 100 bytes per document with Wikipedia's short numeric ids) and the
title-link cache (at most LINK_CACHE_SIZE titles). The chunk sort, the doc ids of each entity and
the entity table made from documents are DuckDB queries over the staged Parquet files, which
spill to disk beyond DUCKDB_MEMORY; `--sparse tantivy` builds the BM25 index on disk.

Chunk rows are ordered by collection, then entity, so that a collection is one contiguous row
range (filtered dense and sparse search) and DuckDB can skip row groups when looking up an
entity's chunks.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from index.bm25_index import SPARSE_ENGINES, build_sparse
from index.chunking import ChunkSpan, chunk_spans
from index.kg_stage import ENTITY_SCHEMA
from index.paths import IndexPaths
from index.vectors import (
    FAISS_KINDS,
    PreviousVectors,
    ShardStats,
    embed_in_shards,
    write_ids,
    write_index,
    write_meta,
)
from ingest.doc_records import Document
from ingest.docs_map import DocsMap
from ingest.documents import DOC_FORMATS, iter_documents
from ingest.documents import detect_doc_format as _detect
from ingest.errors import InputError
from ingest.rejects import Reject, RejectLog
from ingest.terms import expand_entity_id, local_name, mint_entity

COLLECTIONS = ("wiki", "web", "domain")
# Rows per Parquet row group of chunks.parquet: small enough for DuckDB to skip most of them.
CHUNK_ROW_GROUP = 8192
# How many aliases per entity get their own row in the entity-label vector index.
ALIASES_PER_ENTITY = 3
# Entity rows per batch when the entity table is written with its doc ids.
ENTITY_BATCH_ROWS = 65536
# Characters of document text buffered before a row group is written (documents without chunks
# fill no chunk row group).
STAGE_BUFFER_CHARS = 32 << 20
# Titles whose link is remembered (a repeated title is linked once); cleared when full.
LINK_CACHE_SIZE = 100_000
# DuckDB's memory for the chunk sort and the entity queries (it spills to disk beyond it);
# LOCALKG_DUCKDB_MEMORY overrides (a DuckDB size such as 4GB).
DUCKDB_MEMORY = "2GB"
VECTOR_CHUNKS = ("all", "linked")
# In vectors/ of an index built with --vectors linked: the chunk row of each chunk vector.
CHUNK_ROWS_FILE = "chunks.rows.npy"

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


@dataclass(frozen=True)
class DocSource:
    """One document source: a file or folder, its format, and the collection it goes into."""

    path: Path
    format: str
    collection: str


@dataclass(frozen=True)
class DocOptions:
    """Options of the documents and vectors stages."""

    chunk_size: int = 1000  # characters
    chunk_overlap: int = 150
    embed_model: str | None = None  # None: the packaged default (all-MiniLM-L6-v2); with embed_server: the served name
    embed_backend: str = "torch"  # torch | onnx | onnx-int8 | server (index/embedder.py)
    embed_server: str | None = None  # an OpenAI-compatible /v1/embeddings base URL (backend server)
    faiss_kind: str = "auto"  # auto | flat | hnsw | ivfpq
    batch_size: int = 64  # texts per encode batch
    shard_size: int = 4096  # vectors per resumable shard
    entity_vectors: bool = True  # also embed entity labels (label-similarity linking)
    docs_map: tuple[str, ...] = ()  # CSV files mapping document files to entities (ingest/docs_map.py)
    vectors: bool = True  # False (--vectors none / --no-vectors): no vectors stage, chunks and BM25 only
    # which chunks the vectors stage embeds: all, or linked (only chunks of documents linked to an
    # entity: those ToG-2 and hydra read by entity); entity labels are embedded either way
    vector_chunks: str = "all"
    sparse: str = "bm25s"  # bm25s (in memory) | tantivy (on disk, for Wikipedia-sized corpora)
    kg_from_docs: str = "none"  # none | mentions | mentions-ignore-case (index/mentions_kg.py)


def detect_doc_format(path: Path) -> str:
    """The document format of `path` (one of jsonl, wikipedia-xml, wikiextractor, files, hotpot)."""
    return _detect(path)


def embed_text(title: str | None, text: str) -> str:
    """What is embedded and BM25-indexed for a chunk: its document title, then its text."""
    return f"{title}\n{text}" if title else text


# ------------------------------------------------------------------------------------------
# documents stage
# ------------------------------------------------------------------------------------------


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


def _check_options(sources: list[DocSource], options: DocOptions) -> None:
    if options.chunk_size <= 0 or not 0 <= options.chunk_overlap < options.chunk_size:
        raise InputError(
            f"--chunk-size must be positive and --chunk-overlap between 0 and the chunk size "
            f"(got {options.chunk_size} and {options.chunk_overlap})"
        )
    if options.faiss_kind not in FAISS_KINDS:
        raise InputError(f"--faiss must be one of {', '.join(FAISS_KINDS)} (got {options.faiss_kind!r})")
    if options.vector_chunks not in VECTOR_CHUNKS:
        raise InputError(f"--vectors must be one of none, {', '.join(VECTOR_CHUNKS)} (got {options.vector_chunks!r})")
    if options.sparse not in SPARSE_ENGINES:
        raise InputError(f"--sparse must be one of {', '.join(SPARSE_ENGINES)} (got {options.sparse!r})")
    for source in sources:
        if source.collection not in COLLECTIONS:
            raise InputError(f"{source.path}: collection must be one of {', '.join(COLLECTIONS)} (got {source.collection!r})")
        if source.format not in DOC_FORMATS:
            raise InputError(f"{source.path}: unknown document format {source.format!r} (expected one of {', '.join(DOC_FORMATS)})")


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


class TitleLinker:
    """Links a document to a KG entity: the entity it names (pre-linked), else the entity whose
    Wikipedia sitelink is its title, else one whose label or alias matches the title exactly or
    after normalisation (highest degree first). `web` documents are not linked by title."""

    def __init__(self, table: Any | None) -> None:
        self.table = table
        self._sitelinks: dict[str, str] = {}
        self._cache: dict[str, tuple[str | None, str | None]] = {}  # at most LINK_CACHE_SIZE titles
        if table is not None:
            best: dict[str, tuple[int, str]] = {}
            for entity, title, degree in zip(table.ids, table.wikipedia_titles, table.degrees, strict=True):
                if title:
                    key = _wiki_title_key(title)
                    if key not in best or (-degree, entity) < (-best[key][0], best[key][1]):
                        best[key] = (degree, entity)
            self._sitelinks = {key: entity for key, (_, entity) in best.items()}

    @classmethod
    def open(cls, paths: IndexPaths) -> TitleLinker:
        if not paths.entities.exists():
            return cls(None)
        return cls(read_entity_table(paths.entities))

    def link(self, doc: Document, collection: str) -> tuple[str | None, str | None]:
        """(entity id, reason) with reason in given|sitelink|exact|alias|normalised; (None, None)
        when nothing matches, (None, "given entity not in the KG") for an unknown pre-link."""
        if doc.entity:
            if self.table is None:
                return expand_entity_id(doc.entity), "given"
            resolved = self.table.resolve(doc.entity)
            return (resolved, "given") if resolved else (None, "given entity not in the KG")
        if self.table is None or not doc.linkable or not doc.title.strip() or collection == "web":
            return None, None
        if doc.title not in self._cache:
            if len(self._cache) >= LINK_CACHE_SIZE:
                self._cache.clear()  # a corpus of distinct titles would otherwise keep them all
            self._cache[doc.title] = self._by_title(doc.title)
        return self._cache[doc.title]

    def _by_title(self, title: str) -> tuple[str | None, str | None]:
        entity = self._sitelinks.get(_wiki_title_key(title))
        if entity is not None:
            return entity, "sitelink"
        assert self.table is not None
        for entity, how in self.table.find(title):
            if how != "id":
                return entity, how
        return None, None


def read_entity_table(entities: Path) -> Any:
    """An EntityTable straight from entities.parquet (a build's temp folder has no manifest yet)."""
    from index.entities import EntityTable

    return EntityTable.from_parquet(entities)


def _wiki_title_key(title: str) -> str:
    """Wikipedia titles: underscores are spaces and the first letter is case-insensitive."""
    title = title.replace("_", " ").strip()
    return title[:1].upper() + title[1:]


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


def _sql_str(text: str) -> str:
    return text.replace("'", "''")


@contextlib.contextmanager
def _duckdb(work_dir: Path) -> Iterator[Any]:
    """A DuckDB connection that spills to `work_dir`/.duckdb-tmp beyond DUCKDB_MEMORY (or
    LOCALKG_DUCKDB_MEMORY), removed afterwards."""
    import duckdb

    spill = work_dir / ".duckdb-tmp"
    con = duckdb.connect()
    try:
        con.execute(f"SET temp_directory = '{_sql_str(str(spill))}'")
        con.execute(f"SET memory_limit = '{_sql_str(os.environ.get('LOCALKG_DUCKDB_MEMORY', DUCKDB_MEMORY))}'")
        con.execute("SET preserve_insertion_order = true")
        yield con
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


# The doc ids of each linked entity, in document order, from documents.parquet ({documents}).
_DOC_IDS_QUERY = """
    SELECT entity, list(doc_id ORDER BY file_row_number) AS doc_ids
    FROM read_parquet('{documents}', file_row_number = true) WHERE entity IS NOT NULL GROUP BY entity
"""


def _count_linked_entities(documents: Path) -> int:
    with _duckdb(documents.parent) as con:
        query = f"SELECT count(DISTINCT entity) FROM read_parquet('{_sql_str(str(documents))}')"
        return int(con.execute(query).fetchone()[0])


def chunk_texts(chunks: Path, batch_rows: int = 8192, rows: np.ndarray | None = None) -> Iterator[list[str]]:
    """Embedding texts of chunks.parquet (title + text), in row order, in batches; only the
    given sorted `rows` when there are some."""
    first = 0
    for batch in pq.ParquetFile(chunks).iter_batches(batch_size=batch_rows, columns=["title", "text"]):
        if rows is not None:
            lo, hi = np.searchsorted(rows, [first, first + batch.num_rows])
            first += batch.num_rows
            if lo == hi:
                continue
            batch = batch.take(pa.array(rows[lo:hi] - (first - batch.num_rows)))
        titles, texts = batch.column(0).to_pylist(), batch.column(1).to_pylist()
        yield [embed_text(t, x) for t, x in zip(titles, texts, strict=True)]


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


# ------------------------------------------------------------------------------------------
# vectors stage
# ------------------------------------------------------------------------------------------


def build_vectors(
    paths: IndexPaths, options: DocOptions, cache_dir: Path, previous: Path | None = None
) -> dict[str, object]:
    """Embed chunks (and entity labels) and write vectors/ and embeddings/; resumable through
    shards in `cache_dir`, and only texts the previous build did not embed are embedded: their
    vectors come from `previous` (an earlier build's embeddings/; default: `paths.embeddings`).
    Returns {model, dim, model_fingerprint, ...} for the manifest."""
    from index.embed_backends import embedder_record, open_embedder
    from index.embedder import probe_vector

    if not paths.chunks.exists():
        raise InputError(f"{paths.root}: no chunks to embed (the documents stage has not run)")
    embedder = open_embedder(options.embed_model, options.embed_backend, options.embed_server, options.batch_size)
    vectors_tmp, store_tmp = _fresh_dir(paths.vectors), _fresh_dir(paths.embeddings)
    meta: dict[str, Any] = {
        "model": embedder.name,
        "dim": embedder.dim,
        "model_fingerprint": embedder.fingerprint,
        "metric": "inner_product",
        **embedder_record(embedder),
        "probe": probe_vector(embedder),
    }
    total = pq.ParquetFile(paths.chunks).metadata.num_rows
    rows = _vector_rows(paths.chunks, options.vector_chunks)
    count = total if rows is None else len(rows)
    chunk_ids = pq.read_table(paths.chunks, columns=["chunk_id"]).column(0)
    if rows is not None:
        chunk_ids = chunk_ids.take(pa.array(rows))
        np.save(vectors_tmp / CHUNK_ROWS_FILE, rows)
    meta["chunk_rows"] = {"scope": options.vector_chunks, "embedded": count, "chunks": total}
    previous = previous or paths.embeddings
    stats = [
        _embed_kind("chunks", lambda: chunk_texts(paths.chunks, rows=rows), count, {"chunk_id": chunk_ids},
                    embedder, previous, options, cache_dir, vectors_tmp, store_tmp, meta)
    ]
    if options.entity_vectors and paths.entities.exists():
        entity_ids, names = entity_names(paths.entities)
        if names:
            stats.append(_embed_kind("entities", lambda: iter([names]), len(names), {"entity": entity_ids, "name": names},
                                     embedder, previous, options, cache_dir, vectors_tmp, store_tmp, meta))
    write_meta(vectors_tmp, meta)
    write_meta(store_tmp, {k: meta[k] for k in ("model", "dim", "model_fingerprint")})
    for tmp, final in ((vectors_tmp, paths.vectors), (store_tmp, paths.embeddings)):
        shutil.rmtree(final, ignore_errors=True)  # in a build's temp copy: unlinks, never edits
        os.replace(tmp, final)
    return {
        "model": meta["model"],
        "backend": meta["backend"],
        "dim": meta["dim"],
        "model_fingerprint": meta["model_fingerprint"],
        "chunk_vectors": meta["chunks"]["count"],
        "vector_chunks": options.vector_chunks,
        "chunk_index": meta["chunks"]["kind"],
        "entity_vectors": meta.get("entities", {}).get("count", 0),
        "entity_index": meta.get("entities", {}).get("kind"),
        "shards_computed": sum(s.computed for s in stats),
        "shards_reused": sum(s.reused for s in stats),
        "vectors_computed": sum(s.vectors_computed for s in stats),
        "vectors_from_previous_build": sum(s.vectors_from_previous for s in stats),
    }


def _vector_rows(chunks: Path, scope: str) -> np.ndarray | None:
    """Rows of chunks.parquet the vectors stage embeds: None for all of them; for `linked`, the
    rows of chunks of documents linked to an entity (sorted, so a row range maps to a range of
    vector positions)."""
    if scope == "all":
        return None
    parts = []
    first = 0
    for batch in pq.ParquetFile(chunks).iter_batches(batch_size=65536, columns=["entity"]):
        linked = np.asarray(batch.column(0).is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        parts.append(np.flatnonzero(linked) + first)
        first += batch.num_rows
    rows = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)
    if len(rows) == 0:
        raise InputError(
            f"{chunks.parent}: --vectors linked embeds the chunks of documents linked to an entity, and no document "
            "is linked; use --vectors all, or --vectors none for BM25 search only"
        )
    return rows


def _fresh_dir(final: Path) -> Path:
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def _embed_kind(
    kind: str,
    read_texts: Callable[[], Iterator[list[str]]],
    count: int,
    ids: dict[str, Any],
    embedder: Any,
    previous_dir: Path,
    options: DocOptions,
    cache_dir: Path,
    vectors_dir: Path,
    store_dir: Path,
    meta: dict[str, Any],
) -> ShardStats:
    """Embed one kind (chunks or entity names), write its FAISS index, ids, vectors and keys."""
    previous = PreviousVectors.open(previous_dir, kind, embedder.fingerprint, embedder.dim)
    shards, keys, stats = embed_in_shards(kind, read_texts, count, embedder, cache_dir, options.shard_size, previous)
    del previous  # release the memory map of the previous build's vectors
    meta[kind] = write_index(kind, shards, embedder.dim, vectors_dir, options.faiss_kind, store_dir=store_dir)
    columns = {name: v if isinstance(v, pa.Array | pa.ChunkedArray) else pa.array(v, pa.string()) for name, v in ids.items()}
    write_ids(vectors_dir / f"{kind}.ids.parquet", columns)  # type: ignore[arg-type]
    np.save(store_dir / f"{kind}.keys.npy", keys)
    return stats


def entity_names(entities: Path) -> tuple[list[str], list[str]]:
    """(entity id, name) rows to embed: each label, then up to ALIASES_PER_ENTITY aliases."""
    ids: list[str] = []
    names: list[str] = []
    for batch in pq.ParquetFile(entities).iter_batches(batch_size=65536, columns=["id", "label", "aliases"]):
        for entity, label, aliases in zip(*(c.to_pylist() for c in batch.columns), strict=True):
            seen = set()
            for name in [label, *(aliases or [])[:ALIASES_PER_ENTITY]]:
                if name and name not in seen:
                    seen.add(name)
                    ids.append(entity)
                    names.append(name)
    return ids, names
