"""Shared document retrieval (engine/access/retrieval.py) on the real demo corpus: the chunks of
an entity's documents, dense re-scoring with the index's own model (cached), sentence windows,
and the question-searched `web` collection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.access.documents import ChunkRecord, ParquetDocumentStore
from engine.access.retrieval import DenseScorer, entity_chunks, search_web, sentence_windows
from index.build import build_index
from index.doc_options import DocOptions, DocSource
from index.entities import EntityTable
from index.kg_stage import KgSource
from index.paths import IndexPaths

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"


@pytest.fixture(scope="module")
def demo_docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo KG with its reports as `domain` documents, and five of them once more, as
    `web` pages under other ids (free text tied to no entity)."""
    folder = tmp_path_factory.mktemp("retrieval")
    web = folder / "web.jsonl"
    with web.open("w", encoding="utf-8") as handle:
        for report in sorted((DEMO / "reports").glob("*.md"))[:5]:
            title, _, body = report.read_text(encoding="utf-8").partition("\n")
            handle.write(json.dumps({"id": f"web-{report.stem}", "title": title.lstrip("# ").strip(),
                                     "text": body.strip()}) + "\n")
    out = folder / "demo"
    build_index(out, [KgSource(DEMO / "kg.ttl", "turtle")],
                [DocSource(DEMO / "reports", "files", "domain"), DocSource(web, "jsonl", "web")],
                doc_options=DocOptions(entity_vectors=False, faiss_kind="flat"))
    return out


def _linked_entity(index: Path) -> str:
    store = ParquetDocumentStore(index)
    rows = store._query("SELECT entity FROM chunks WHERE entity IS NOT NULL LIMIT 1")
    assert rows, "no report linked to a company"
    return str(rows[0][0])


def test_entity_chunks_are_that_entitys_documents(demo_docs: Path) -> None:
    store = ParquetDocumentStore(demo_docs)
    entity = _linked_entity(demo_docs)
    chunks = entity_chunks(store, entity)
    assert chunks and all(c.entity == entity and c.collection == "domain" for c in chunks)
    label = EntityTable.open(IndexPaths(demo_docs)).label(entity)
    assert any(label.split()[0] in c.title or label.split()[0] in c.text for c in chunks)
    assert entity_chunks(store, entity, limit=1) == chunks[:1]
    assert entity_chunks(store, "http://example.org/no-such-entity") == []


def test_dense_scorer_ranks_the_matching_text_first_and_caches(demo_docs: Path) -> None:
    store = ParquetDocumentStore(demo_docs)
    scorer = DenseScorer(store.embedder)
    texts = ["The quarterly revenue of the carmaker rose by nine percent.",
             "A recipe for lemon cake with two eggs.",
             "Migratory birds cross the strait in autumn."]
    ranked = scorer.rank("How much did the car company's revenue grow?", texts)
    assert ranked[0][0] == 0 and ranked[0][1] > ranked[1][1] > -1.0
    assert scorer.embedded == 4  # the query and three texts
    again = scorer.rank("How much did the car company's revenue grow?", list(reversed(texts)))
    assert again[0][0] == 2 and scorer.embedded == 4  # nothing embedded twice
    assert abs(again[0][1] - ranked[0][1]) < 1e-6
    assert scorer.scores("anything", []) == []
    small = DenseScorer(store.embedder, max_cached=2)
    small.scores("q", texts)
    assert len(small._cache) == 2


def test_sentence_windows_cover_the_chunk() -> None:
    chunk = ChunkRecord("c1", "d1", None, "wiki", "T", "First one. Second one! Third one? Fourth.", 0, 41, 0)
    singles = sentence_windows(chunk)
    assert [w.text for w in singles] == ["First one.", "Second one!", "Third one?", "Fourth."]
    pairs = sentence_windows(chunk, size=2, stride=1)
    assert [w.first_sentence for w in pairs] == [0, 1, 2] and pairs[0].text == "First one. Second one!"
    whole = sentence_windows(chunk, size=10)
    assert len(whole) == 1 and whole[0].text.endswith("Fourth.")
    with pytest.raises(ValueError):
        sentence_windows(chunk, size=0)


def test_web_collection_is_searched_by_the_question(demo_docs: Path) -> None:
    store = ParquetDocumentStore(demo_docs)
    title = store._query("SELECT title FROM chunks WHERE collection = 'web' LIMIT 1")[0][0]
    for mode in ("dense", "sparse"):
        hits = search_web(store, f"What does the report say about {title}?", k=3, mode=mode)
        assert hits and all(h.chunk.collection == "web" and h.chunk.entity is None for h in hits)
        assert title in [h.chunk.title for h in hits], mode
    with pytest.raises(ValueError, match="dense or sparse"):
        search_web(store, "x", mode="fuzzy")
