"""Embeddings and FAISS indexes: the packaged model, dense search by collection, index kinds,
model mismatch errors, and a build killed with SIGKILL that resumes without recomputing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from engine.access.documents import ParquetDocumentStore
from index.doc_options import DocOptions, DocSource
from index.doc_stage import build_documents
from index.embedder import (
    PROBE_TEXT,
    SentenceTransformerEmbedder,
    default_model_path,
    model_fingerprint,
)
from index.paths import IndexPaths
from index.vectors import choose_kind
from index.vectors_stage import build_vectors
from ingest.base.errors import IndexError_, ModelError
from ingest.rejects import RejectLog

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


def make_docs(tmp_path: Path, shared_data: Path, questions: int = 12) -> tuple[IndexPaths, list[dict[str, str]]]:
    """A small real corpus: the paragraphs of the first AdvHotpotQA questions (wiki) and a few
    WikiExtractor articles cut short (web)."""
    data = json.loads((shared_data / "paper_questions" / "tog2" / "hotpotadv_dev.json").read_text())
    wiki = tmp_path / "wiki.json"
    wiki.write_text(json.dumps(data[:questions]))
    web = tmp_path / "web.jsonl"
    lines = (shared_data / "dumps" / "wikipedia" / "wikiextractor-json_enwiki_wiki_00.jsonl").read_text().splitlines()[:4]
    with web.open("w") as fh:
        for line in lines:
            record = json.loads(line)
            fh.write(json.dumps({"id": "web-" + record["id"], "title": record["title"], "text": record["text"][:1500]}) + "\n")
    paths = IndexPaths(tmp_path / "index")
    paths.root.mkdir()
    log = RejectLog(paths.root / "rejects.jsonl")
    build_documents(paths, [DocSource(wiki, "hotpot", "wiki"), DocSource(web, "jsonl", "web")], DocOptions(chunk_size=400, chunk_overlap=50), log)
    log.close()
    return paths, data[:questions]


def test_packaged_model(embedder: SentenceTransformerEmbedder) -> None:
    assert default_model_path().is_dir()
    assert embedder.name == "all-MiniLM-L6-v2" and embedder.dim == 384
    assert embedder.fingerprint == model_fingerprint(default_model_path()) and len(embedder.fingerprint) == 16
    vectors = embedder.encode(["a cat sat on the mat", "a kitten rested on the rug", "stock market crash"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert embedder.encode([]).shape == (0, 384)
    with pytest.raises(ModelError, match="not found"):
        SentenceTransformerEmbedder("/nonexistent/model")


def test_kind_is_chosen_by_size() -> None:
    assert choose_kind(10) == "flat" and choose_kind(500_000) == "hnsw" and choose_kind(10_000_000) == "ivfpq"
    assert choose_kind(10, "ivfpq") == "ivfpq"
    with pytest.raises(ValueError, match="unknown FAISS"):
        choose_kind(10, "annoy")


def test_dense_search_by_collection_and_model_check(tmp_path: Path, shared_data: Path, embedder: SentenceTransformerEmbedder) -> None:
    paths, _ = make_docs(tmp_path, shared_data)
    counts = build_vectors(paths, DocOptions(shard_size=16), tmp_path / "cache")
    chunks = pq.ParquetFile(paths.chunks).metadata.num_rows
    assert counts["chunk_vectors"] == chunks and counts["chunk_index"] == "flat"
    assert counts["model"] == "all-MiniLM-L6-v2" and counts["dim"] == 384
    # a documents-only index has an entity table (its titles), embedded beside the chunks
    entities = counts["entity_vectors"]
    assert entities > 0 and counts["entity_index"] == "flat"
    assert counts["shards_computed"] == -(-chunks // 16) + -(-entities // 16) and counts["shards_reused"] == 0
    store = ParquetDocumentStore(paths, embedder)
    hits = store.dense_search("Oksana Baiul Ukrainian figure skater 1993 World champion", 5)
    assert hits[0].chunk.title == "Oksana Baiul" and 0 < hits[0].score <= 1.0001
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    web = store.dense_search("political philosophy without a state", 3, "web")
    assert web and all(h.chunk.collection == "web" for h in web) and web[0].chunk.title == "Anarchism"
    assert all(h.chunk.collection == "wiki" for h in store.dense_search("Anarchism", 5, "wiki"))
    assert store.dense_search("anything", 5, "domain") == []
    # stored vectors are the index's vectors
    assert np.allclose(store.vectors([hits[0].chunk.row])[0], embedder.encode([
        f"{hits[0].chunk.title}\n{hits[0].chunk.text}"])[0], atol=2e-3)
    # a different model folder (same weights, changed config) is refused with a clear message
    other = tmp_path / "other-model"
    shutil.copytree(default_model_path(), other)
    config = other / "config_sentence_transformers.json"
    config.write_text(config.read_text().replace("}", ', "note": "copy"}', 1))
    with pytest.raises(IndexError_, match=r"embedded with all-MiniLM-L6-v2 .* not with other-model"):
        ParquetDocumentStore(paths, SentenceTransformerEmbedder(other))


@pytest.mark.parametrize("kind", ["hnsw", "ivfpq"])
def test_approximate_indexes_find_what_exact_search_finds(tmp_path: Path, shared_data: Path, kind: str, embedder: SentenceTransformerEmbedder) -> None:
    paths, questions = make_docs(tmp_path, shared_data, questions=8)
    cache = tmp_path / "cache"
    build_vectors(paths, DocOptions(shard_size=64, faiss_kind="flat"), cache)
    exact = ParquetDocumentStore(paths, embedder)
    probes = [q["question"] for q in questions]
    expected = [exact.dense_search(q, 1)[0].chunk.chunk_id for q in probes]
    counts = build_vectors(paths, DocOptions(shard_size=64, faiss_kind=kind), cache)
    assert counts["chunk_index"] == kind and counts["shards_computed"] == 0  # vectors come from the cache
    approx = ParquetDocumentStore(paths, embedder)
    found = [approx.dense_search(q, 3)[0].chunk.chunk_id for q in probes]
    # HNSW is near exact; IVF-PQ on a few dozen vectors trains on too few points to be.
    wanted = len(probes) - 1 if kind == "hnsw" else len(probes) // 2
    assert sum(a == b for a, b in zip(found, expected, strict=True)) >= wanted
    assert all(h.chunk.collection == "web" for h in approx.dense_search(probes[0], 3, "web"))


def test_entity_label_vectors(tmp_path: Path, shared_data: Path, embedder: SentenceTransformerEmbedder) -> None:
    from tests.test_documents_stage import write_entities

    paths, _ = make_docs(tmp_path, shared_data, questions=2)
    write_entities(paths, [
        {"id": "e1", "label": "Oksana Baiul", "aliases": ["Baiul"]},
        {"id": "e2", "label": "Winter Olympics"},
        {"id": "e3", "label": None},
    ])
    counts = build_vectors(paths, DocOptions(), tmp_path / "cache")
    assert counts["entity_vectors"] == 3
    ids = pq.read_table(paths.vectors / "entities.ids.parquet").to_pydict()
    assert ids["entity"] == ["e1", "e1", "e2"] and ids["name"] == ["Oksana Baiul", "Baiul", "Winter Olympics"]
    meta = json.loads((paths.vectors / "meta.json").read_text())
    assert meta["entities"]["count"] == 3 and meta["model_fingerprint"] == embedder.fingerprint


_KILLED_BUILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from index.embedder import SentenceTransformerEmbedder
    from index.doc_options import DocOptions
    from index.vectors_stage import build_vectors
    from index.paths import IndexPaths

    real_encode = SentenceTransformerEmbedder.encode

    def encode_then_wait(self, texts, batch_size=None):
        vectors = real_encode(self, texts, batch_size)
        time.sleep(0.5)  # keep the build running long enough to be killed half-way
        return vectors

    SentenceTransformerEmbedder.encode = encode_then_wait
    build_vectors(IndexPaths(Path(sys.argv[1])), DocOptions(shard_size=4, entity_vectors=False), Path(sys.argv[2]))
    """
)


