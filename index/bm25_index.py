"""BM25 over chunks (bm25s), persisted in `<index>/bm25/`. Row i of the index is row i of
chunks.parquet; the collection filter is a weight mask over the collection's row range.

bm25s holds the whole corpus in memory while it builds; `--sparse tantivy` (index/sparse_tantivy.py)
writes the same `bm25/` folder on disk with bounded memory. `build_sparse` and `open_sparse` pick
the engine.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ingest.base.errors import IndexError_

_TOKENIZER_META = "tokenizer.json"
SPARSE_ENGINES = ("bm25s", "tantivy")


def build_sparse(engine: str, texts: Iterable[list[str]], out_dir: Path) -> int:
    """Index the texts (batches, in chunk-row order) with `engine` into `out_dir`; returns the count."""
    if engine == "tantivy":
        from index.sparse_tantivy import build_tantivy

        return build_tantivy(texts, out_dir)
    if engine != "bm25s":
        raise ValueError(f"sparse engine must be one of {', '.join(SPARSE_ENGINES)} (got {engine!r})")
    return build_bm25(texts, out_dir)


def open_sparse(directory: Path) -> Any:
    """The sparse index in `directory` (an index's bm25/), whichever engine built it."""
    from index.sparse_tantivy import TantivyIndex, is_tantivy_index

    return TantivyIndex(directory) if is_tantivy_index(directory) else BM25Index(directory)


def _tokenizer(vocab: dict[str, int] | None = None):  # type: ignore[no-untyped-def]
    import bm25s

    tokenizer = bm25s.tokenization.Tokenizer(lower=True, stopwords="english", stemmer=None)
    if vocab is not None:
        tokenizer.word_to_id = dict(vocab)
    return tokenizer


def build_bm25(texts: Iterable[list[str]], out_dir: Path) -> int:
    """Index the texts (given in batches, in chunk-row order) into `out_dir`; returns the count."""
    import bm25s

    tokenizer = _tokenizer()
    ids: list[list[int]] = []
    for batch in texts:
        ids.extend(tokenizer.tokenize(batch, update_vocab=True, return_as="ids", show_progress=False))
    if not ids:
        raise ValueError("no chunks to index")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenization.Tokenized(ids=ids, vocab=tokenizer.get_vocab_dict()), show_progress=False)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    retriever.save(str(tmp), show_progress=False)
    (tmp / _TOKENIZER_META).write_text(
        json.dumps({"vocab": tokenizer.get_vocab_dict(), "count": len(ids)}, ensure_ascii=False), encoding="utf-8"
    )
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(tmp, out_dir)
    return len(ids)


class BM25Index:
    """A loaded BM25 index: `search(text, k, row_range)` -> (rows, scores), best first."""

    def __init__(self, directory: Path) -> None:
        import bm25s

        meta = directory / _TOKENIZER_META
        if not meta.exists():
            raise IndexError_(f"{directory}: no BM25 index (rebuild the index with documents)")
        data = json.loads(meta.read_text(encoding="utf-8"))
        self.count = int(data["count"])
        self._tokenizer = _tokenizer(data["vocab"])
        self._retriever = bm25s.BM25.load(str(directory), mmap=True, show_progress=False)

    def search(self, text: str, k: int, row_range: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Rows and BM25 scores of the best `k` chunks (within `row_range` [start, end) if given)."""
        tokens = list(self._tokenizer.tokenize([text], update_vocab=False, return_as="ids", show_progress=False)[0])
        start, end = row_range if row_range is not None else (0, self.count)
        k = min(k, end - start)
        if not tokens or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        mask = None
        if row_range is not None:
            mask = np.zeros(self.count, dtype=np.float32)
            mask[start:end] = 1.0
        rows, scores = self._retriever.retrieve(
            [tokens], k=k, show_progress=False, weight_mask=mask, n_threads=0
        )
        rows, scores = rows[0].astype(np.int64), scores[0].astype(np.float32)
        keep = scores > 0
        return rows[keep], scores[keep]
