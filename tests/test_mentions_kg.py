"""`index --kg-from-docs mentions`: a KG made from the documents of an index without one (each
title an entity, `mentions` edges to the titles a document's text names), on the real
AdvHotpotQA file; and `index --no-vectors`: chunks and BM25 only, dense search says why it
cannot run, query-time scoring still works."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pyoxigraph as ox
import pytest
from click.testing import CliRunner

from cli import main
from engine.access.documents import ParquetDocumentStore
from engine.access.oxigraph_kg import OxigraphKG
from engine.access.retrieval import DenseScorer, entity_chunks
from engine.llm.scripted import ScriptedLLM, ScriptedRequest
from engine.questions.record import Question
from engine.runs.answer import answer_question
from engine.runs.context import open_context
from index.build import build_index
from index.doc_options import DocSource
from index.kg_stage import KgSource
from index.manifest import read_manifest
from index.mentions_kg import MENTIONS, MentionRules, TitleMatcher
from index.paths import IndexPaths
from ingest.base.errors import IndexError_, InputError
from ingest.terms import mint_entity
from tests.test_index_build import FakeEmbedder

HOTPOT = Path("paper_questions/tog2/hotpotadv_dev.json")
QUESTIONS = 40


def run_cli(*args: object, expect: int = 0) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == expect, result.output + repr(result.exception)
    return result.output


def facts(index: Path) -> set[tuple[str, str, str]]:
    store = ox.Store.read_only(str(index / "kg"))
    try:
        return {(q.subject.value, q.predicate.value, q.object.value)
                for q in store.quads_for_pattern(None, None, None, ox.DefaultGraph())}
    finally:
        del store


def matcher(*names: str, rules: MentionRules | None = None) -> TitleMatcher:
    return TitleMatcher([(f"e:{n}", n) for n in names], rules or MentionRules())


# ------------------------------------------------------------------------------------------
# matching rules


def test_names_match_whole_words_case_sensitively_leftmost_longest() -> None:
    m = matcher("Oksana Baiul", "Ukraine", "Ukraine at the 2014 Winter Olympics", "Sochi")
    assert m.find("Oksana Baiul's medal") == ["e:Oksana Baiul"]  # possessive: still a word boundary
    assert m.find("Oksana Baiulx and OOksana Baiul") == []  # not inside a word
    assert m.find("oksana baiul") == []  # case-sensitive
    assert m.find("Ukraine at the 2014 Winter Olympics, in Sochi") == ["e:Ukraine at the 2014 Winter Olympics", "e:Sochi"]
    assert m.find("Ukraine at\n the  2014 Winter Olympics") == ["e:Ukraine at the 2014 Winter Olympics"]  # any spacing
    assert m.find("Sochi and Ukraine, then Sochi") == ["e:Sochi", "e:Ukraine"]  # each once, in order
    folded = matcher("Oksana Baiul", rules=MentionRules(case_sensitive=False))
    assert folded.find("OKSANA BAIUL won") == ["e:Oksana Baiul"]


def test_short_stop_word_numeric_and_ambiguous_titles_are_skipped() -> None:
    m = TitleMatcher([("e:U2", "U2"), ("e:Her", "Her"), ("e:1993", "1993"), ("e:a", "Mercury (planet)"),
                      ("e:b", "Mercury (element)"), ("e:c", "Crazy (song)"), ("e:d", "Twin"), ("e:e", "Twin"),
                      ("e:f", "Paris (band)"), ("e:g", "Paris"), ("e:h", "AC/DC"), ("e:i", "Merck &amp; Co.")])
    assert dict(m.skipped) == {"shorter than 3 characters": 1, "a stop word": 1, "no letter": 1, "ambiguous": 2}
    assert m.find("U2, Her and 1993 with Twin") == []
    # a parenthetical's short form matches unless two names share it or it is a name itself
    assert m.find("Mercury and Crazy") == ["e:c"]
    assert m.find("Paris (band) played in Paris") == ["e:f", "e:g"]
    assert m.find("AC/DC live, not AC / DC") == ["e:h"]  # punctuation inside a name must be as written
    assert m.find("Merck & Co., Inc.") == ["e:i"]  # an HTML-escaped title matches its text


# ------------------------------------------------------------------------------------------
# the real AdvHotpotQA file


@pytest.fixture(scope="module")
def hotpot(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The first 40 questions' paragraphs, indexed with a mentions KG and no vectors."""
    shared = Path(__file__).resolve().parents[2] / "shared" / "data"
    if not (shared / HOTPOT).exists():
        pytest.skip(f"{shared / HOTPOT} not found")
    root = tmp_path_factory.mktemp("mentions")
    questions = root / "hotpot40.json"
    questions.write_text(json.dumps(json.loads((shared / HOTPOT).read_text())[:QUESTIONS]))
    out = root / "index"
    output = run_cli("index", "--out", out, "--docs", questions, "--docs-format", "hotpot",
                     "--kg-from-docs", "mentions", "--no-vectors")
    assert "built docs, mentions in" in output and "mention_edges=" in output
    assert "kg from documents (mentions): 80 entities" in output
    return {"index": out, "questions": questions, "root": root}


