"""`ParquetDocumentStore` (the `DocumentStore` of an index folder): chunks of an entity's documents, dense search (FAISS), sparse search (BM25).

Reads an index folder only: chunks.parquet through DuckDB, vectors/ through FAISS (memory-
mapped where FAISS allows), bm25/ through bm25s or tantivy (whichever built it). Safe to open
from many processes at once.

An index built with `--vectors linked` has vectors for the chunks of entity-linked documents
only: vector i is chunk row `rows[i]` (vectors/chunks.rows.npy, sorted), dense search covers
those chunks, and asking it for a collection without any says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from index.embed_backends import open_embedder
from index.embedder import PROBE_MIN_COSINE, Embedder, probe_cosine
from index.paths import SWAP_WAIT_SECONDS, IndexPaths, generation, open_index
from ingest.base.errors import IndexError_, ModelError

# Inside a collection of at most this many chunks, dense search is exact over the stored vectors.
EXACT_RANGE_MAX = 50_000
# IVF-PQ candidates per wanted result, re-ranked exactly with the stored float16 vectors.
IVFPQ_RERANK_FACTOR = 8
_CHUNK_COLUMNS = 'row, chunk_id, doc_id, entity, collection, title, text, start, "end"'


@dataclass(frozen=True)
class ChunkRecord:
    """One chunk: where it comes from (document, entity, collection) and its text."""

    chunk_id: str
    doc_id: str
    entity: str | None
    collection: str
    title: str
    text: str
    start: int
    end: int
    row: int


@dataclass(frozen=True)
class SearchHit:
    """A chunk found by a search, with its score (cosine for dense, BM25 for sparse)."""

    chunk: ChunkRecord
    score: float

    def to_dict(self) -> dict[str, Any]:
        c = self.chunk
        return {
            "chunk_id": c.chunk_id, "doc_id": c.doc_id, "entity": c.entity, "title": c.title,
            "text": c.text, "score": round(float(self.score), 6), "collection": c.collection,
        }


class ParquetDocumentStore:
    """Chunks of an index: lookups by entity and id, dense and sparse search by collection."""

    def __init__(self, root: Path | IndexPaths, embedder: Embedder | None = None) -> None:
        # the index at the path now (previous or new while a build swaps it: see open_index)
        self.paths = open_index(root, _documents_index)
        self._generation = generation(self.paths)
        self._embedder = embedder
        self._lock = threading.RLock()
        self._con: Any = None
        if embedder is not None and self.paths.vector_meta.exists():
            self._check_embedder(embedder)

    # -- lookups -------------------------------------------------------------------------

    def chunks_of(self, entity: str, limit: int | None = None) -> list[ChunkRecord]:
        """Chunks of the documents linked to `entity`, in document order."""
        sql = f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE entity = ? ORDER BY row"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self._records(sql, [entity])

    def get(self, chunk_ids: Sequence[str]) -> list[ChunkRecord]:
        """Chunks by id, in the order asked (unknown ids are left out)."""
        if not chunk_ids:
            return []
        found = {r.chunk_id: r for r in self._records(
            f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE chunk_id IN (SELECT unnest(?))", [list(chunk_ids)]
        )}
        return [found[c] for c in chunk_ids if c in found]

    def rows(self, rows: Sequence[int]) -> list[ChunkRecord]:
        """Chunks by row number, in the order asked."""
        if len(rows) == 0:
            return []
        wanted = [int(r) for r in rows]
        found = {r.row: r for r in self._records(
            f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE row IN (SELECT unnest(?))", [wanted]
        )}
        return [found[r] for r in wanted if r in found]

    def stats(self) -> dict[str, Any]:
        """Counts of documents, chunks, linked documents and documents per collection."""
        docs = self._query("SELECT count(*), count(entity), count(DISTINCT entity) FROM documents")[0]
        per_collection = self._query("SELECT collection, count(*) FROM documents GROUP BY collection ORDER BY collection")
        chunk_counts = dict(self._query("SELECT collection, count(*) FROM chunks GROUP BY collection"))
        result: dict[str, Any] = {
            "documents": int(docs[0]),
            "chunks": int(sum(chunk_counts.values())),
            "linked_documents": int(docs[1]),
            "linked_entities": int(docs[2]),
            "collections": {name: int(n) for name, n in per_collection},
            "chunks_per_collection": {name: int(n) for name, n in sorted(chunk_counts.items())},
        }
        meta = self.vector_meta
        if meta is not None:
            result["embedding"] = {k: meta.get(k) for k in ("model", "dim", "model_fingerprint")}
            result["embedding"]["backend"] = meta.get("backend") or "torch"
            if meta.get("server"):
                result["embedding"]["server"] = meta["server"]
            result["chunk_index"] = meta.get("chunks")
            result["entity_index"] = meta.get("entities")
        elif self.built_without_vectors:
            result["vectors"] = "none (built with --no-vectors: BM25 search only)"
        if meta is not None and self._vector_rows is not None:
            covered = {name: self._position_range(r) for name, r in self._collection_ranges.items()}
            result["vectors"] = (
                f"linked: {len(self._vector_rows):,} of {self._count:,} chunks embedded (chunks of documents linked "
                "to an entity; dense search covers only these)"
            )
            result["embedded_chunks_per_collection"] = {name: hi - lo for name, (lo, hi) in sorted(covered.items())}
        return result

    # -- search --------------------------------------------------------------------------

    def dense_search(self, text: str, k: int = 10, collection: str | None = None) -> list[SearchHit]:
        """The `k` chunks closest to `text` by embedding (cosine), optionally in one collection."""
        self._require_vectors()  # before loading a model: an index built with --no-vectors says so
        row_range = self._range(collection)
        if row_range is None or k <= 0:
            return []
        positions = self._position_range(row_range)
        if positions[0] == positions[1]:
            raise IndexError_(
                f"{self.paths.root}: index was built with --vectors linked, and none of the "
                f"{row_range[1] - row_range[0]:,} chunks of {collection or 'the index'} belongs to a document linked to "
                "an entity, so none has a vector; use sparse (BM25) search (`docs search --mode sparse`) or rebuild "
                f"with `python cli.py index --out {self.paths.root} --vectors all`"
            )
        query = self.embedder.encode([text])
        positions_found, scores = self._dense_rows(query, k, positions)
        rows = positions_found if self._vector_rows is None else self._vector_rows[positions_found]
        return self._hits(rows, scores)

    def sparse_search(self, text: str, k: int = 10, collection: str | None = None) -> list[SearchHit]:
        """The `k` best chunks for `text` by BM25, optionally in one collection."""
        row_range = self._range(collection)
        if row_range is None or k <= 0:
            return []
        rows, scores = self._bm25.search(text, k, None if collection is None else row_range)
        return self._hits(rows, scores)

    def vectors(self, rows: Sequence[int]) -> np.ndarray:
        """Stored chunk vectors (float32, normalised) of the given rows, e.g. for re-ranking
        (IndexError_ for a row without a vector in an index built with --vectors linked)."""
        stored = self._chunk_vectors
        wanted = np.asarray(rows, dtype=np.int64)
        if self._vector_rows is not None:
            positions = np.searchsorted(self._vector_rows, wanted)
            inside = positions < len(self._vector_rows)
            if not inside.all() or not (self._vector_rows[positions] == wanted).all():
                missing = wanted[~inside | (self._vector_rows[np.minimum(positions, len(self._vector_rows) - 1)] != wanted)]
                raise IndexError_(
                    f"{self.paths.root}: chunk rows {missing[:5].tolist()} have no vector (index built with --vectors "
                    "linked: only chunks of entity-linked documents are embedded)"
                )
            wanted = positions
        return np.asarray(stored[wanted], dtype=np.float32)

    @property
    def embedder(self) -> Embedder:
        """The index's embedding model (loaded from the path recorded at build time). An index
        built with --no-vectors has none recorded: its --embed-model, else the packaged default,
        which query-time scoring (`DenseScorer`) uses."""
        if self._embedder is None:
            if self.vector_meta is None and self.built_without_vectors:
                options = self._build_options
                self._embedder = open_embedder(
                    options.get("embed_model"), options.get("embed_backend") or "torch", options.get("embed_server")
                )
                return self._embedder
            meta = self._require_vectors()
            backend = meta.get("backend") or "torch"  # vectors built before backends existed: torch
            if backend == "server":
                embedder = open_embedder(meta.get("model"), "server", meta.get("server"))
            else:
                try:
                    embedder = open_embedder(meta.get("model_path"), backend)
                except ModelError:  # the index moved to a machine where the model lies elsewhere
                    embedder = open_embedder(None, backend)
            self._check_embedder(embedder)
            self._embedder = embedder
        return self._embedder

    @property
    def built_without_vectors(self) -> bool:
        """Whether the index was built with --no-vectors (chunks and BM25 only)."""
        return self._build_options.get("vectors") is False

    # -- internals -----------------------------------------------------------------------

    @cached_property
    def vector_meta(self) -> dict[str, Any] | None:
        from index.vectors import read_meta

        try:
            return read_meta(self.paths.vectors)
        except IndexError_:
            return None

    @cached_property
    def _vector_rows(self) -> np.ndarray | None:
        """Chunk row of each chunk vector (--vectors linked); None when every chunk has one."""
        from index.vectors_stage import CHUNK_ROWS_FILE

        path = self.paths.vectors / CHUNK_ROWS_FILE
        return np.load(path, mmap_mode="r") if path.exists() else None

    def _position_range(self, row_range: tuple[int, int]) -> tuple[int, int]:
        """Vector positions [start, end) of the chunk rows [start, end)."""
        if self._vector_rows is None:
            return row_range
        lo, hi = np.searchsorted(self._vector_rows, row_range)
        return int(lo), int(hi)

    @cached_property
    def _vector_count(self) -> int:
        return self._count if self._vector_rows is None else len(self._vector_rows)

    @cached_property
    def _build_options(self) -> dict[str, Any]:
        return docs_build_options(self.paths)

    def _require_vectors(self) -> dict[str, Any]:
        from index.vectors import read_meta

        if self.built_without_vectors and not self.paths.vector_meta.exists():
            raise IndexError_(
                f"{self.paths.root}: index was built with --no-vectors (chunks and BM25 only), so it has no "
                "whole-corpus vectors for dense search; use sparse (BM25) search (`docs search --mode sparse`), "
                "a method that scores an entity's chunks at query time (tog2), or build the vectors with "
                f"`python cli.py index --out {self.paths.root} --vectors`"
            )
        return read_meta(self.paths.vectors)

    def _check_embedder(self, embedder: Embedder) -> None:
        meta = self._require_vectors()
        if embedder.fingerprint != meta["model_fingerprint"] or embedder.dim != meta["dim"]:
            raise IndexError_(
                f"{self.paths.root}: the index was embedded with {meta['model']} "
                f"(dim {meta['dim']}, fingerprint {meta['model_fingerprint']}), not with {embedder.name} "
                f"(dim {embedder.dim}, fingerprint {embedder.fingerprint}); use the same --embed-model "
                "or rebuild the index's vectors with this model"
            )
        if meta.get("probe") and (cosine := probe_cosine(embedder, meta["probe"])) < PROBE_MIN_COSINE:
            raise IndexError_(
                f"{self.paths.root}: {embedder.name} ({embedder.fingerprint}) does not embed like the model the index "
                f"was built with (probe cosine {cosine:.3f} < {PROBE_MIN_COSINE}): the same name now serves another model"
            )

    @cached_property
    def _collection_ranges(self) -> dict[str, tuple[int, int]]:
        result = self._query("SELECT collection, min(row), max(row) + 1 FROM chunks GROUP BY collection")
        return {name: (int(start), int(end)) for name, start, end in result}

    @cached_property
    def _count(self) -> int:
        return int(self._query("SELECT count(*) FROM chunks")[0][0])

    def _range(self, collection: str | None) -> tuple[int, int] | None:
        if collection is None:
            return (0, self._count)
        return self._collection_ranges.get(collection)

    @cached_property
    def _faiss(self) -> Any:
        import faiss

        self._require_vectors()
        path = self.paths.faiss_index("chunks")
        try:
            index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        except RuntimeError:
            index = faiss.read_index(str(path))
        meta = self._require_vectors()["chunks"]
        if "nprobe" in meta:
            faiss.extract_index_ivf(index).nprobe = meta["nprobe"]
        if "ef_search" in meta:
            index.hnsw.efSearch = meta["ef_search"]
        return index

    @cached_property
    def _chunk_vectors(self) -> np.ndarray:
        self._require_vectors()
        return np.load(self.paths.stored_vectors("chunks"), mmap_mode="r")

    @cached_property
    def _bm25(self) -> Any:
        from index.bm25_index import open_sparse

        return open_sparse(self.paths.bm25)

    def _dense_rows(self, query: np.ndarray, k: int, positions: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """Vector positions and cosine scores of the best `k` within `positions` [start, end)."""
        start, end = positions
        if (start, end) != (0, self._vector_count) and end - start <= EXACT_RANGE_MAX:
            block = np.asarray(self._chunk_vectors[start:end], dtype=np.float32)
            scores = block @ query[0]
            top = np.argsort(-scores, kind="stable")[:k]
            return top + start, scores[top]
        import faiss

        params = None
        if (start, end) != (0, self._vector_count):
            selector = faiss.IDSelectorRange(start, end)
            meta = self._require_vectors()["chunks"]
            if meta["kind"] == "hnsw":
                params = faiss.SearchParametersHNSW(sel=selector, efSearch=max(meta["ef_search"], k))
            elif meta["kind"] == "ivfpq":
                params = faiss.SearchParametersIVF(sel=selector, nprobe=meta["nprobe"])
            else:
                params = faiss.SearchParameters(sel=selector)
        compressed = self._require_vectors()["chunks"]["kind"] == "ivfpq"
        fetch = max(k * IVFPQ_RERANK_FACTOR, 64) if compressed else k
        with self._lock:
            scores, rows = self._faiss.search(query, fetch, params=params)
        keep = rows[0] >= 0
        rows, scores = rows[0][keep], scores[0][keep]
        if compressed and len(rows):
            # PQ distances are approximate: re-rank the candidates with the stored vectors.
            order = np.sort(rows)
            exact = np.asarray(self._chunk_vectors[order], dtype=np.float32) @ query[0]
            top = np.argsort(-exact, kind="stable")[:k]
            rows, scores = order[top], exact[top]
        return rows, scores

    def _hits(self, rows: np.ndarray, scores: np.ndarray) -> list[SearchHit]:
        records = {r.row: r for r in self.rows(list(rows))}
        return [SearchHit(records[int(r)], float(s)) for r, s in zip(rows, scores, strict=True) if int(r) in records]

    def _connection(self) -> Any:
        if self._con is None:
            import duckdb

            con = duckdb.connect()
            for view, file in (("chunks", self.paths.chunks), ("documents", self.paths.documents)):
                path = str(file).replace("'", "''")
                con.execute(f"CREATE VIEW {view} AS SELECT * FROM read_parquet('{path}')")
            self._con = con
        return self._con

    def _query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Run `sql` on the chunk and document tables. The Parquet files are read by path at
        query time: when a build swapped the index since it was opened (and removed the files
        read), the query runs again on the index at the path now, as `open_index` does for an
        open; a failure on an index that was not swapped is raised at once."""
        deadline = time.monotonic() + SWAP_WAIT_SECONDS
        with self._lock:
            while True:
                try:
                    return list(self._connection().execute(sql, params or []).fetchall())
                except Exception as exc:
                    if not _io_error(exc) or time.monotonic() >= deadline:
                        raise
                    if generation(IndexPaths(self.paths.requested)) == self._generation:
                        raise
                    self._con = None
                    self.paths = open_index(self.paths.requested, _documents_index)
                    self._generation = generation(self.paths)
                    time.sleep(0.01)

    def _records(self, sql: str, params: list[Any]) -> list[ChunkRecord]:
        return [ChunkRecord(chunk_id=c, doc_id=d, entity=e, collection=col, title=t, text=x, start=s, end=n, row=r)
                for r, c, d, e, col, t, x, s, n in self._query(sql, params)]


