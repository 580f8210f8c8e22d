"""Indexes of documents only (no --kg) work for every document method and command: the
documents stage makes the entity table from the documents (each title, each given entity), so
`link`, `docs chunks`, `ask --method rag` and `batch --methods rag` run; KG methods say the
index has no KG. On the real AdvHotpotQA excerpt (its first 40 questions) and the real
WikiExtractor excerpt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from cli import main
from index.doc_options import DocOptions, DocSource
from index.doc_stage import build_documents
from index.entities import EntityTable
from index.paths import IndexPaths
from ingest.rejects import RejectLog
from ingest.terms import mint_entity

HOTPOT = Path("paper_questions/tog2/hotpotadv_dev.json")
WIKIEXTRACTOR = Path("dumps/wikipedia/wikiextractor-json_enwiki_wiki_00.jsonl")
QUESTIONS = 40


def run_cli(*args: object, expect: int = 0) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == expect, result.output
    return result.output


@pytest.fixture(scope="module")
def hotpot(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The first 40 questions of the real AdvHotpotQA dev file, indexed as documents only."""
    shared = Path(__file__).resolve().parents[2] / "shared" / "data"
    if not (shared / HOTPOT).exists():
        pytest.skip(f"{shared / HOTPOT} not found")
    root = tmp_path_factory.mktemp("docs-only")
    questions = root / "hotpot40.json"
    questions.write_text(json.dumps(json.loads((shared / HOTPOT).read_text())[:QUESTIONS]))
    out = root / "index"
    output = run_cli("index", "--out", out, "--docs", questions, "--docs-format", "hotpot", "--collection", "wiki")
    assert "built docs, vectors" in output
    return {"index": out, "questions": questions, "root": root}


def test_documents_only_index_has_an_entity_per_title(hotpot: dict[str, Path]) -> None:
    manifest = json.loads((hotpot["index"] / "manifest.json").read_text())
    counts = manifest["stages"]["docs"]["counts"]
    assert "kg" not in manifest["stages"]
    docs = pq.read_table(hotpot["index"] / "documents.parquet").to_pylist()
    titled = {d["title"] for d in docs if d["title"]}
    table = EntityTable.open(IndexPaths(hotpot["index"]))
    assert counts["title_entities"] == len(table) == len(titled) > 0
    assert set(table.labels) == titled
    # every titled paragraph is linked to its title's entity; AdvHotpotQA's "added" distractors are not
    for doc in docs:
        assert doc["entity"] == (mint_entity(doc["title"]) if doc["title"] else None)
        assert doc["link_reason"] == ("title" if doc["title"] else None)
    assert counts["linked_documents"] == sum(1 for d in docs if d["title"]) < len(docs)
    doc_ids = pq.read_table(hotpot["index"] / "entities.parquet", columns=["id", "doc_ids"]).to_pylist()
    by_entity = {r["id"]: sorted(r["doc_ids"]) for r in doc_ids}
    assert by_entity[mint_entity("Oksana Baiul")] == sorted(d["doc_id"] for d in docs if d["title"] == "Oksana Baiul")
    # the entity labels are embedded too (label-similarity linking)
    assert (hotpot["index"] / "vectors" / "entities.faiss").exists()


def test_link_and_docs_chunks_on_a_documents_only_index(hotpot: dict[str, Path]) -> None:
    linked = json.loads(run_cli("link", "--index", hotpot["index"], "--json",
                                "Which title did Oksana Baiul win in 1993?"))
    assert linked[0]["label"] == "Oksana Baiul" and linked[0]["entity"] == mint_entity("Oksana Baiul")
    chunks = json.loads(run_cli("docs", "chunks", "--index", hotpot["index"], "--entity", "Oksana Baiul", "--json"))
    assert chunks and all(c["title"] == "Oksana Baiul" for c in chunks)
    assert "1993 World champion" in chunks[0]["text"]


