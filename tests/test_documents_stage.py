"""The documents stage: linking documents to entities, chunks.parquet, BM25, entity doc_ids,
and KG facts dropped by --kg-keep ingested as wiki documents."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.access.documents import ParquetDocumentStore
from index.doc_options import DocOptions, DocSource
from index.doc_stage import build_documents
from index.paths import IndexPaths
from ingest.base.errors import IndexError_, InputError
from ingest.rejects import RejectLog


def write_entities(paths: IndexPaths, rows: list[dict[str, object]]) -> None:
    schema = pa.schema([
        ("id", pa.string()), ("label", pa.string()), ("aliases", pa.list_(pa.string())),
        ("description", pa.string()), ("degree", pa.int64()), ("wikipedia_title", pa.string()),
    ])
    full = [{"aliases": [], "description": None, "degree": 1, "wikipedia_title": None} | r for r in rows]
    pq.write_table(pa.Table.from_pylist(full, schema), paths.entities)


def build(paths: IndexPaths, sources: list[DocSource], options: DocOptions | None = None) -> tuple[dict[str, object], list[dict[str, object]]]:
    log = RejectLog(paths.root / ".rejects-docs.jsonl")
    try:
        counts = build_documents(paths, sources, options or DocOptions(), log)
    finally:
        log.close()
    rejects = [json.loads(x) for x in log.path.read_text().splitlines()] if log.path.exists() else []
    return counts, rejects


@pytest.fixture()
def hotpot(shared_data: Path) -> Path:
    return shared_data / "paper_questions" / "tog2" / "hotpotadv_dev.json"


def test_hotpot_paragraphs_are_linked_by_sitelink_label_alias_and_normalised_title(tmp_path: Path, hotpot: Path) -> None:
    paths = IndexPaths(tmp_path)
    write_entities(paths, [
        {"id": "Q1", "label": "Oksana Baiul"},                                    # exact label
        {"id": "Q2", "label": "C. Bronson", "wikipedia_title": "Charles_Bronson"},  # sitelink
        {"id": "Q3", "label": "Ukraine 2014", "aliases": ["Ukraine at the 2014 Winter Olympics"]},
        {"id": "Q4", "label": "voice (FILM)"},                                     # normalised
        {"id": "Q5", "label": "added", "degree": 1000},                            # must never match
        {"id": "Q6", "label": "Oksana Baiul", "degree": 0},                        # lower degree loses
    ])
    counts, rejects = build(paths, [DocSource(hotpot, "hotpot", "wiki")])
    assert counts["documents"] == 1226 and counts["chunks"] == 1226 and not rejects
    assert counts["collections"] == {"wiki": 1226}
    docs = pq.read_table(paths.documents).to_pylist()
    reason = {d["title"]: (d["entity"], d["link_reason"]) for d in docs if d["entity"]}
    assert reason == {
        "Oksana Baiul": ("Q1", "exact"),
        "Charles Bronson": ("Q2", "sitelink"),
        "Ukraine at the 2014 Winter Olympics": ("Q3", "alias"),
        "Voice (film)": ("Q4", "normalised"),
    }
    distractors = [d for d in docs if d["title"] == ""]
    assert len(distractors) > 500 and all(d["entity"] is None for d in distractors)
    entities = {r["id"]: r["doc_ids"] for r in pq.read_table(paths.entities).to_pylist()}
    assert entities["Q5"] == [] and entities["Q6"] == [] and len(entities["Q1"]) == 1
    assert counts["linked_documents"] == sum(len(v) for v in entities.values())
    store = ParquetDocumentStore(paths)
    assert [c.title for c in store.chunks_of("Q1")] == ["Oksana Baiul"]
    hits = store.sparse_search("1993 World champion figure skater", 3)
    assert hits[0].chunk.title == "Oksana Baiul" and hits[0].chunk.entity == "Q1"
    with pytest.raises(IndexError_, match="no vectors"):
        store.dense_search("figure skater", 3)


def test_collections_are_contiguous_and_web_is_not_linked_by_title(tmp_path: Path, hotpot: Path, shared_data: Path) -> None:
    paths = IndexPaths(tmp_path)
    write_entities(paths, [{"id": "e:anarchism", "label": "Anarchism"}, {"id": "e:baiul", "label": "Oksana Baiul"}])
    web = shared_data / "dumps" / "wikipedia" / "wikiextractor-json_enwiki_wiki_00.jsonl"
    jsonl = tmp_path / "domain.jsonl"
    jsonl.write_text(json.dumps({"id": "d1", "title": "Anarchism", "text": "A domain note on anarchism."}) + "\n")
    counts, _ = build(paths, [DocSource(web, "wikiextractor", "web"), DocSource(hotpot, "hotpot", "wiki"), DocSource(jsonl, "jsonl", "domain")])
    chunks = pq.read_table(paths.chunks).to_pylist()
    assert [c["row"] for c in chunks] == list(range(len(chunks)))
    order = [c["collection"] for c in chunks]
    assert order == sorted(order, key=["wiki", "web", "domain"].index)
    ranges = counts["chunk_ranges"]
    assert ranges["wiki"][0] == 0 and ranges["web"][0] == ranges["wiki"][1] and ranges["domain"][1] == len(chunks)
    by_doc = {c["doc_id"]: c["entity"] for c in chunks}
    assert by_doc["12"] is None  # web "Anarchism" page: not tied to an entity
    assert by_doc["d1"] == "e:anarchism"  # domain texts are linked
    store = ParquetDocumentStore(paths)
    assert {h.chunk.collection for h in store.sparse_search("anarchism", 10, "web")} == {"web"}
    assert [h.chunk.doc_id for h in store.sparse_search("anarchism", 10, "domain")] == ["d1"]
    stats = store.stats()
    assert stats["collections"] == {"domain": 1, "web": 35, "wiki": 1226}
    # every chunk's text is the slice of its document given by its offsets
    texts = {d["doc_id"]: d["text"] for d in pq.read_table(paths.documents).to_pylist()}
    assert all(texts[c["doc_id"]][c["start"]:c["end"]] == c["text"] for c in chunks)


def test_duplicate_ids_are_rejected_and_entities_are_replaced_not_edited(tmp_path: Path) -> None:
    paths = IndexPaths(tmp_path / "index")
    paths.root.mkdir()
    write_entities(paths, [{"id": "e1", "label": "Alpha"}])
    live = tmp_path / "live-entities.parquet"
    os.link(paths.entities, live)  # as in a build's hard-link copy of the live index
    before = live.read_bytes()
    source = tmp_path / "a.jsonl"
    source.write_text(
        '{"id": "x", "title": "Alpha", "text": "Alpha is a letter."}\n{"id": "x", "title": "Beta", "text": "Other."}\n'
    )
    counts, rejects = build(paths, [DocSource(source, "jsonl", "wiki")])
    assert counts["documents"] == 1
    assert rejects == [{"file": str(source), "line": None, "reason": "duplicate document id 'x' (the first one is kept)", "text": "Beta"}]
    assert live.read_bytes() == before
    assert pq.read_table(paths.entities).column("doc_ids").to_pylist() == [["x"]]


def test_documents_without_a_kg_keep_their_given_entity(tmp_path: Path) -> None:
    paths = IndexPaths(tmp_path)
    source = tmp_path / "a.jsonl"
    source.write_text('{"id": "x", "title": "Douglas Adams", "text": "Writer.", "entity": "Q42"}\n{"id": "y", "title": "T", "text": "Text."}\n')
    counts, _ = build(paths, [DocSource(source, "auto", "wiki")])
    # without a KG the entity table is made from the documents: the given entity, and each title
    assert counts["linked_documents"] == 2 and counts["title_entities"] == 2
    rows = pq.read_table(paths.entities).to_pylist()
    assert [(r["id"], r["label"], r["doc_ids"]) for r in rows] == [
        ("http://www.wikidata.org/entity/Q42", "Douglas Adams", ["x"]),
        ("https://localkg.example/entity/T", "T", ["y"]),
    ]
    assert ParquetDocumentStore(paths).chunks_of("http://www.wikidata.org/entity/Q42")[0].doc_id == "x"


def test_bad_options_and_empty_sources(tmp_path: Path) -> None:
    paths = IndexPaths(tmp_path)
    source = tmp_path / "a.jsonl"
    source.write_text('{"id": "x", "title": "T", "text": "Text."}\n')
    with pytest.raises(InputError, match="chunk-overlap"):
        build(paths, [DocSource(source, "jsonl", "wiki")], DocOptions(chunk_size=100, chunk_overlap=100))
    with pytest.raises(InputError, match="collection"):
        build(paths, [DocSource(source, "jsonl", "news")])
    bad = tmp_path / "bad.jsonl"
    bad.write_text("nothing here\n")
    with pytest.raises(InputError, match="no documents could be read"):
        build(paths, [DocSource(bad, "jsonl", "wiki")])


def test_metaqa_dropped_facts_become_linked_wiki_documents(tmp_path: Path, shared_data: Path) -> None:
    from index.kg_stage import KgSource, build_kg
    from ingest.kg_readers import KgOptions

    paths = IndexPaths(tmp_path)
    kg_log = RejectLog(tmp_path / ".rejects-kg.jsonl")
    kg = build_kg(paths, [KgSource(shared_data / "metaqa" / "kb", "metaqa")],
                  KgOptions(keep_fraction=0.5, seed=0, dropped_as_docs=True), kg_log)
    kg_log.close()
    dropped = [json.loads(line) for line in paths.dropped_docs.read_text().splitlines()]
    counts, rejects = build(paths, [])
    assert counts["documents"] == len(dropped) == kg["kg_keep"]["dropped_documents"] and not rejects
    assert counts["collections"] == {"wiki": len(dropped)}
    assert counts["linked_documents"] == len(dropped) and counts["link_reasons"] == {"given": len(dropped)}
    store = ParquetDocumentStore(paths)
    sample = dropped[:: max(1, len(dropped) // 50)]
    for doc in sample:
        chunks = store.chunks_of(doc["entity"])
        assert doc["id"] in {c.doc_id for c in chunks}
        assert all(c.collection == "wiki" for c in chunks)
    entities = pq.read_table(paths.entities, columns=["id", "doc_ids"]).to_pydict()
    with_docs = dict(zip(entities["id"], entities["doc_ids"], strict=True))
    assert all(doc["id"] in with_docs[doc["entity"]] for doc in sample)


def test_a_given_entity_missing_from_the_kg_is_counted_not_linked(tmp_path: Path) -> None:
    paths = IndexPaths(tmp_path)
    write_entities(paths, [{"id": "http://www.wikidata.org/entity/Q42", "label": "Douglas Adams"}])
    source = tmp_path / "a.jsonl"
    source.write_text(
        '{"id": "x", "title": "DNA", "text": "Writer.", "entity": "Q42"}\n'
        '{"id": "y", "title": "Z", "text": "Text.", "entity": "Q999"}\n'
    )
    counts, _ = build(paths, [DocSource(source, "jsonl", "wiki")])
    assert counts["linked_documents"] == 1
    assert counts["link_reasons"] == {"given": 1, "given entity not in the KG": 1}