def test_every_title_is_an_entity_and_edges_are_the_titles_a_text_mentions(hotpot: dict[str, Path]) -> None:
    out = hotpot["index"]
    counts = read_manifest(IndexPaths(out))["stages"]["mentions"]["counts"]
    docs = pq.read_table(out / "documents.parquet").to_pylist()
    entities = {r["id"]: r for r in pq.read_table(out / "entities.parquet").to_pylist()}
    labels = {e: r["label"] for e, r in entities.items()}
    # the documents stage's title entities, with the same ids the documents link to
    assert counts["entities"] == len(entities) == len({d["title"] for d in docs if d["title"]}) == 80
    assert {d["entity"] for d in docs if d["entity"]} == set(entities)
    edges = facts(out)
    assert counts["mention_edges"] == counts["triples"] == len(edges) > 0
    assert {p for _, p, _ in edges} == {MENTIONS}
    texts: dict[str, str] = {}
    for doc in docs:
        if doc["entity"]:
            texts[doc["entity"]] = texts.get(doc["entity"], "") + "\n" + doc["text"]
    for head, _, tail in edges:
        assert head != tail and head in entities and tail in entities
        label = html.unescape(labels[tail])
        name = label.split(" (")[0] if label not in texts[head] else label
        assert name in texts[head], (labels[head], labels[tail])
    assert (mint_entity("Magnificat (Pärt)"), MENTIONS, mint_entity("Arvo Pärt")) in edges
    assert (mint_entity("Seven Brief Lessons on Physics"), MENTIONS, mint_entity("Carlo Rovelli")) in edges
    # "Sylvia (ballet)" is named "Sylvia" in the text of "Rita Sangalli": its short form
    assert "Sylvia (ballet)" not in texts[mint_entity("Rita Sangalli")]
    assert (mint_entity("Rita Sangalli"), MENTIONS, mint_entity("Sylvia (ballet)")) in edges
    # every title written in another titled document's text is an edge (none missed)
    for head, text in texts.items():
        for entity, label in labels.items():
            if entity != head and len(label) >= 3 and f" {label} " in f" {text} ":
                assert (head, MENTIONS, entity) in edges, (labels[head], label)
    # degrees are the entities' fact counts
    for entity, row in entities.items():
        assert row["degree"] == sum((h == entity) + (t == entity) for h, _, t in edges)


