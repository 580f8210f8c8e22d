"""Knowledge-guided context retrieval of `tog2` (ToG-2 §3.2.2): the documents of candidate
entities, cut into units (sentences by default, as the paper keeps K sentences; whole chunks as
the released code does), scored at query time against the question.

What a unit is scored against (`chunk_query`):
- "triple+question" (default): the candidate's triple sentence followed by the question (and
  the re-formed query, when there is one) is the query; a unit's vector depends on its text
  only, so it is embedded once per run (the early version of the paper scores
  F([q, q', triple], chunk) the same way);
- "triple+chunk": the paper's Eq. 5 to the letter, DRM(q, [triple sentence : chunk]): one
  embedding per (triple, unit), more costly;
- "question": the released code: units scored against the question alone.
An entity without documents (a literal tail, a company without a report) is represented by its
triple sentence alone, scored against the question.

Scorers: the index's bi-encoder (`dense`, cosine) or BM25 over the candidate units (`bm25`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.access.documents import ChunkRecord
from engine.access.protocols import DocumentStore, Embedder
from engine.access.retrieval import entity_chunks, sentence_windows, shared_scorer
from engine.methods.shared.prune import bm25_scores

CHUNK_QUERIES = ("triple+question", "triple+chunk", "question")
UNITS = ("sentence", "chunk")
SCORERS = ("dense", "bm25")


@dataclass(frozen=True)
class Unit:
    """A piece of an entity's context: a sentence or a chunk of its documents, or (for an
    entity without documents) its triple sentence, `chunk_id` None."""

    owner: str
    text: str
    chunk_id: str | None = None
    title: str = ""
    collection: str = "domain"

    @property
    def from_document(self) -> bool:
        return self.chunk_id is not None

    @property
    def titled(self) -> str:
        """What is scored: "Title: text" (a sentence such as "The company is led by ..." needs
        its document's title to say which company)."""
        return f"{self.title}: {self.text}" if self.title else self.text

    def shown(self, max_chars: int) -> str:
        """The unit as the model reads it: "Title: text", cut at `max_chars`."""
        body = " ".join(self.text.split())[:max_chars]
        return f"{self.title}: {body}" if self.title else body


@dataclass(frozen=True)
class Candidate:
    """An entity to rank, with the triple sentence that reached it (empty at initialisation)."""

    entity: str
    sentence: str = ""


@dataclass(frozen=True)
class Scored:
    unit: Unit
    score: float


class ContextRetriever:
    """Units of candidate entities' documents and their scores for one question."""

    def __init__(self, docs: DocumentStore | None, embedder: Embedder | None, *, unit: str = "sentence",
                 chunk_query: str = "triple+question", scorer: str = "dense",
                 max_chunks_per_entity: int = 20) -> None:
        if unit not in UNITS or chunk_query not in CHUNK_QUERIES or scorer not in SCORERS:
            raise ValueError(f"bad context options: unit={unit!r} chunk_query={chunk_query!r} scorer={scorer!r}")
        self.docs, self.unit, self.chunk_query, self.scorer = docs, unit, chunk_query, scorer
        self.max_chunks = max_chunks_per_entity
        self.dense = shared_scorer(embedder) if embedder is not None and scorer == "dense" else None
        self._units: dict[str, list[Unit]] = {}

    def units_of(self, entity: str) -> list[Unit]:
        """The entity's document units in document order ([] without documents)."""
        if entity not in self._units:
            chunks = entity_chunks(self.docs, entity, self.max_chunks) if self.docs is not None else []
            units: dict[str, Unit] = {}
            for chunk in chunks:  # overlapping chunks: each text once, where it first occurs
                for unit in self._cut(entity, chunk):
                    units.setdefault(" ".join(unit.text.split()), unit)
            self._units[entity] = list(units.values())
        return self._units[entity]

    def _cut(self, entity: str, chunk: ChunkRecord) -> list[Unit]:
        if self.unit == "chunk":
            texts = [chunk.text]
        else:
            texts = [w.text for w in sentence_windows(chunk)] or [chunk.text]
        return [Unit(entity, t, chunk.chunk_id, chunk.title, chunk.collection) for t in texts if t.strip()]

    def rank(self, question: str, candidates: Sequence[Candidate]) -> list[Scored]:
        """Every unit of every candidate, scored, best first (ties keep candidate order).

        `question` is what the units answer to (the question, with the re-formed query when
        there is one). A candidate without documents is its triple sentence, scored against
        `question`; a candidate already seen keeps its first unit set.
        """
        jobs: list[tuple[str, list[Unit], list[str]]] = []  # (query, units, texts to score)
        seen: set[str] = set()
        for cand in candidates:
            if cand.entity in seen:
                continue
            seen.add(cand.entity)
            units = self.units_of(cand.entity)
            if not units:
                if cand.sentence:
                    jobs.append((question, [Unit(cand.entity, cand.sentence)], [cand.sentence]))
                continue
            texts = [u.titled for u in units]
            if cand.sentence and self.chunk_query == "triple+question":
                jobs.append((f"{cand.sentence} {question}", units, texts))
            elif cand.sentence and self.chunk_query == "triple+chunk":
                jobs.append((question, units, [f"{cand.sentence} {t}" for t in texts]))
            else:
                jobs.append((question, units, texts))
        scored = [Scored(u, s) for units, scores in zip((j[1] for j in jobs), self._scores(jobs), strict=True)
                  for u, s in zip(units, scores, strict=True)]
        order = sorted(range(len(scored)), key=lambda i: (-scored[i].score, i))
        return [scored[i] for i in order]

    def _scores(self, jobs: Sequence[tuple[str, list[Unit], list[str]]]) -> list[list[float]]:
        if not jobs:
            return []
        if self.dense is not None:
            self.dense.vectors([t for _, _, texts in jobs for t in texts])  # one batch, then cached
            return [self.dense.scores(query, texts) for query, _, texts in jobs]
        corpus = [t for _, _, texts in jobs for t in texts]
        result, start = [], 0
        by_query: dict[str, list[float]] = {}
        for query, _, texts in jobs:
            if query not in by_query:
                by_query[query] = bm25_scores(query, corpus)
            result.append(by_query[query][start:start + len(texts)])
            start += len(texts)
        return result

    @property
    def embedded(self) -> int:
        """Texts embedded so far by the shared scorer (a cost for the trace)."""
        return self.dense.embedded if self.dense is not None else 0
