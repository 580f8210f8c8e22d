"""Index builds are atomic and incremental; --kg-keep drops a seeded fraction of facts; options
of the previous build are kept; outputs of stages that no longer exist are not carried over."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pyoxigraph as ox
import pytest
from click.testing import CliRunner

import index.embedder
import index.kg_stage
from cli import main
from index.build import build_index
from index.embedder import model_fingerprint, resolve_model_path
from index.kg_stage import KgSource
from index.manifest import read_manifest
from index.paths import IndexPaths
from ingest.base.errors import IndexError_, InputError
from ingest.freebase import FREEBASE_DROP_PREFIXES
from ingest.kg_readers import KgOptions

KB = "a\tr\tb\nb\tr\tc\nc\ts\td\n"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
DOC_OUTPUTS = ("documents.parquet", "chunks.parquet", "bm25", "vectors", "embeddings", ".rejects-docs.jsonl")


class FakeEmbedder:
    """Stands in for the sentence-transformers model in build_vectors: deterministic vectors
    from a hash of the text, no torch."""

    dim = 8

    def __init__(self, model: str | None = None, batch_size: int = 64, **_: object) -> None:
        self.path = resolve_model_path(model)
        self.name = self.path.name
        self.fingerprint = model_fingerprint(self.path)

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = np.array([list(hashlib.sha256(t.encode()).digest()[: self.dim]) for t in texts], dtype=np.float32) + 1
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture()
def fake_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index.embedder, "SentenceTransformerEmbedder", FakeEmbedder)


def index_cli(*args: object) -> str:
    """Run `cli.py index ...` in this process; its output."""
    result = CliRunner().invoke(main, ["index", *map(str, args)])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def small_kg(tmp_path: Path, triples: int = 40) -> Path:
    kb = tmp_path / "kb.tsv"
    kb.write_text("".join(f"e{i}\tr{i % 3}\te{i + 1}\n" for i in range(triples)), encoding="utf-8")
    return kb


def small_docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs.jsonl"
    rows = [{"id": "d1", "title": "e1", "text": "e1 is the first entity."}, {"id": "d2", "title": "e2", "text": "e2 follows e1."}]
    docs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return docs


def kept_triples(out: Path) -> set[tuple[str, str, str]]:
    store = ox.Store.read_only(str(out / "kg"))
    try:
        return {(q.subject.value, q.predicate.value, q.object.value) for q in store.quads_for_pattern(None, None, None, ox.DefaultGraph())}
    finally:
        del store


def manifest(out: Path) -> dict[str, Any]:
    return read_manifest(IndexPaths(out))


def test_second_build_does_no_work_and_changed_input_rebuilds(tmp_path: Path) -> None:
    kb = tmp_path / "kb.tsv"
    kb.write_text(KB, encoding="utf-8")
    out = tmp_path / "ix"
    first = build_index(out, [KgSource(kb, "tsv")], [])
    assert first.ran == ["kg"]
    inode = (out / "entities.parquet").stat().st_ino
    second = build_index(out, [KgSource(kb, "tsv")], [])
    assert second.up_to_date
    assert (out / "entities.parquet").stat().st_ino == inode  # nothing rewritten
    # the recorded source is re-checked even when not given again
    third = build_index(out, [], [])
    assert third.up_to_date
    kb.write_text(KB + "d\tr\te\n", encoding="utf-8")
    fourth = build_index(out, [], [])
    assert fourth.ran == ["kg"]
    assert read_manifest(IndexPaths(out))["stages"]["kg"]["counts"]["triples"] == 4


def test_adding_a_source_keeps_the_recorded_ones(tmp_path: Path) -> None:
    (tmp_path / "a.tsv").write_text("a\tr\tb\n", encoding="utf-8")
    (tmp_path / "b.tsv").write_text("c\tr\td\n", encoding="utf-8")
    out = tmp_path / "ix"
    build_index(out, [KgSource(tmp_path / "a.tsv", "tsv")], [])
    build_index(out, [KgSource(tmp_path / "b.tsv", "tsv")], [])
    manifest = read_manifest(IndexPaths(out))
    assert len(manifest["sources"]["kg"]) == 2
    assert manifest["stages"]["kg"]["counts"]["triples"] == 2
    build_index(out, [KgSource(tmp_path / "b.tsv", "tsv")], [], replace_sources=True)
    assert read_manifest(IndexPaths(out))["stages"]["kg"]["counts"]["triples"] == 1


def test_a_failing_build_leaves_the_old_index_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kb = tmp_path / "kb.tsv"
    kb.write_text(KB, encoding="utf-8")
    out = tmp_path / "ix"
    build_index(out, [KgSource(kb, "tsv")], [])
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    kb.write_text(KB + "x\ty\tz\n", encoding="utf-8")

    def crash(*args: object, **kwargs: object) -> int:
        raise RuntimeError("simulated crash while writing tables")

    monkeypatch.setattr(index.kg_stage, "_write_entities", crash)
    with pytest.raises(RuntimeError):
        build_index(out, [], [])
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert after == before
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    assert read_manifest(IndexPaths(out))["stages"]["kg"]["counts"]["triples"] == 3


def test_interrupted_swap_is_recovered(tmp_path: Path) -> None:
    kb = tmp_path / "kb.tsv"
    kb.write_text(KB, encoding="utf-8")
    out = tmp_path / "ix"
    build_index(out, [KgSource(kb, "tsv")], [])
    os.rename(out, tmp_path / ".ix.old")  # as if killed between the two renames
    report = build_index(out, [KgSource(kb, "tsv")], [])
    assert report.up_to_date
    assert read_manifest(IndexPaths(out))["stages"]["kg"]["counts"]["triples"] == 3


def test_not_an_index_folder_is_refused(tmp_path: Path) -> None:
    from ingest.base.errors import IndexError_

    out = tmp_path / "ix"
    out.mkdir()
    (out / "precious.txt").write_text("keep me", encoding="utf-8")
    kb = tmp_path / "kb.tsv"
    kb.write_text(KB, encoding="utf-8")
    with pytest.raises(IndexError_, match="not an index"):
        build_index(out, [KgSource(kb, "tsv")], [])
    assert (out / "precious.txt").read_text(encoding="utf-8") == "keep me"


def test_kg_keep_is_seeded_and_recorded(tmp_path: Path, shared_data: Path) -> None:
    kb = shared_data / "pathquestion" / "3H-kb.txt"
    counts, kept = [], []
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        out = tmp_path / name
        build_index(out, [KgSource(kb, "tsv")], [], KgOptions(keep_fraction=0.5, seed=seed))
        counts.append(read_manifest(IndexPaths(out))["stages"]["kg"]["counts"])
        kept.append(kept_triples(out))
    assert counts[0]["kg_keep"] == {"fraction": 0.5, "seed": 1, "dropped": 2839 - counts[0]["triples"]}
    assert 0.4 * 2839 < counts[0]["triples"] < 0.6 * 2839
    assert len(kept[0]) == counts[0]["triples"]
    assert kept[0] == kept[1]  # same seed: the same facts
    assert kept[0] != kept[2] and counts[2]["kg_keep"]["seed"] == 2  # another seed: other facts


def test_dropped_triples_are_rendered_as_documents(tmp_path: Path, shared_data: Path) -> None:
    from index.kg_stage import build_kg
    from ingest.rejects import RejectLog

    paths = IndexPaths(tmp_path)
    counts = build_kg(
        paths,
        [KgSource(shared_data / "pathquestion" / "2H-kb.txt", "tsv")],
        KgOptions(keep_fraction=0.5, seed=0, dropped_as_docs=True),
        RejectLog(tmp_path / "r.jsonl"),
    )
    docs = [json.loads(line) for line in paths.dropped_docs.read_text(encoding="utf-8").splitlines()]
    assert len(docs) == counts["kg_keep"]["dropped_documents"] > 0
    sentences = sum(doc["text"].count(".") for doc in docs)
    assert sentences >= counts["kg_keep"]["dropped"]
    assert all(doc["entity"].startswith("https://localkg.example/entity/") for doc in docs)


def test_kg_as_docs_renders_every_fact(tmp_path: Path) -> None:
    from index.kg_stage import build_kg
    from ingest.rejects import RejectLog

    kb = tmp_path / "kb.tsv"
    kb.write_text(KB, encoding="utf-8")
    paths = IndexPaths(tmp_path)
    counts = build_kg(paths, [KgSource(kb, "tsv")], KgOptions(kg_as_docs=True), RejectLog(tmp_path / "r.jsonl"))
    docs = {json.loads(line)["title"]: json.loads(line) for line in paths.dropped_docs.read_text(encoding="utf-8").splitlines()}
    assert counts["kg_documents"] == 3  # heads a, b, c
    assert docs["a"]["text"] == "a r b."
    assert docs["c"]["text"] == "c s d."


def test_options_of_the_previous_build_are_kept(tmp_path: Path, fake_embedder: None) -> None:
    kb, docs, out = small_kg(tmp_path), small_docs(tmp_path), tmp_path / "ix"
    index_cli("--out", out, "--kg", kb, "--kg-format", "tsv", "--kg-keep", "0.5", "--seed", "3", "--dropped-as-docs")
    first = manifest(out)
    kept = kept_triples(out)
    assert 0 < len(kept) < 40

    # adding documents keeps the incomplete KG (and its dropped facts as documents)
    output = index_cli("--out", out, "--docs", docs)
    assert "built docs, vectors; reused kg" in output and "keep_fraction=0.5" in output
    second = manifest(out)
    assert second["stages"]["kg"] == first["stages"]["kg"]
    assert kept_triples(out) == kept
    assert second["build_options"]["kg"] | {} == first["build_options"]["kg"]
    assert second["build_options"]["kg"]["keep_fraction"] == 0.5 and second["build_options"]["kg"]["seed"] == 3
    dropped_docs = first["stages"]["kg"]["counts"]["kg_keep"]["dropped_documents"]
    assert second["counts"]["documents"] == dropped_docs + 2
    # only the two new chunks are embedded: the rest come from the live index's embeddings/
    vectors = second["stages"]["vectors"]["counts"]
    assert vectors["vectors_computed"] == 2 and vectors["vectors_from_previous_build"] > 0

    # documents options are kept too: giving a KG source again does not re-chunk with defaults
    assert "built docs, vectors; reused kg" in index_cli("--out", out, "--chunk-size", "300")
    assert "up to date" in index_cli("--out", out, "--kg", kb, "--kg-format", "tsv")
    assert manifest(out)["build_options"]["docs"]["chunk_size"] == 300

    # an option given overrides the recorded one and rebuilds what depends on it
    output = index_cli("--out", out, "--kg-keep", "1")
    assert "built kg, docs, vectors" in output
    third = manifest(out)
    assert third["build_options"]["kg"]["keep_fraction"] == 1.0 and len(kept_triples(out)) == 40
    assert third["counts"]["documents"] == 2 and not (out / "dropped_docs.jsonl").exists()


def test_replace_forgets_recorded_sources_and_options(tmp_path: Path, fake_embedder: None) -> None:
    kb, out = small_kg(tmp_path), tmp_path / "ix"
    index_cli("--out", out, "--kg", kb, "--kg-format", "tsv", "--kg-keep", "0.5")
    output = index_cli("--out", out, "--kg", kb, "--kg-format", "tsv", "--replace")
    assert "built kg" in output
    assert manifest(out)["build_options"]["kg"]["keep_fraction"] == 1.0 and len(kept_triples(out)) == 40


def test_outputs_of_a_stage_that_no_longer_exists_are_dropped(tmp_path: Path, fake_embedder: None) -> None:
    from engine.access.documents import ParquetDocumentStore, document_stats

    kb, docs, out = small_kg(tmp_path), small_docs(tmp_path), tmp_path / "ix"
    index_cli("--out", out, "--kg", kb, "--kg-format", "tsv", "--docs", docs)
    assert all((out / name).exists() for name in DOC_OUTPUTS if not name.startswith(".rejects"))
    assert "doc_ids" in pq.read_schema(out / "entities.parquet").names
    kg_stage = manifest(out)["stages"]["kg"]

    output = index_cli("--out", out, "--kg", kb, "--kg-format", "tsv", "--replace")
    assert "removed docs, vectors (no longer has inputs); reused kg" in output
    assert [name for name in DOC_OUTPUTS if (out / name).exists()] == []
    after = manifest(out)
    assert set(after["stages"]) == {"kg"} and after["stages"]["kg"] == kg_stage
    assert after["sources"]["docs"] == [] and "documents" not in after["counts"]
    assert "doc_ids" not in pq.read_schema(out / "entities.parquet").names  # no links to gone documents
    assert document_stats(out)["documents"] == 0
    with pytest.raises(IndexError_, match="no documents"):
        ParquetDocumentStore(out)
    stats = CliRunner().invoke(main, ["docs", "stats", "--index", str(out), "--json"])
    assert stats.exit_code == 0 and json.loads(stats.output)["documents"] == 0

    # the same when the documents rendered from the KG are turned off
    index_cli("--out", out, "--kg-as-docs")
    assert (out / "dropped_docs.jsonl").exists() and (out / "chunks.parquet").exists()
    assert "built kg" in index_cli("--out", out, "--no-kg-as-docs")
    assert [name for name in (*DOC_OUTPUTS, "dropped_docs.jsonl") if (out / name).exists()] == []
    assert document_stats(out)["documents"] == 0


def test_vectors_follow_the_embedding_model_content_not_its_path(
    tmp_path: Path, fake_embedder: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "models" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"hidden_size": 8}', encoding="utf-8")
    (model / "modules.json").write_text("[]", encoding="utf-8")
    kb, docs, out = small_kg(tmp_path), small_docs(tmp_path), tmp_path / "ix"
    index_cli("--out", out, "--kg", kb, "--kg-format", "tsv", "--docs", docs, "--embed-model", "models/tiny")
    first = manifest(out)
    assert first["build_options"]["docs"]["embed_model"] == str(model.resolve())  # absolute, not as given
    assert first["embedding"]["model_fingerprint"] == model_fingerprint(model)

    # the same files elsewhere: nothing to rebuild (the new place is recorded)
    shutil.copytree(model, tmp_path / "models" / "copy")
    assert "up to date" in index_cli("--out", out, "--embed-model", "models/copy")
    second = manifest(out)
    assert second["stages"] == first["stages"]
    assert second["build_options"]["docs"]["embed_model"] == str((tmp_path / "models" / "copy").resolve())

    # other model files behind the same path: the vectors are rebuilt, nothing else
    (tmp_path / "models" / "copy" / "config.json").write_text('{"hidden_size": 8, "v": 2}', encoding="utf-8")
    output = index_cli("--out", out)
    assert "built vectors; reused kg, docs" in output
    assert manifest(out)["embedding"]["model_fingerprint"] == model_fingerprint(tmp_path / "models" / "copy")


def freebase_relations(out: Path) -> set[str]:
    prefix = "http://rdf.freebase.com/ns/"
    return {r.removeprefix(prefix) for r in pq.read_table(out / "relations.parquet").column("id").to_pylist()}


def test_freebase_drop_list_is_an_option(tmp_path: Path) -> None:
    fixture, out = FIXTURES / "freebase_entities.nt", tmp_path / "fb"
    index_cli("--out", out, "--kg", fixture, "--kg-format", "freebase")
    default = freebase_relations(out)
    assert "location.location.containedby" in default
    assert not any(r.startswith(FREEBASE_DROP_PREFIXES) for r in default)
    first = manifest(out)
    assert first["build_options"]["kg"]["freebase_drop"] == list(FREEBASE_DROP_PREFIXES)

    assert "built kg" in index_cli("--out", out, "--freebase-drop", "location.", "--freebase-drop", "type.object.key")
    custom = freebase_relations(out)
    assert not any(r.startswith("location.") for r in custom) and "type.object.key" not in custom
    assert "common.topic.notable_types" in custom  # no longer dropped by default
    second = manifest(out)
    assert second["build_options"]["kg"]["freebase_drop"] == ["location.", "type.object.key"]
    assert second["stages"]["kg"]["fingerprint"] != first["stages"]["kg"]["fingerprint"]
    assert "up to date" in index_cli("--out", out)  # the list is kept

    index_cli("--out", out, "--freebase-drop", "none")
    assert {"type.object.key", "common.topic.notable_types", "location.location.containedby"} <= freebase_relations(out)
    labels = pq.read_table(out / "entities.parquet").column("label").to_pylist()
    assert "Harbourview Lighthouse" in labels  # names are metadata, never dropped

    help_text = " ".join(CliRunner().invoke(main, ["index", "--help"]).output.split())
    assert all(prefix in help_text for prefix in FREEBASE_DROP_PREFIXES)
    with pytest.raises(InputError, match="must not be empty"):
        KgOptions(freebase_drop=("common.", " "))