def test_kg_commands_and_kg_methods_work_on_the_mentions_kg(hotpot: dict[str, Path]) -> None:
    out = hotpot["index"]
    stats = json.loads(run_cli("kg", "stats", "--index", out, "--json"))
    assert stats["relations"] == 1 and stats["triples"] == stats["from_docs"]["mention_edges"] > 0
    assert stats["from_docs"]["documents_scanned"] == 80 and stats["from_docs"]["documents_without_entity"] == 80
    assert "mention edges" in run_cli("kg", "stats", "--index", out)
    tails = run_cli("kg", "tails", "--index", out, "--entity", "Arvo Pärt", "--relation", "mentions", "--direction", "in")
    assert "Magnificat (Pärt)" in tails

    def reply(req: ScriptedRequest) -> Any:
        if req.stage in ("relation_prune", "entity_prune"):
            key = "relations" if req.stage == "relation_prune" else "entities"
            assert req.schema is not None
            return {key: list(req.schema["properties"][key]["items"]["enum"])[:1]}
        if req.stage == "reasoning":
            return {"sufficient": True, "answer": "Arvo Pärt"}
        raise AssertionError(req.stage)

    llm = ScriptedLLM(reply)
    ctx = open_context(out, llm)
    assert isinstance(ctx.kg, OxigraphKG)
    question = Question("q", "Who composed Magnificat (Pärt)?", ["Arvo Pärt"], ["Magnificat (Pärt)"])
    record = answer_question("tog", question, ctx, {"require_grounded_answer": False})
    assert record.error is None and record.answer_source == "kg"
    assert [r.stage for r in llm.requests] == ["reasoning"]  # one relation, one tail: nothing to prune
    assert [t for p in record.paths for t in p.triples] == [["Magnificat (Pärt)", "mentions", "Arvo Pärt"]]
    assert "(Magnificat (Pärt), mentions, Arvo Pärt)" in llm.requests[0].messages[-1]["content"]


def test_mentions_stage_is_incremental_and_deterministic(hotpot: dict[str, Path]) -> None:
    out = hotpot["index"]
    before = read_manifest(IndexPaths(out))
    edges = facts(out)
    output = run_cli("index", "--out", out)
    assert "up to date" in output and "kg_from_docs=mentions" in output and "vectors=False" in output
    # turned off: the KG goes, the title entities stay (degrees back to 0), the documents are reused
    output = run_cli("index", "--out", out, "--kg-from-docs", "none")
    assert "removed mentions" in output and "reused docs" in output
    assert not (out / "kg").exists() and not (out / "relations.parquet").exists()
    assert set(pq.read_table(out / "entities.parquet", columns=["degree"]).column(0).to_pylist()) == {0}
    assert "index has no KG" in run_cli("kg", "stats", "--index", out, expect=2)
    # on again: the same facts and the same stage fingerprint
    output = run_cli("index", "--out", out, "--kg-from-docs", "mentions")
    assert "built mentions; reused docs" in output
    after = read_manifest(IndexPaths(out))
    assert after["stages"]["mentions"]["fingerprint"] == before["stages"]["mentions"]["fingerprint"]
    assert after["stages"]["docs"] == before["stages"]["docs"] and facts(out) == edges
    # the ignore-case variant is another KG
    output = run_cli("index", "--out", out, "--kg-from-docs", "mentions-ignore-case")
    assert "built mentions; reused docs" in output and facts(out) >= edges
    run_cli("index", "--out", out, "--kg-from-docs", "mentions")


def test_kg_from_docs_is_refused_beside_a_kg_source(tmp_path: Path) -> None:
    kb, docs = tmp_path / "kb.tsv", tmp_path / "docs.jsonl"
    kb.write_text("a\tr\tb\n")
    docs.write_text('{"id": "1", "title": "Alpha", "text": "Alpha meets Beta."}\n')
    with pytest.raises(InputError, match="--kg-from-docs mentions makes the KG of an index without --kg sources"):
        build_index(tmp_path / "ix", [KgSource(kb, "tsv")],
                    [DocSource(docs, "jsonl", "wiki")], doc_options={"kg_from_docs": "mentions", "vectors": False})
    assert not (tmp_path / "ix").exists()


# ------------------------------------------------------------------------------------------
# --no-vectors


def test_no_vectors_index_has_chunks_and_bm25_and_says_why_dense_search_fails(hotpot: dict[str, Path]) -> None:
    out = hotpot["index"]
    manifest = read_manifest(IndexPaths(out))
    assert set(manifest["stages"]) == {"docs", "mentions"} and manifest["build_options"]["docs"]["vectors"] is False
    assert not (out / "vectors").exists() and (out / "bm25").exists() and "embedding" not in manifest
    assert "Oksana Baiul" in run_cli("docs", "search", "--index", out, "--mode", "sparse", "--k", "1", "Oksana Baiul skater")
    failed = run_cli("docs", "search", "--index", out, "--mode", "dense", "Oksana Baiul", expect=2)
    assert "built with --no-vectors" in " ".join(failed.split()) and "--mode sparse" in failed
    assert "built with --no-vectors" in run_cli("docs", "stats", "--index", out)
    # rag (dense search) fails on its question with the same reason; nothing is answered
    output = run_cli("ask", "--index", out, "--method", "rag", "--llm", "scripted:", "--no-cache",
                     "Who is Oksana Baiul?", expect=1)
    assert "built with --no-vectors" in " ".join(output.split())