@pytest.mark.slow
def test_killed_build_resumes_without_recomputing_finished_shards(
    tmp_path: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths, _ = make_docs(tmp_path, shared_data, questions=6)
    total = pq.ParquetFile(paths.chunks).metadata.num_rows
    shards_total = -(-total // 4)
    assert shards_total >= 6
    cache = tmp_path / "cache"
    script = tmp_path / "build.py"
    script.write_text(_KILLED_BUILD)
    env = os.environ | {"PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, str(script), str(paths.root), str(cache)], cwd=REPO, env=env)
    try:
        deadline = time.monotonic() + 120
        while len(list(cache.rglob("*.npy"))) < 3:
            assert process.poll() is None, "the build ended before it could be killed"
            assert time.monotonic() < deadline, "no shard written in time"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    finished = {p: p.stat().st_mtime_ns for p in cache.rglob("*.npy")}
    assert 3 <= len(finished) < shards_total
    assert not paths.vectors.exists()

    encoded: list[int] = []
    real_encode = SentenceTransformerEmbedder.encode

    def counting_encode(self: SentenceTransformerEmbedder, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        encoded.append(len([t for t in texts if t != PROBE_TEXT]))  # the meta's probe is no chunk
        return real_encode(self, texts, batch_size)

    monkeypatch.setattr(SentenceTransformerEmbedder, "encode", counting_encode)
    counts = build_vectors(paths, DocOptions(shard_size=4, entity_vectors=False), cache)
    assert counts["shards_reused"] == len(finished)
    assert counts["shards_computed"] == shards_total - len(finished)
    assert sum(encoded) == total - 4 * len(finished)
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in finished.items())

    # An uninterrupted build in a fresh cache (and without the first build's vectors) gives
    # the same vectors.
    shutil.rmtree(paths.embeddings)
    fresh = build_vectors(paths, DocOptions(shard_size=4, entity_vectors=False), tmp_path / "fresh-cache")
    assert fresh["shards_computed"] == shards_total
    resumed = sorted(cache.rglob("*.npy"))
    clean = sorted((tmp_path / "fresh-cache").rglob("*.npy"))
    assert [p.name for p in resumed] == [p.name for p in clean]
    for a, b in zip(resumed, clean, strict=True):
        np.testing.assert_allclose(np.load(a), np.load(b), atol=1e-6)


def test_damaged_shard_is_recomputed(tmp_path: Path, shared_data: Path) -> None:
    paths, _ = make_docs(tmp_path, shared_data, questions=3)
    cache = tmp_path / "cache"
    build_vectors(paths, DocOptions(shard_size=8, entity_vectors=False), cache)
    shards = sorted(cache.rglob("*.npy"))
    shards[0].write_bytes(shards[0].read_bytes()[:100])  # e.g. a disk that filled up
    (shards[1].parent / (shards[1].name + ".tmp")).write_bytes(b"half")  # a kill during a write
    counts = build_vectors(paths, DocOptions(shard_size=8, entity_vectors=False), cache)
    assert counts["shards_computed"] == 1 and counts["shards_reused"] == len(shards) - 1


def test_a_later_build_embeds_only_new_texts(tmp_path: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Documents added to an index: the next build (whose shard cache is gone) takes the vectors
    of texts it already embedded from embeddings/ and embeds only the new ones."""
    paths, _ = make_docs(tmp_path, shared_data, questions=4)
    build_vectors(paths, DocOptions(), tmp_path / "cache-1")
    before = pq.read_table(paths.chunks).to_pylist()
    old_vectors = {c["chunk_id"]: v for c, v in zip(before, np.load(paths.embeddings / "chunks.f16.npy"), strict=True)}
    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"id": "new-1", "title": "Zebra", "text": "Zebras are African equines with stripes."}) + "\n")
    data = json.loads((shared_data / "paper_questions" / "tog2" / "hotpotadv_dev.json").read_text())[:4]
    (tmp_path / "wiki.json").write_text(json.dumps(data))
    log = RejectLog(paths.root / "rejects-2.jsonl")
    build_documents(paths, [DocSource(tmp_path / "wiki.json", "hotpot", "wiki"), DocSource(tmp_path / "web.jsonl", "jsonl", "web"),
                            DocSource(extra, "jsonl", "domain")], DocOptions(chunk_size=400, chunk_overlap=50), log)
    log.close()
    encoded: list[str] = []
    real_encode = SentenceTransformerEmbedder.encode

    def counting_encode(self: SentenceTransformerEmbedder, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        encoded.extend(t for t in texts if t != PROBE_TEXT)  # the meta's probe is no chunk
        return real_encode(self, texts, batch_size)

    monkeypatch.setattr(SentenceTransformerEmbedder, "encode", counting_encode)
    counts = build_vectors(paths, DocOptions(entity_vectors=False), tmp_path / "cache-2")
    assert encoded == ["Zebra\nZebras are African equines with stripes."]
    assert counts["vectors_computed"] == 1 and counts["vectors_from_previous_build"] == len(before)
    after = pq.read_table(paths.chunks).to_pylist()
    new_vectors = np.load(paths.embeddings / "chunks.f16.npy")
    for chunk, vector in zip(after, new_vectors, strict=True):
        if chunk["chunk_id"] in old_vectors:
            assert np.array_equal(vector, old_vectors[chunk["chunk_id"]])
    # another model: nothing is reused
    monkeypatch.setattr(SentenceTransformerEmbedder, "fingerprint", property(lambda self: "another-model"))
    assert build_vectors(paths, DocOptions(entity_vectors=False), tmp_path / "cache-3")["vectors_from_previous_build"] == 0


def test_label_search_on_ivfpq_rescores_exactly(tmp_path: Path, shared_data: Path,
                                                embedder: SentenceTransformerEmbedder) -> None:
    """Linking compares label similarity with a threshold: on a compressed (IVF-PQ) index the
    scores must still be exact cosines, so candidates are re-ranked with the stored vectors."""
    from engine.access.name_search import LabelIndex
    from tests.test_documents_stage import write_entities

    paths, _ = make_docs(tmp_path, shared_data, questions=2)
    data = json.loads((shared_data / "paper_questions" / "tog2" / "hotpotadv_dev.json").read_text())
    # enough labels that PQ codes (48 bytes for 384 dimensions) are lossy
    titles = list(dict.fromkeys(p["title"] for q in data for p in q["paragraphs"] if p["title"] != "added"))[:1500]
    write_entities(paths, [{"id": f"e{i}", "label": t} for i, t in enumerate(titles)])
    build_vectors(paths, DocOptions(faiss_kind="ivfpq"), tmp_path / "cache")
    meta = json.loads((paths.vectors / "meta.json").read_text())
    assert meta["entities"]["kind"] == "ivfpq"
    labels = LabelIndex(paths)
    probes = titles[:10]
    vectors = np.asarray(embedder.encode(probes), dtype=np.float32)
    for title, hits, vector in zip(probes, labels.search(vectors, 3), vectors, strict=True):
        assert hits[0][1] == title and hits[0][2] == pytest.approx(1.0, abs=1e-2)
        exact = np.asarray(embedder.encode([h[1] for h in hits]), dtype=np.float32) @ vector
        assert [h[2] for h in hits] == pytest.approx(exact.tolist(), abs=2e-3)
        assert [h[2] for h in hits] == sorted((h[2] for h in hits), reverse=True)
