"""Wikipedia-sized document indexes (issue 13): the documents stage streams with memory bounded
by a batch, `--vectors linked` embeds only chunks of entity-linked documents and says so,
`--sparse tantivy` agrees with bm25s on real articles, and the wikiscale benchmark's generated
dump is a valid pages-articles file with new ids and titles."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from bench.bench_wiki_scale import (
    SOURCES,
    generate_pages_articles,
    measure_build,
    project,
    source_pages,
)
from cli import main
from engine.access.documents import ParquetDocumentStore
from index.build import build_index
from index.doc_options import DocOptions, DocSource
from index.doc_stage import build_documents
from index.manifest import read_manifest
from index.paths import IndexPaths
from index.vectors_stage import CHUNK_ROWS_FILE
from ingest.base.errors import IndexError_
from ingest.base.progress import NullReporter
from ingest.rejects import RejectLog
from ingest.wikipedia import read_wikipedia_xml
from tests.test_index_build import FakeEmbedder

ENWIKI = "dumps/wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def run_cli(*args: object, expect: int = 0) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == expect, result.output
    return result.output


# ------------------------------------------------------------------------------------------
# bounded streaming


def _write_docs(path: Path, count: int) -> int:
    """`count` JSONL documents of about 1,500 characters; returns the characters written."""
    words = ["river", "valley", "mountain", "city", "council", "railway", "station", "harbour", "museum"]
    chars = 0
    with path.open("w", encoding="utf-8") as fh:
        for n in range(count):
            text = " ".join(f"{words[(n * 7 + i) % len(words)]}{i % 13}" for i in range(90)) + f". Document {n} ends."
            text = ". ".join([text[:500], text[500:1000], text[1000:]])
            fh.write(json.dumps({"id": str(n), "title": f"Place {n}", "text": text}) + "\n")
            chars += len(text)
    return chars


def _peak_python_bytes(tmp: Path, count: int) -> tuple[int, int]:
    """(peak traced Python memory of the documents stage, characters of text) for `count` docs."""
    source = tmp / f"docs{count}.jsonl"
    chars = _write_docs(source, count)
    paths = IndexPaths(tmp / f"ix{count}")
    paths.root.mkdir()
    rejects = RejectLog(paths.root / "rejects.jsonl")
    tracemalloc.start()
    try:
        counts = build_documents(paths, [DocSource(source, "jsonl", "wiki")], DocOptions(sparse="tantivy"), rejects)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        rejects.close()
    assert counts["documents"] == count and counts["linked_entities"] == count
    return peak, chars


_MEASURE = """
import json, sys
from pathlib import Path
import index.doc_stage
from tests.test_wiki_scale import _peak_python_bytes
index.doc_stage.CHUNK_ROW_GROUP = 256
index.doc_stage.ENTITY_BATCH_ROWS = 256
tmp = Path(sys.argv[1])
print(json.dumps([_peak_python_bytes(tmp, 2_000), _peak_python_bytes(tmp, 8_000)]))
"""


def test_documents_stage_memory_does_not_grow_with_the_corpus(tmp_path: Path) -> None:
    """4x the documents, with batches far smaller than the corpus: the peak Python memory grows
    by about the set of document ids read (~100 bytes a document), not with the text. Measured
    in a fresh interpreter: what earlier tests imported (ray, for one) changes transient peaks."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(tmp_path)], cwd=repo, capture_output=True, text=True,
                          env=__import__("os").environ | {"PYTHONPATH": str(repo)}, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (small, small_chars), (large, large_chars) = json.loads(done.stdout.strip().splitlines()[-1])
    added_docs, added_text = 6_000, large_chars - small_chars  # about 4.8 MB of text
    assert large - small < 200 * added_docs < 0.3 * added_text, (small, large, added_text)
    # what was streamed through is all there: documents, chunks and each entity's doc ids
    import pyarrow.parquet as pq

    paths = IndexPaths(tmp_path / "ix8000")
    entities = pq.read_table(paths.entities, columns=["id", "label", "doc_ids"]).to_pylist()
    assert len(entities) == 8_000 and entities[5]["label"] == "Place 5" and entities[5]["doc_ids"] == ["5"]
    assert entities[7_999]["doc_ids"] == ["7999"]
    assert pq.ParquetFile(paths.documents).metadata.num_rows == 8_000


# ------------------------------------------------------------------------------------------
# --vectors none|linked|all


