"""Index builds are atomic and incremental; --kg-keep drops a seeded fraction of facts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import index.kg_stage
from index.build import build_index
from index.kg_stage import KgSource
from index.manifest import read_manifest
from index.paths import IndexPaths
from ingest.kg_readers import KgOptions

KB = "a\tr\tb\nb\tr\tc\nc\ts\td\n"


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
    from ingest.errors import IndexError_

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
    counts = []
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        out = tmp_path / name
        build_index(out, [KgSource(kb, "tsv")], [], KgOptions(keep_fraction=0.5, seed=seed))
        counts.append(read_manifest(IndexPaths(out))["stages"]["kg"]["counts"])
    assert counts[0]["triples"] == counts[1]["triples"]
    assert counts[0]["kg_keep"] == {"fraction": 0.5, "seed": 1, "dropped": 2839 - counts[0]["triples"]}
    assert 0.4 * 2839 < counts[0]["triples"] < 0.6 * 2839
    assert counts[2]["triples"] != counts[0]["triples"] or counts[2]["kg_keep"]["seed"] == 2


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
