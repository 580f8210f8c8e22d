"""Finding entity names near a mention, the candidate lookups of entity linking: by embedding
(`LabelIndex`, the index's entity-label FAISS index) and by spelling (`FuzzyNames`, a
character-trigram index checked by edit distance)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from index.paths import IndexPaths
from ingest.base.errors import IndexError_

RERANK_FACTOR = 8  # IVF-PQ label search: candidates fetched per wanted result, then re-ranked
# Misspelt names: at most this many character edits (a letter dropped, added, replaced, or two
# swapped); more than that is a variant ("Co" for "Company"), left to label embeddings.
FUZZY_MAX_EDITS = 2
FUZZY_CANDIDATES = 64  # names sharing the most trigrams with a mention, checked by edit distance


class LabelIndex:
    """Nearest entity names by embedding (the index's entity-label FAISS index and its ids)."""

    def __init__(self, paths: IndexPaths) -> None:
        import faiss
        import pyarrow.parquet as pq

        ids_path = paths.vector_ids("entities")
        if not ids_path.exists():
            raise IndexError_(f"{paths.root}: index has no entity-label vectors")
        table = pq.read_table(ids_path, columns=["entity", "name"]).to_pydict()
        self.entities: list[str] = table["entity"]
        self.names: list[str] = table["name"]
        self.index = faiss.read_index(str(paths.faiss_index("entities")))
        meta_path = paths.vector_meta
        meta = json.loads(meta_path.read_text()).get("entities", {}) if meta_path.exists() else {}
        if "nprobe" in meta:
            faiss.extract_index_ivf(self.index).nprobe = meta["nprobe"]
        if "ef_search" in meta:
            self.index.hnsw.efSearch = meta["ef_search"]
        # IVF-PQ scores are approximate and are compared with a threshold: re-rank with the
        # stored float16 vectors (same rows as the FAISS index), as ParquetDocumentStore does.
        self._exact: np.ndarray | None = None
        exact_path = paths.stored_vectors("entities")
        if meta.get("kind") == "ivfpq" and exact_path.exists():
            self._exact = np.load(exact_path, mmap_mode="r")

    def search(self, vectors: np.ndarray, k: int) -> list[list[tuple[str, str, float]]]:
        """For each query vector, up to `k` (entity, name, cosine) best first."""
        queries = np.ascontiguousarray(vectors, dtype=np.float32)
        fetch = max(k * RERANK_FACTOR, 64) if self._exact is not None else k
        scores, rows = self.index.search(queries, fetch)
        result = []
        for query, row, score in zip(queries, rows, scores, strict=True):
            found = [(int(r), float(s)) for r, s in zip(row, score, strict=True) if r >= 0]
            if self._exact is not None and found:
                ids = np.array(sorted(r for r, _ in found))
                exact = np.asarray(self._exact[ids], dtype=np.float32) @ query
                found = sorted(zip(ids.tolist(), exact.tolist(), strict=True), key=lambda item: -item[1])
            result.append([(self.entities[r], self.names[r], s) for r, s in found[:k]])
        return result


class FuzzyNames:
    """Names close in spelling to a mention: a character-trigram index (CSR arrays: each trigram's
    sorted rows) over normalised names, whose best-sharing names are checked by edit distance.

    Built in memory from the entity table at first use (nothing is written to the index folder);
    deterministic: trigrams are exact code-point triples, not hashes, and ties go to the row order.
    """

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        codes, rows = _trigram_codes(self.names)
        order = np.argsort(codes, kind="stable")  # stable: rows stay ascending within a trigram
        codes, rows = codes[order], rows[order]
        first = np.ones(len(codes), dtype=bool)
        first[1:] = (codes[1:] != codes[:-1]) | (rows[1:] != rows[:-1])  # a trigram twice in a name counts once
        codes, self._rows = codes[first], rows[first]
        self._grams, starts = np.unique(codes, return_index=True)
        self._starts = np.append(starts, len(codes))
        self._lengths = np.fromiter((len(n) for n in self.names), dtype=np.int32, count=len(self.names))

    def search(self, name: str, max_edits: int = FUZZY_MAX_EDITS) -> list[tuple[str, int]]:
        """(indexed name, edits) within `max_edits` of `name` (normalised), fewest edits first."""
        grams = np.unique(_trigram_codes([name])[0])
        at = np.searchsorted(self._grams, grams)
        found = at < len(self._grams)
        at = at[found][self._grams[at[found]] == grams[found]]
        if not len(at):
            return []
        rows, shared = np.unique(np.concatenate([self._rows[self._starts[i]:self._starts[i + 1]] for i in at]),
                                 return_counts=True)
        near = np.abs(self._lengths[rows] - len(name)) <= max_edits  # more would take more edits
        rows, shared = rows[near], shared[near]
        best = rows[np.lexsort((rows, -shared))[:FUZZY_CANDIDATES]]
        hits = [(int(row), edits) for row in best.tolist()
                if (edits := _edit_distance(name, self.names[row], max_edits)) <= max_edits]
        return [(self.names[row], edits) for row, edits in sorted(hits, key=lambda h: (h[1], h[0]))]


def _trigram_codes(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(trigram code, row) for every trigram of every name padded with one space on each side;
    a code packs three 21-bit code points into one uint64, so no two trigrams share one."""
    padded = [f" {n} " for n in names]
    lengths = np.fromiter((len(p) for p in padded), dtype=np.int64, count=len(padded))
    chars = np.frombuffer("".join(padded).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    counts = np.maximum(lengths - 2, 0)
    rows = np.repeat(np.arange(len(names), dtype=np.int32), counts)
    first_char = np.cumsum(lengths) - lengths
    first_gram = np.cumsum(counts) - counts
    starts = np.repeat(first_char, counts) + (np.arange(int(counts.sum())) - np.repeat(first_gram, counts))
    codes = (chars[starts] << np.uint64(42)) | (chars[starts + 1] << np.uint64(21)) | chars[starts + 2]
    return codes, rows


def _edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal-string-alignment distance (a swap of neighbours is one edit), or limit + 1 as soon
    as it must exceed `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before: list[int] | None = None
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = ca != cb
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if before is not None and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        before, previous = previous, current
    return previous[-1]
