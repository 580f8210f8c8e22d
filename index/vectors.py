"""Embedding vectors and FAISS indexes for chunks and entity labels, built resumably.

Vectors are computed in shards of consecutive rows; each shard is written to the cache folder
(temp file + rename) as soon as it is done, under a key made of the model fingerprint and the
shard's texts. A build that is killed finds its finished shards on the next run and computes
only the rest. A later build (documents added) takes the vector of every text it has already
embedded with the same model from the previous `embeddings/`, and embeds only new texts.

`<index>/vectors/` holds, per kind (`chunks`, `entities`):
  <kind>.faiss        the FAISS index (inner product over normalised vectors = cosine)
  <kind>.ids.parquet  row -> chunk id, or row -> entity id + the name that was embedded
  meta.json           model name, path, dimension, fingerprint, index kinds and parameters
`<index>/embeddings/` holds every vector as float16 (`<kind>.f16.npy`, exact search inside a
collection, re-ranking) and a 64-bit key of its text (`<kind>.keys.npy`, reuse by later builds).
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

from index.embedder import Embedder
from ingest.base.errors import IndexError_
from ingest.base.progress import progress_bar

FAISS_KINDS = ("auto", "flat", "hnsw", "ivfpq")
# Texts encoded per call within a shard: progress advances this often (4 of the embedder's
# default batches of 64; larger steps do not encode faster on a CPU).
PROGRESS_STEP = 256
# Exact search up to this many vectors; HNSW up to HNSW_MAX; IVF-PQ (compressed) beyond.
FLAT_MAX = 100_000
HNSW_MAX = 3_000_000
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 64
META_FILE = "meta.json"


@dataclass
class ShardStats:
    """How many shards a build computed and how many it found finished in the cache; how many
    vectors it embedded and how many it took from the previous build."""

    computed: int = 0
    reused: int = 0
    vectors_computed: int = 0
    vectors_from_previous: int = 0


def text_keys(texts: list[str]) -> np.ndarray:
    """64-bit keys of texts (blake2b), to find a text's vector from an earlier build."""
    return np.array(
        [int.from_bytes(hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little") for t in texts],
        dtype=np.uint64,
    )


class PreviousVectors:
    """The vectors of an earlier build of this index, looked up by text key."""

    def __init__(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        self._order = np.argsort(keys, kind="stable")
        self._sorted = keys[self._order]
        self._vectors = vectors

    @classmethod
    def open(cls, folder: Path, kind: str, model_fingerprint: str, dim: int) -> PreviousVectors | None:
        """The previous vectors of `kind`, or None when there are none for this model."""
        try:
            meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
            if meta.get("model_fingerprint") != model_fingerprint or meta.get("dim") != dim:
                return None
            keys = np.load(folder / f"{kind}.keys.npy")
            vectors = np.load(folder / f"{kind}.f16.npy", mmap_mode="r")
        except (OSError, ValueError):
            return None
        return cls(keys, vectors) if len(keys) == len(vectors) else None

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found mask, float32 vectors of the found keys in order)."""
        if not len(self._sorted):
            return np.zeros(len(keys), dtype=bool), np.zeros((0, self._vectors.shape[1]), dtype=np.float32)
        at = np.minimum(np.searchsorted(self._sorted, keys), len(self._sorted) - 1)
        found = self._sorted[at] == keys
        return found, np.asarray(self._vectors[self._order[at[found]]], dtype=np.float32)


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
    previous: PreviousVectors | None = None,
) -> tuple[list[Path], np.ndarray, ShardStats]:
    """Embed every text into shard files under `cache_dir/<fingerprint>/<kind>/`, reusing any
    shard already there for the same texts and model, and any vector `previous` has for a text.
    Returns the shard files in row order and the key of every text."""
    folder = cache_dir / embedder.fingerprint / kind
    folder.mkdir(parents=True, exist_ok=True)
    stats = ShardStats()
    shards: list[Path] = []
    keys: list[np.ndarray] = []
    with progress_bar(f"embedding {kind}", total, "items") as reporter:
        for number, texts in enumerate(_batched_texts(read_texts, shard_size)):
            shard = folder / f"{number:06d}-{_shard_key(texts, embedder.fingerprint)}.npy"
            keys.append(text_keys(texts))
            status = f"{stats.reused} shards reused"
            if _valid_shard(shard, len(texts), embedder.dim):
                stats.reused += 1
                reporter.advance(len(texts), status=f"{stats.reused} shards reused")
            else:
                def advance(n: int, status: str = status) -> None:
                    reporter.advance(n, status=status)

                _write_shard(shard, _embed(texts, keys[-1], embedder, previous, stats, advance))
                stats.computed += 1
            shards.append(shard)
    return shards, np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64), stats


def _embed(
    texts: list[str],
    keys: np.ndarray,
    embedder: Embedder,
    previous: PreviousVectors | None,
    stats: ShardStats,
    advance: Callable[[int], None] = lambda n: None,
) -> np.ndarray:
    """The shard's vectors: those `previous` has, the others encoded; `advance` is told every
    PROGRESS_STEP texts (and once for the texts found in `previous`)."""
    if previous is None:
        stats.vectors_computed += len(texts)
        return _encode_in_steps(texts, embedder, advance)
    found, known = previous.lookup(keys)
    vectors = np.empty((len(texts), embedder.dim), dtype=np.float32)
    vectors[found] = known
    advance(int(found.sum()))
    missing = np.flatnonzero(~found)
    if len(missing):
        vectors[missing] = _encode_in_steps([texts[i] for i in missing], embedder, advance)
    stats.vectors_computed += len(missing)
    stats.vectors_from_previous += int(found.sum())
    return vectors


def _encode_in_steps(texts: list[str], embedder: Embedder, advance: Callable[[int], None]) -> np.ndarray:
    """`embedder.encode(texts)`, PROGRESS_STEP texts at a time, so that progress moves during a
    shard (a shard of 4,096 texts takes minutes on a busy CPU)."""
    parts = []
    for start in range(0, len(texts), PROGRESS_STEP):
        step = texts[start : start + PROGRESS_STEP]
        parts.append(embedder.encode(step))
        advance(len(step))
    if not parts:
        return embedder.encode(texts)
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _write_shard(shard: Path, vectors: np.ndarray) -> None:
    tmp = shard.with_name(shard.name + ".tmp")
    with tmp.open("wb") as fh:
        np.save(fh, vectors.astype(np.float32, copy=False))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, shard)


def _valid_shard(shard: Path, rows: int, dim: int) -> bool:
    if not shard.exists():
        return False
    try:
        array = np.load(shard, mmap_mode="r")
    except (ValueError, OSError):
        return False
    return array.shape == (rows, dim) and array.dtype == np.float32


def write_index(
    kind: str, shards: list[Path], dim: int, out_dir: Path, faiss_kind: str, store_dir: Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """Build `out_dir/<kind>.faiss` and `store_dir/<kind>.f16.npy` (default: out_dir) from the
    shards; returns the index parameters."""
    import faiss

    count = sum(int(np.load(s, mmap_mode="r").shape[0]) for s in shards)
    chosen = choose_kind(count, faiss_kind)
    index, params = _new_index(chosen, dim, count)
    if chosen == "ivfpq":
        index.train(_training_sample(shards, count, params["train_size"], seed))
    storage = np.lib.format.open_memmap(
        (store_dir or out_dir) / f"{kind}.f16.npy", mode="w+", dtype=np.float16, shape=(count, dim)
    )
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
