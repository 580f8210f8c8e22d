"""HydraRAG's unstructured retrieval (§4.2.1, Algorithm 2) over the shared document retrieval.

Wiki (and domain) source: the chunks of the topic entities' documents (`entity_chunks`), cut
into sentence windows (`sentence_windows`). Web source: the `web` collection searched by the
question (`search_web`, offline; `web_collections=all`: every collection), cut the same way.
Each source's windows are ranked by the index's dense model against the skyline indicator
(`DenseScorer`) and its top W_max kept; then one LLM call turns all kept windows into
knowledge paths ("A - relation - B - relation - C"), each tied to its window's chunk id, which
join the candidate pool (`doc_evidence=sentences`: the windows themselves join it, without
that call).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.access.documents import ChunkRecord
from engine.access.retrieval import WEB, DenseScorer, entity_chunks, search_web, sentence_windows
from engine.methods.hydra import prompts as hp
from engine.methods.hydra.paths import skyline_chain
from engine.methods.hydra.score import Candidate
from engine.methods.shared.common import ask

if TYPE_CHECKING:
    from engine.access.protocols import DocumentStore
    from engine.llm.protocol import LLM
    from engine.questions.record import AnswerRecord


@dataclass(frozen=True)
class Sentence:
    """A sentence window with where it comes from."""

    text: str
    chunk_id: str
    title: str
    collection: str  # the document collection (wiki, domain, web, ...)
    score: float = 0.0
    searched: bool = False  # found by the question search (the web source), whatever its collection

    @property
    def source(self) -> str:
        """The evidence source for scoring: web (the `web` collection, or any window the question
        search found), else wiki (domain documents count as wiki)."""
        return "web" if self.searched or self.collection == WEB else "wiki"

    def shown(self, max_chars: int) -> str:
        text = f"{self.title}: {self.text}" if self.title else self.text
        text = " ".join(text.split())
        return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


@dataclass(frozen=True)
class DocPath:
    """The payload of a knowledge path written from a sentence: its provenance."""

    sentence: Sentence


def _windows(chunk: ChunkRecord, size: int, searched: bool = False) -> list[Sentence]:
    return [Sentence(w.text, chunk.chunk_id, chunk.title, chunk.collection, searched=searched)
            for w in sentence_windows(chunk, size)]


def entity_sentences(docs: DocumentStore, entities: Sequence[str], window: int,
                     max_chunks: int) -> list[Sentence]:
    """The sentence windows of the entities' documents (the web collection aside: it is the
    web source's), in document order, each window once."""
    found: dict[tuple[str, str], Sentence] = {}
    for entity in dict.fromkeys(entities):
        for chunk in entity_chunks(docs, entity, max_chunks):
            if chunk.collection == WEB:
                continue
            for s in _windows(chunk, window):
                found.setdefault((s.chunk_id, s.text), s)
    return list(found.values())


def web_sentences(docs: DocumentStore, question: str, k: int, mode: str, window: int,
                  collection: str | None = WEB) -> list[Sentence]:
    """The sentence windows of the `web` chunks the question finds (empty: no web collection);
    `collection=None`: of the chunks of every collection it finds."""
    found: dict[tuple[str, str], Sentence] = {}
    for hit in search_web(docs, question, k, mode, collection):
        for s in _windows(hit.chunk, window, searched=True):
            found.setdefault((s.chunk_id, s.text), s)
    return list(found.values())


def top_sentences(scorer: DenseScorer, indicator: str, sentences: Sequence[Sentence], k: int,
                  max_chars: int) -> list[Sentence]:
    """The k windows closest to the indicator (cosine of "title: window"), best first."""
    if not sentences:
        return []
    ranked = scorer.rank(indicator, [s.shown(max_chars) for s in sentences], k)
    return [Sentence(sentences[i].text, sentences[i].chunk_id, sentences[i].title,
                     sentences[i].collection, score, sentences[i].searched) for i, score in ranked]


def path_entities(path: str) -> tuple[str, ...]:
    """The entities of a written path: its items at even positions (relations between)."""
    return tuple(dict.fromkeys(item for item in skyline_chain(path)[::2] if item))


def knowledge_paths(llm: LLM, record: AnswerRecord, sentences: Sequence[Sentence], entities: Sequence[str],
                    skyline: str, *, max_chars: int, temperature: float, max_tokens: int,
                    seed: int) -> list[Candidate]:
    """One call: the sentences as knowledge paths (Prompt_StructuredPathGen), each a candidate
    with its sentence's source and chunk id. A failed call gives no paths."""
    if not sentences:
        return []
    shown = [s.shown(max_chars) for s in sentences]
    parsed = ask(llm, record, system=hp.DOC_PATHS_SYSTEM, user=hp.doc_paths_user(shown, entities, skyline),
                 schema=hp.doc_paths_schema(len(sentences)), stage="doc_paths",
                 temperature=temperature, max_tokens=max_tokens, seed=seed)
    if not isinstance(parsed, dict):
        return []
    result: dict[str, Candidate] = {}
    for item in parsed.get("paths", []):
        text = " ".join(str(item.get("path", "")).split())
        sentence = sentences[int(str(item["sentence"])[1:]) - 1]
        names = path_entities(text)
        if text and names and text not in result:
            result[text] = Candidate(text, names, sentence.source, DocPath(sentence))
    return list(result.values())


def sentence_candidates(sentences: Sequence[Sentence], topic_labels: Sequence[str], max_chars: int) -> list[Candidate]:
    """The windows themselves as candidates, no LLM call (`doc_evidence=sentences`): the text is
    "title: sentence", the entities its document's title and the topic entities it names. For a
    small model that loses most facts when it rewrites a sentence as a path."""
    result: dict[str, Candidate] = {}
    for s in sentences:
        text = s.shown(max_chars)
        lowered = text.lower()
        names = tuple(dict.fromkeys([*([s.title] if s.title else []),
                                     *(t for t in topic_labels if t and t.lower() in lowered)]))
        if text not in result and names:
            result[text] = Candidate(text, names, s.source, DocPath(s))
    return list(result.values())