def test_rag_answers_on_a_documents_only_index(hotpot: dict[str, Path]) -> None:
    replies = hotpot["root"] / "replies.json"
    replies.write_text(json.dumps([{"answer": "Sochi, Russia"}, {"answer": "Sochi"}, {"answer": "x"}]))
    question = "Where were the Olympics held when Ukraine won its second Winter Games gold medal?"
    record: dict[str, Any] = json.loads(run_cli("ask", "--index", hotpot["index"], "--method", "rag",
                                                "--llm", f"scripted:{replies}", "--no-cache", "--json", question))
    assert record["error"] is None and record["prediction"] == "Sochi, Russia"
    assert record["paths"] and all(p["chunk_ids"][0].startswith("hotpot:") for p in record["paths"])
    # the same through batch, with the file's own questions
    run = hotpot["root"] / "run"
    output = run_cli("batch", "--index", hotpot["index"], "--questions", hotpot["questions"], "--methods", "rag",
                     "--limit", 2, "--llm", f"scripted:{replies}", "--no-cache", "--out", run)
    assert "rag 2 (0 errors)" in output
    records = [json.loads(line) for line in (run / "rag.jsonl").read_text().splitlines()]
    assert [r["error"] for r in records] == [None, None] and all(r["paths"] for r in records)


def test_kg_methods_say_the_index_has_no_kg(hotpot: dict[str, Path]) -> None:
    output = run_cli("ask", "--index", hotpot["index"], "--method", "tog", "--llm", "scripted:", "--no-cache",
                     "Who is Oksana Baiul?", expect=1)
    assert "index has no KG (it was built from documents only)" in " ".join(output.split())
    assert "index has no KG" in run_cli("kg", "stats", "--index", hotpot["index"], expect=2)


def test_wikiextractor_documents_make_title_entities(shared_data: Path, tmp_path: Path) -> None:
    """The real WikiExtractor excerpt (35 English Wikipedia articles), documents stage only."""
    source = shared_data / WIKIEXTRACTOR
    paths = IndexPaths(tmp_path)
    rejects = RejectLog(tmp_path / "rejects.jsonl")
    try:
        counts = build_documents(paths, [DocSource(source, "wikiextractor", "wiki")], DocOptions(), rejects)
    finally:
        rejects.close()
    titles = [json.loads(line)["title"] for line in source.read_text().splitlines()]
    assert counts["documents"] == len(titles) == counts["linked_documents"] == counts["title_entities"]
    table = EntityTable.from_parquet(paths.entities)
    assert table.resolve("anarchism") == mint_entity("Anarchism")  # normalised-name lookup
    rows = pq.read_table(paths.entities, columns=["id", "doc_ids"]).to_pylist()
    assert {r["id"]: r["doc_ids"] for r in rows}[mint_entity("Anarchism")] == ["12"]


def test_web_documents_and_given_names_without_a_kg(tmp_path: Path) -> None:
    """`web` documents are never linked by title; a given entity that is a name is minted and
    labelled with that name, an id is kept as it is."""
    wiki, web = tmp_path / "wiki.jsonl", tmp_path / "web.jsonl"
    wiki.write_text(
        '{"id": "a", "title": "Acme annual report", "text": "Acme makes anvils.", "entity": "Acme Corp"}\n'
        '{"id": "b", "title": "Q42 page", "text": "A writer.", "entity": "Q42"}\n'
    )
    web.write_text('{"id": "w", "title": "Acme Corp", "text": "A forum post about anvils."}\n')
    paths = IndexPaths(tmp_path / "ix")
    paths.root.mkdir()
    rejects = RejectLog(tmp_path / "rejects.jsonl")
    try:
        build_documents(paths, [DocSource(wiki, "jsonl", "wiki"), DocSource(web, "jsonl", "web")], DocOptions(), rejects)
    finally:
        rejects.close()
    rows = {r["id"]: (r["label"], r["doc_ids"]) for r in pq.read_table(paths.entities).to_pylist()}
    assert rows == {mint_entity("Acme Corp"): ("Acme Corp", ["a"]),
                    "http://www.wikidata.org/entity/Q42": ("Q42 page", ["b"])}
