"""The text of a chunk as it is embedded and BM25-indexed (`embed_text`: its document title,
then its text), and those texts read back from chunks.parquet (`chunk_texts`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def embed_text(title: str | None, text: str) -> str:
    """What is embedded and BM25-indexed for a chunk: its document title, then its text."""
    return f"{title}\n{text}" if title else text


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