@pytest.fixture
def wiki_and_web(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    import index.embedder

    monkeypatch.setattr(index.embedder, "SentenceTransformerEmbedder", FakeEmbedder)
    wiki, web = tmp_path / "wiki.jsonl", tmp_path / "web.jsonl"
    wiki.write_text('{"id": "1", "title": "Alpha", "text": "Alpha is a river. It flows north."}\n'
                    '{"id": "2", "title": "Beta", "text": "Beta is a mountain near Alpha."}\n')
    web.write_text('{"id": "w1", "title": "A blog", "text": "Someone wrote about the river Alpha."}\n'
                   '{"id": "w2", "title": "", "text": "A note on mountains."}\n')
    return wiki, web, tmp_path / "ix"


def test_vectors_linked_embeds_only_linked_chunks_and_is_recorded(wiki_and_web: tuple[Path, Path, Path]) -> None:
    wiki, web, out = wiki_and_web
    output = run_cli("index", "--out", out, "--docs", wiki, "--docs", web, "--collection", "wiki", "--collection", "web",
                     "--vectors", "linked")
    assert "built docs, vectors" in output
    manifest = read_manifest(IndexPaths(out))
    options = manifest["build_options"]["docs"]
    assert options["vectors"] is True and options["vector_chunks"] == "linked"
    assert manifest["stages"]["vectors"]["counts"]["chunk_vectors"] == 2
    store = ParquetDocumentStore(IndexPaths(out))
    wiki_rows = [r.row for r in store.rows(range(4)) if r.collection == "wiki"]
    assert np.load(out / "vectors" / CHUNK_ROWS_FILE).tolist() == wiki_rows
    # dense search finds only embedded chunks, and a collection without any says why
    assert {h.chunk.collection for h in store.dense_search("river", 4)} == {"wiki"}
    with pytest.raises(IndexError_, match="--vectors linked"):
        store.dense_search("river", 2, collection="web")
    assert store.vectors(wiki_rows).shape == (2, FakeEmbedder().dim)
    with pytest.raises(IndexError_, match="have no vector"):
        store.vectors([max(wiki_rows) + 1])
    assert "linked: 2 of 4 chunks embedded" in run_cli("docs", "stats", "--index", out)
    # kept by a later build without options; --vectors alone is all, --no-vectors is none
    assert "up to date" in run_cli("index", "--out", out)
    output = run_cli("index", "--out", out, "--vectors")
    assert "built vectors; reused docs" in output
    assert read_manifest(IndexPaths(out))["stages"]["vectors"]["counts"]["chunk_vectors"] == 4
    assert not (out / "vectors" / CHUNK_ROWS_FILE).exists()
    assert "removed vectors" in run_cli("index", "--out", out, "--no-vectors")
    assert read_manifest(IndexPaths(out))["build_options"]["docs"]["vectors"] is False
    assert "contradicts" in run_cli("index", "--out", out, "--no-vectors", "--vectors", "linked", expect=2)


def test_vectors_linked_without_any_linked_document_is_an_error(wiki_and_web: tuple[Path, Path, Path]) -> None:
    _, web, out = wiki_and_web
    output = run_cli("index", "--out", out, "--docs", web, "--collection", "web", "--vectors", "linked", expect=2)
    assert "no document is linked" in " ".join(output.split())


# ------------------------------------------------------------------------------------------
# --sparse tantivy


def test_tantivy_agrees_with_bm25s_on_real_articles(shared_data: Path, tmp_path: Path) -> None:
    source = DocSource(shared_data / ENWIKI, "wikipedia-xml", "wiki")
    web = tmp_path / "web.jsonl"
    web.write_text('{"id": "w1", "title": "Notes", "text": "Albedo of fresh snow is high; anarchism is a philosophy."}\n')
    stores = {}
    for engine in ("bm25s", "tantivy"):
        build_index(tmp_path / engine, [], [source, DocSource(web, "jsonl", "web")],
                    doc_options={"vectors": False, "sparse": engine})
        stores[engine] = ParquetDocumentStore(tmp_path / engine)
    assert read_manifest(IndexPaths(tmp_path / "tantivy"))["build_options"]["docs"]["sparse"] == "tantivy"
    titles = sorted({r.title for r in stores["bm25s"].rows(range(0, 3000, 7))})
    overlaps, top1 = [], 0
    for title in titles:
        found = {name: [h.chunk.row for h in store.sparse_search(title, 10)] for name, store in stores.items()}
        overlaps.append(len(set(found["bm25s"]) & set(found["tantivy"])) / max(1, len(found["bm25s"])))
        top1 += found["bm25s"][:1] == found["tantivy"][:1]
    assert sum(overlaps) / len(overlaps) >= 0.85 and top1 >= 0.9 * len(titles), (overlaps, top1, len(titles))
    # the collection filter: only web rows, with the web document first for both engines
    for store in stores.values():
        hits = store.sparse_search("albedo snow", 3, collection="web")
        assert [h.chunk.doc_id for h in hits] == ["w1"]
        assert store.sparse_search("the of and", 3) == []  # stop words only


# ------------------------------------------------------------------------------------------
# the benchmark's generated dump


def test_generated_dump_repeats_real_pages_under_new_ids_and_titles(tmp_path: Path) -> None:
    missing = [str(p) for p in SOURCES if not p.exists()]
    if missing:
        pytest.skip(f"the real Wikipedia excerpts are not here (../shared/data): {missing[0]}")
    _, pages = source_pages()
    xml = tmp_path / "gen.xml"
    generated = generate_pages_articles(xml, 2 * sum(len(p) for p in pages))
    assert generated["copies"] == 2 and generated["pages"] == 2 * len(pages)
    docs = list(read_wikipedia_xml(xml, RejectLog(tmp_path / "rejects.jsonl"), NullReporter()))
    assert len(docs) == generated["articles"] and len({d.id for d in docs}) == len(docs)
    by_id = {d.id: d for d in docs}
    first = docs[0]
    copy = by_id[str(10**7 + int(first.id))]
    assert copy.title == f"{first.title} (copy 1)" and copy.text == first.text
    # the benchmark's build of it: counts, rates and a projection
    build = measure_build(xml, tmp_path / "ix")
    assert build["documents"] == len(docs) and build["peak_rss_bytes"] > 0 and build["disk_bytes"]["bm25"] > 0
    build["chunks_per_s"] = build["chunks"] / build["seconds"]
    projection = project(build, {"chunks_per_s": 20.0})
    assert projection["hours_vectors_all"] > projection["hours_vectors_none"] > 0
