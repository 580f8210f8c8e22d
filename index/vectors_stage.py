"""The vectors stage of an index build.

`build_vectors`: embed chunks and entity labels (resumable shards) and write vectors/.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from index.chunk_texts import chunk_texts
from index.doc_options import DocOptions
from index.paths import IndexPaths
from index.vectors import (
    PreviousVectors,
    ShardStats,
    embed_in_shards,
    write_ids,
    write_index,
    write_meta,
)
from ingest.base.errors import InputError

# How many aliases per entity get their own row in the entity-label vector index.
ALIASES_PER_ENTITY = 3
# In vectors/ of an index built with --vectors linked: the chunk row of each chunk vector.
CHUNK_ROWS_FILE = "chunks.rows.npy"


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