def _io_error(exc: BaseException) -> bool:
    """A file the query reads is missing or unreadable (duckdb's IOException, or the OS's)."""
    return isinstance(exc, OSError) or type(exc).__name__ in ("IOException", "InvalidInputException")


def _documents_index(paths: IndexPaths) -> IndexPaths:
    """`paths` when it names an index with documents; IndexError_ saying what is missing."""
    if not paths.root.is_dir():
        raise IndexError_(f"{paths.root}: no such index")
    if not paths.chunks.exists():
        raise IndexError_(f"{paths.root}: index has no documents (build it with --docs)")
    return paths


def docs_build_options(paths: IndexPaths) -> dict[str, Any]:
    """The documents options an index was built with (manifest.json); {} when unknown."""
    import json

    try:
        manifest = json.loads(paths.manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return dict((manifest.get("build_options") or {}).get("docs") or {})


def document_stats(root: Path | IndexPaths) -> dict[str, Any]:
    """`ParquetDocumentStore.stats()`, or zero counts for an index without documents (KG only)."""
    paths = root if isinstance(root, IndexPaths) else IndexPaths(Path(root))
    if paths.root.is_dir() and not paths.chunks.exists():
        return {"documents": 0, "chunks": 0, "linked_documents": 0, "linked_entities": 0,
                "collections": {}, "chunks_per_collection": {}}
    return ParquetDocumentStore(paths).stats()


def hit_dicts(hits: Sequence[SearchHit]) -> list[dict[str, Any]]:
    """Search hits as JSON-ready dicts."""
    return [h.to_dict() for h in hits]


__all__ = ["ChunkRecord", "ParquetDocumentStore", "SearchHit", "document_stats", "hit_dicts"]
