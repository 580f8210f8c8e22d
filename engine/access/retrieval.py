"""Document retrieval the hybrid methods share, over the `DocumentStore` protocol.

ToG-2 and HydraRAG rank the documents of a few candidate entities at query time instead of
searching a whole-corpus index: the chunks of an entity's documents (`entity_chunks`), dense
re-scoring of any given texts against a query with the index's own embedding model
(`DenseScorer`, embeddings cached per text), sentence windows cut from chunks
(`sentence_windows`), and the question-searched `web` collection (`search_web`).

    scorer = DenseScorer(docs.embedder)
    chunks = entity_chunks(docs, "urn:e:Norvale_Motors")
    ranked = scorer.rank("who chairs the board of Norvale Motors?", [c.text for c in chunks], k=5)
"""

from __future__ import annotations

import hashlib
import math
import weakref
from collections import Counter, OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.access.documents import ChunkRecord, SearchHit
from engine.access.protocols import DocumentStore, Embedder
from index.chunking import sentence_spans

WEB = "web"


def entity_chunks(docs: DocumentStore, entity: str, limit: int | None = None) -> list[ChunkRecord]:
    """The chunks of the documents linked to `entity` (by entity id), in document order."""
    return docs.chunks_of(entity, limit)


def search_web(docs: DocumentStore, question: str, k: int = 10, mode: str = "dense",
               collection: str | None = WEB) -> list[SearchHit]:
    """The `web` collection searched by the question (HydraRAG's offline web source: documents
    tied to no KG entity). `mode`: dense (FAISS) or sparse (BM25). `collection=None`: every
    collection, as a search engine would (the whole corpus)."""
    if mode == "dense":
        return docs.dense_search(question, k, collection)
    if mode == "sparse":
        return docs.sparse_search(question, k, collection)
    raise ValueError(f"search mode must be dense or sparse, not {mode!r}")


@dataclass(frozen=True)
class Window:
    """A few consecutive sentences of a chunk, with where they come from."""

    chunk_id: str
    text: str
    first_sentence: int  # index of the window's first sentence within the chunk


def sentence_windows(chunk: ChunkRecord, size: int = 1, stride: int | None = None) -> list[Window]:
    """The chunk's sentences in windows of `size` (moving by `stride`, default `size`); a chunk
    shorter than one window is one window. Sentence boundaries as in the index's chunking."""
    if size < 1:
        raise ValueError("window size must be >= 1")
    step = stride or size
    sentences = [chunk.text[a:b] for a, b in sentence_spans(chunk.text)]
    if not sentences:
        return []
    starts = range(0, max(len(sentences) - size, 0) + 1, step)
    return [Window(chunk.chunk_id, " ".join(sentences[i:i + size]), i) for i in starts]


class DenseScorer:
    """Cosine similarity of texts with a query, computed at query time with one embedding model.

    Vectors are cached per text (LRU, `max_cached` texts), so a chunk seen by several questions or
    several iterations of one question is embedded once.
    """

    def __init__(self, embedder: Embedder, max_cached: int = 100_000) -> None:
        self.embedder = embedder
        self.max_cached = max_cached
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.embedded = 0  # texts embedded so far (cache misses): a cost a trace can report

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised vectors of `texts` (rows in the same order), from the cache where possible."""
        keys = [self._key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if missing:
            first = {k: t for k, t in zip(keys, texts, strict=True)}
            fresh = np.asarray(self.embedder.encode([first[k] for k in missing]), dtype=np.float32)
            self.embedded += len(missing)
            for key, vector in zip(missing, fresh, strict=True):
                self._cache[key] = vector
        rows = []
        for key in keys:
            self._cache.move_to_end(key)
            rows.append(self._cache[key])
        while len(self._cache) > self.max_cached:
            self._cache.popitem(last=False)
        if not rows:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.vstack(rows)

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """Cosine of each text with the query."""
        if not texts:
            return []
        query_vector = self.vectors([query])[0]
        return [float(s) for s in self.vectors(texts) @ query_vector]

    def rank(self, query: str, texts: Sequence[str], k: int | None = None) -> list[tuple[int, float]]:
        """(index into `texts`, cosine) best first; ties keep the given order."""
        scores = self.scores(query, texts)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        return [(i, scores[i]) for i in order[:k]]


def with_rare_words(asked: Collection[str], said: Sequence[Collection[str]], ranked: Sequence[tuple[int, float]],
                    weight: float) -> list[tuple[int, float]]:
    """A cosine ranking of texts (`DenseScorer.rank`) with the words of `asked` each text says
    (`said[i]`, text i's words) added: each word weighs its inverse document frequency among the
    texts (a word most of them say, "company", tells them apart less than "flagship"), the sum as a
    share of the best text's, times `weight`. Best first; ties keep the order."""
    if not asked or not said or weight <= 0:
        return list(ranked)
    wanted = set(asked)
    shared = [wanted.intersection(words) for words in said]
    frequency = Counter(w for words in shared for w in words)
    n = len(said)
    idf = {w: math.log(1 + (n - df + 0.5) / (df + 0.5)) for w, df in frequency.items()}
    sums = [sum(idf[w] for w in words) for words in shared]
    best = max(sums) or 1.0
    scored = [(i, cosine + weight * sums[i] / best) for i, cosine in ranked]
    return sorted(scored, key=lambda pair: (-pair[1], pair[0]))


_SCORERS: weakref.WeakKeyDictionary[Any, DenseScorer] = weakref.WeakKeyDictionary()


def shared_scorer(embedder: Embedder) -> DenseScorer:
    """One `DenseScorer` (with its embedding cache) per embedder for the process, shared by a
    run's questions and methods: texts that recur (chunks, relation words) are embedded once."""
    try:
        scorer = _SCORERS.get(embedder)
        if scorer is None:
            scorer = _SCORERS[embedder] = DenseScorer(embedder)
        return scorer
    except TypeError:  # an embedder that cannot be weakly referenced: a scorer per question
        return DenseScorer(embedder)
