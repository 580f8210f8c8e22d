"""Embedding vectors and FAISS indexes for chunks and entity labels, built resumably.

Vectors are computed in shards of consecutive rows; each shard is written to the cache folder
(temp file + rename) as soon as it is done, under a key made of the model fingerprint and the
shard's texts. A build that is killed finds its finished shards on the next run and computes
only the rest. `<index>/vectors/` then holds, per kind (`chunks`, `entities`):

  <kind>.faiss        the FAISS index (inner product over normalised vectors = cosine)
  <kind>.f16.npy      every vector as float16 (exact re-ranking inside a collection, reuse)
  <kind>.ids.parquet  row -> chunk id, or row -> entity id + the name that was embedded
  meta.json           model name, path, dimension, fingerprint, index kinds and parameters
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.embedder import Embedder
from ingest.errors import IndexError_
from ingest.progress import progress_bar

FAISS_KINDS = ("auto", "flat", "hnsw", "ivfpq")
# Exact search up to this many vectors; HNSW up to HNSW_MAX; IVF-PQ (compressed) beyond.
FLAT_MAX = 100_000
HNSW_MAX = 3_000_000
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 64
META_FILE = "meta.json"


@dataclass
class ShardStats:
    """How many shards a build computed and how many it found finished in the cache."""

    computed: int = 0
    reused: int = 0
    vectors_computed: int = 0


def choose_kind(count: int, requested: str = "auto") -> str:
    """The FAISS index kind for `count` vectors: exact below FLAT_MAX, then HNSW, then IVF-PQ."""
    if requested not in FAISS_KINDS:
        raise ValueError(f"unknown FAISS index kind {requested!r} (expected one of {', '.join(FAISS_KINDS)})")
    if requested != "auto":
        return requested
    if count <= FLAT_MAX:
        return "flat"
    return "hnsw" if count <= HNSW_MAX else "ivfpq"


def _batched_texts(read: Callable[[], Iterator[list[str]]], size: int) -> Iterator[list[str]]:
    """Re-batch an iterator of text lists into lists of exactly `size` (the last may be shorter)."""
    pending: list[str] = []
    for batch in read():
        pending.extend(batch)
        while len(pending) >= size:
            yield pending[:size]
            pending = pending[size:]
    if pending:
        yield pending


def _shard_key(texts: list[str], model_fingerprint: str) -> str:
    digest = hashlib.sha1(model_fingerprint.encode())
    for text in texts:
        digest.update(len(text).to_bytes(8, "little"))
        digest.update(text.encode("utf-8", errors="surrogatepass"))
    return digest.hexdigest()[:20]


def embed_in_shards(
    kind: str,
    read_texts: Callable[[], Iterator[list[str]]],
    total: int,
    embedder: Embedder,
    cache_dir: Path,
    shard_size: int,
) -> tuple[list[Path], ShardStats]:
    """Embed every text into shard files under `cache_dir/<fingerprint>/<kind>/`, reusing any
    shard already there for the same texts and model. Returns the shard files in row order."""
    folder = cache_dir / embedder.fingerprint / kind
    folder.mkdir(parents=True, exist_ok=True)
    stats = ShardStats()
    shards: list[Path] = []
    with progress_bar(f"embedding {kind}", total, "items") as reporter:
        for number, texts in enumerate(_batched_texts(read_texts, shard_size)):
            shard = folder / f"{number:06d}-{_shard_key(texts, embedder.fingerprint)}.npy"
            if _valid_shard(shard, len(texts), embedder.dim):
                stats.reused += 1
            else:
                vectors = embedder.encode(texts)
                tmp = shard.with_name(shard.name + ".tmp")
                with tmp.open("wb") as fh:
                    np.save(fh, vectors.astype(np.float32, copy=False))
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, shard)
                stats.computed += 1
                stats.vectors_computed += len(texts)
            shards.append(shard)
            reporter.advance(len(texts), status=f"{stats.reused} shards reused")
    return shards, stats


def _valid_shard(shard: Path, rows: int, dim: int) -> bool:
    if not shard.exists():
        return False
    try:
        array = np.load(shard, mmap_mode="r")
    except (ValueError, OSError):
        return False
    return array.shape == (rows, dim) and array.dtype == np.float32


def write_index(kind: str, shards: list[Path], dim: int, out_dir: Path, faiss_kind: str, seed: int = 0) -> dict[str, Any]:
    """Build `<kind>.faiss` and `<kind>.f16.npy` from the shards; returns the index parameters."""
    import faiss

    count = sum(int(np.load(s, mmap_mode="r").shape[0]) for s in shards)
    chosen = choose_kind(count, faiss_kind)
    index, params = _new_index(chosen, dim, count)
    if chosen == "ivfpq":
        index.train(_training_sample(shards, count, params["train_size"], seed))
    storage = np.lib.format.open_memmap(out_dir / f"{kind}.f16.npy", mode="w+", dtype=np.float16, shape=(count, dim))
    row = 0
    for shard in shards:
        vectors = np.load(shard)
        index.add(vectors)
        storage[row:row + len(vectors)] = vectors.astype(np.float16)
        row += len(vectors)
    storage.flush()
    del storage
    faiss.write_index(index, str(out_dir / f"{kind}.faiss"))
    return {"count": count, "kind": chosen, **{k: v for k, v in params.items() if k != "train_size"}}


def _new_index(kind: str, dim: int, count: int) -> tuple[Any, dict[str, Any]]:
    import faiss

    if kind == "flat":
        return faiss.IndexFlatIP(dim), {}
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = HNSW_EF_SEARCH
        return index, {"M": HNSW_M, "ef_search": HNSW_EF_SEARCH}
    # IVF-PQ: ~4 sqrt(n) lists (each trained on >= 39 points), 8-dimensional sub-quantisers.
    nlist = max(1, min(int(4 * math.sqrt(count)), count // 39))
    m = next(m for m in range(max(1, dim // 8), 0, -1) if dim % m == 0)
    nbits = max(4, min(8, int(math.log2(max(2, count // 39)))))  # < 8 only for tiny, forced ivfpq
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFPQ(quantizer, dim, nlist, m, nbits, faiss.METRIC_INNER_PRODUCT)
    nprobe = min(nlist, 16)
    index.nprobe = nprobe
    train_size = min(count, max(nlist * 39, (1 << nbits) * 39, 50_000))
    return index, {"nlist": nlist, "pq_m": m, "pq_bits": nbits, "nprobe": nprobe, "train_size": train_size}


def _training_sample(shards: list[Path], count: int, size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    wanted = np.sort(rng.choice(count, size=size, replace=False))
    parts = []
    start = 0
    for shard in shards:
        vectors = np.load(shard, mmap_mode="r")
        end = start + len(vectors)
        local = wanted[(wanted >= start) & (wanted < end)] - start
        if len(local):
            parts.append(np.asarray(vectors[local], dtype=np.float32))
        start = end
    return np.ascontiguousarray(np.concatenate(parts))


def write_meta(out_dir: Path, meta: dict[str, Any]) -> None:
    tmp = out_dir / (META_FILE + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, out_dir / META_FILE)


def read_meta(vectors_dir: Path) -> dict[str, Any]:
    """The vectors' meta.json; IndexError_ when the index has no vectors."""
    path = vectors_dir / META_FILE
    if not path.exists():
        raise IndexError_(f"{vectors_dir.parent}: index has no vectors (build it with documents to get dense search)")
    return dict(json.loads(path.read_text(encoding="utf-8")))


def write_ids(path: Path, columns: dict[str, list[Any]]) -> None:
    table = pa.table({"row": pa.array(range(len(next(iter(columns.values())))), pa.int64()), **columns})
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