def test_query_time_scoring_works_without_whole_corpus_vectors(hotpot: dict[str, Path]) -> None:
    """What tog2 does: the chunks of an entity's documents, scored at query time with the
    index's embedding model (here the packaged default, as the index recorded none)."""
    store = ParquetDocumentStore(IndexPaths(hotpot["index"]))
    assert store.built_without_vectors
    chunks = entity_chunks(store, mint_entity("Oksana Baiul")) + entity_chunks(store, mint_entity("Arvo Pärt"))
    ranked = DenseScorer(store.embedder).rank("Which figure skater won the 1993 World title?", [c.text for c in chunks])
    assert chunks[ranked[0][0]].title == "Oksana Baiul" and ranked[0][1] > ranked[-1][1]
    with pytest.raises(IndexError_, match="--no-vectors"):
        store.dense_search("figure skater", 3)


def test_vectors_can_be_turned_on_and_off_without_touching_the_documents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import index.embedder

    monkeypatch.setattr(index.embedder, "SentenceTransformerEmbedder", FakeEmbedder)
    docs, out = tmp_path / "docs.jsonl", tmp_path / "ix"
    docs.write_text('{"id": "1", "title": "Alpha", "text": "Alpha meets Beta."}\n'
                    '{"id": "2", "title": "Beta", "text": "Beta is alone."}\n')
    output = run_cli("index", "--out", out, "--docs", docs)
    assert "built docs, vectors" in output
    docs_stage = read_manifest(IndexPaths(out))["stages"]["docs"]
    output = run_cli("index", "--out", out, "--no-vectors")
    assert "removed vectors" in output and "reused docs" in output and not (out / "vectors").exists()
    assert read_manifest(IndexPaths(out))["stages"]["docs"] == docs_stage
    output = run_cli("index", "--out", out, "--vectors")
    assert "built vectors; reused docs" in output and (out / "vectors" / "chunks.faiss").exists()
    assert read_manifest(IndexPaths(out))["build_options"]["docs"]["vectors"] is True
    # --no-vectors and a mentions KG through a recipe (its keys are the options' names)
    recipe = tmp_path / "index.toml"
    recipe.write_text(f'out = "ix2"\nvectors = false\nkg-from-docs = "mentions"\n[[docs]]\npath = "{docs.name}"\n')
    output = run_cli("index", "--config", recipe)
    assert "built docs, mentions" in output
    assert facts(tmp_path / "ix2") == {(mint_entity("Alpha"), MENTIONS, mint_entity("Beta"))}


def test_full_advhotpotqa_file_links_the_paragraphs_of_most_questions(shared_data: Path, tmp_path: Path) -> None:
    """The whole AdvHotpotQA dev file (README numbers): entities, mention edges, and the
    questions in which an edge joins two of the question's titled paragraphs."""
    source = shared_data / HOTPOT
    out = tmp_path / "hotpot"
    run_cli("index", "--out", out, "--docs", source, "--docs-format", "hotpot", "--kg-from-docs", "mentions", "--no-vectors")
    counts = read_manifest(IndexPaths(out))["stages"]["mentions"]["counts"]
    edges = {(h, t) for h, _, t in facts(out)}
    questions = json.loads(source.read_text())
    bridged = 0
    for question in questions:
        titled = [mint_entity(html.unescape(p["title"])) for p in question["paragraphs"] if p["title"] != "added"]
        bridged += any((a, b) in edges for a in titled for b in titled if a != b)
    print(f"\n{counts['entities']} entities, {counts['mention_edges']} mention edges, "
          f"{counts['skipped_titles']} titles skipped; {bridged} of {len(questions)} questions bridged")
    assert (counts["entities"], counts["mention_edges"], counts["skipped_titles"]) == (612, 265, 0)
    assert (bridged, len(questions)) == (235, 308)
