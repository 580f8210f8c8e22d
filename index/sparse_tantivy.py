"""BM25 over chunks on disk (tantivy), for corpora whose bm25s index does not fit in memory.

bm25s builds its index in RAM (token id lists of the whole corpus, then a sparse matrix); at
Wikipedia scale (~40M chunks) that is far beyond 24 GiB. tantivy writes segments to disk with a
fixed indexing heap and merges them there, and search reads memory-mapped files, so memory is
bounded by the heap at build time and by the pages a query touches at search time.

Documents are tokenized as the bm25s index tokenizes them (the regex `\\b\\w\\w+\\b`, lower case,
bm25s's English stop words), so that both engines see the same terms; scoring is tantivy's BM25
(k1 1.2, b 0.75, quantised document lengths), so scores differ from bm25s's (k1 1.5) and the
ranking mostly agrees (bench `wikiscale` reports the top-k overlap). Document i is chunk row i;
the collection filter is a range query on the stored `row` field.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ingest.base.errors import IndexError_

ENGINE_FILE = "engine.json"  # in bm25/: {"engine": "tantivy", "count": N}; absent for bm25s
_TOKENIZER = "bm25s_words"
_WORDS = r"(?u)\b\w\w+\b"
# Indexing heap of the tantivy writer (split among its threads): the build's memory bound.
HEAP_BYTES = 256 * 1024 * 1024


def _stopwords() -> list[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return list(STOPWORDS_EN)


def _analyzer() -> Any:
    import tantivy

    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(r"\b\w\w+\b"))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.custom_stopword(_stopwords()))
        .build()
    )


def _schema() -> Any:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_unsigned_field("row", stored=True, indexed=True, fast=True)
    # term frequencies without positions: BM25 needs no phrase queries, and positions would
    # roughly double the index size
    builder.add_text_field("text", stored=False, tokenizer_name=_TOKENIZER, index_option="freq")
    return builder.build()


def _open(directory: Path) -> Any:
    import tantivy

    index = tantivy.Index(_schema(), path=str(directory), reuse=True)
    index.register_tokenizer(_TOKENIZER, _analyzer())
    return index


def build_tantivy(texts: Iterable[list[str]], out_dir: Path, heap_bytes: int = HEAP_BYTES, threads: int = 0) -> int:
    """Index the texts (given in batches, in chunk-row order) into `out_dir`; returns the count.
    Written in a temp folder renamed at the end; memory stays within about `heap_bytes`."""
    import tantivy

    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    index = _open(tmp)
    writer = index.writer(heap_size=heap_bytes, num_threads=threads)
    count = 0
    for batch in texts:
        for text in batch:
            doc = tantivy.Document()
            doc.add_unsigned("row", count)
            doc.add_text("text", text)
            writer.add_document(doc)
            count += 1
    if count == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ValueError("no chunks to index")
    writer.commit()
    writer.wait_merging_threads()
    (tmp / ENGINE_FILE).write_text(json.dumps({"engine": "tantivy", "count": count}), encoding="utf-8")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(tmp, out_dir)
    return count


def is_tantivy_index(directory: Path) -> bool:
    """Whether `directory` (an index's bm25/) holds a tantivy index."""
    path = directory / ENGINE_FILE
    return path.exists() and json.loads(path.read_text(encoding="utf-8")).get("engine") == "tantivy"


class TantivyIndex:
    """A tantivy BM25 index: `search(text, k, row_range)` -> (rows, scores), best first (the
    interface of `BM25Index`)."""

    def __init__(self, directory: Path) -> None:
        if not is_tantivy_index(directory):
            raise IndexError_(f"{directory}: no tantivy index (rebuild the index with documents)")
        self.count = int(json.loads((directory / ENGINE_FILE).read_text(encoding="utf-8"))["count"])
        self._index = _open(directory)
        self._schema = self._index.schema
        self._searcher = self._index.searcher()
        self._words = re.compile(_WORDS)
        self._stop = frozenset(_stopwords())

    def query_terms(self, text: str) -> list[str]:
        """The query's terms as the documents were tokenized (repeats kept, as bm25s keeps them)."""
        return [w for w in self._words.findall(text.lower()) if w not in self._stop]

    def search(self, text: str, k: int, row_range: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Rows and BM25 scores of the best `k` chunks (within `row_range` [start, end) if given)."""
        import tantivy

        terms = self.query_terms(text)
        start, end = row_range if row_range is not None else (0, self.count)
        k = min(k, end - start)
        if not terms or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(self._schema, "text", term)) for term in terms]
        )
        if row_range is not None:
            rows_in = tantivy.Query.range_query(
                self._schema, "row", tantivy.FieldType.Unsigned, start, end - 1, use_inverted_index=False
            )
            # a filter that adds nothing to the score
            query = tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, query), (tantivy.Occur.Must, tantivy.Query.const_score_query(rows_in, 0.0))]
            )
        hits = self._searcher.search(query, k).hits
        rows = np.array([self._searcher.doc(address)["row"][0] for _, address in hits], dtype=np.int64)
        scores = np.array([score for score, _ in hits], dtype=np.float32)
        return rows, scores
