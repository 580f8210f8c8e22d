"""KG ingest on real dump excerpts and on bad input: rejects are counted, named, never fatal."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from index.build import build_index
from index.kg_stage import KgSource
from index.manifest import read_manifest
from index.paths import IndexPaths
from ingest.base.errors import InputError
from ingest.kg_readers import detect_kg_format

FIXTURES = Path(__file__).parent / "fixtures"
GOOD = b'<http://ex.org/a> <http://ex.org/knows> <http://ex.org/b> .\n<http://ex.org/a> <http://www.w3.org/2000/01/rdf-schema#label> "Alice"@en .\n'


def build(tmp_path: Path, path: Path, fmt: str) -> dict:
    out = tmp_path / "ix"
    build_index(out, [KgSource(path, fmt)], [])
    return read_manifest(IndexPaths(out))["stages"]["kg"]["counts"]


def rejects(tmp_path: Path) -> list[dict]:
    text = (tmp_path / "ix" / "rejects.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_ntriples_bad_lines_are_rejected_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "mixed.nt"
    path.write_bytes(
        GOOD
        + b"<http://ex.org/a> <http://ex.org/knows> \"unterminated .\n"
        + b"<http://ex.org/b> <http://ex.org/knows> <http://ex.org/c> .\n"
        + b"<http://ex.org/c> <http://ex.org/name> \"caf\xe9\" .\n"
        + b"not rdf\n"
    )
    counts = build(tmp_path, path, "ntriples")
    assert counts["triples"] == 2  # a->b, b->c; the label is metadata, not a fact
    assert counts["entities"] == 3
    found = rejects(tmp_path)
    assert [r["line"] for r in found] == [3, 5, 6]
    assert all(r["file"] == str(path) for r in found)
    assert found[1]["reason"].startswith("invalid UTF-8")


def test_gzip_and_bzip2_are_read(tmp_path: Path) -> None:
    for name, data in (("a.nt.gz", gzip.compress(GOOD)), ("a.nt.bz2", bz2.compress(GOOD))):
        path = tmp_path / name
        path.write_bytes(data)
        assert build(tmp_path / name.replace(".", "_"), path, "auto")["triples"] == 1


def test_truncated_gzip_is_a_clear_error_and_leaves_no_index(tmp_path: Path) -> None:
    path = tmp_path / "cut.nt.gz"
    path.write_bytes(gzip.compress(GOOD * 2000)[:-200])
    with pytest.raises(InputError, match=r"cut\.nt\.gz.*truncated"):
        build(tmp_path, path, "ntriples")
    assert not (tmp_path / "ix").exists()


@pytest.mark.parametrize("kind", ["missing", "empty", "directory"])
def test_unusable_paths_are_named(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "input.nt"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "directory":
        path.mkdir()
    with pytest.raises(InputError, match=str(path)):
        build(tmp_path, path, "ntriples")


def test_turtle_syntax_error_is_skipped_and_parsing_resumes(tmp_path: Path) -> None:
    path = tmp_path / "x.ttl"
    path.write_text(
        "@prefix ex: <http://ex.org/> .\nex:a ex:p ex:b .\nex:a ex:p ex:c ex:d .\nex:e ex:p ex:f .\n", encoding="utf-8"
    )
    counts = build(tmp_path, path, "turtle")
    assert counts["triples"] >= 2
    assert rejects(tmp_path)[0]["line"] == 3


def test_nquads_graph_names_are_folded_into_the_default_graph(tmp_path: Path) -> None:
    path = tmp_path / "x.nq"
    path.write_bytes(b"<http://ex.org/a> <http://ex.org/p> <http://ex.org/b> <http://ex.org/g1> .\n<http://ex.org/a> <http://ex.org/p> <http://ex.org/b> <http://ex.org/g2> .\n")
    assert build(tmp_path, path, "nquads")["triples"] == 1


def test_freebase_profile_on_own_fixture(tmp_path: Path) -> None:
    counts = build(tmp_path, FIXTURES / "freebase_entities.nt", "freebase")
    # 9 facts: containedby x2, capital, population (CVT), CVT number + year, height literal,
    # headquarters, founders (IRI mended). Keys, types, common.* and freebase.* are dropped.
    assert counts["triples"] == 9
    assert counts["filtered"]["dropped predicate"] == 4
    assert counts["filtered"]["mended line"] == 2
    assert [r["line"] for r in rejects(tmp_path)] == [21, 22, 24]
    rows = {r["id"].rsplit("/", 1)[1]: r for r in pq.read_table(tmp_path / "ix" / "entities.parquet").to_pylist()}
    assert rows["m.0test1"]["label"] == "Harbourview Lighthouse"  # English name, French dropped
    assert rows["m.0test1"]["aliases"] == ["The Old Light"]
    assert rows["m.0test4"]["label"] == "Calder $ Sons Ltd"  # mended escape
    assert rows["g.11cvt001"]["label"] is None  # CVT nodes have no name
    assert rows["m.0test2"]["degree"] == 5


def test_freebase_real_head_is_schema_only(tmp_path: Path, shared_data: Path) -> None:
    path = shared_data / "dumps" / "freebase" / "fb-rdf-10k-head.nt"
    assert detect_kg_format(path) == "freebase"
    with pytest.raises(InputError, match=r"fb-rdf-10k-head.nt: 0 facts read \(freebase\): non-entity subject 10,000"):
        build(tmp_path, path, "freebase")  # an empty result is not a success
    assert not (tmp_path / "ix").exists()
    out = tmp_path / "ix"
    build_index(out, [KgSource(path, "freebase")], [], {"allow_empty": True})
    counts = read_manifest(IndexPaths(out))["stages"]["kg"]["counts"]
    assert counts["triples"] == 0
    assert counts["filtered"]["non-entity subject"] == 10_000
    assert not (tmp_path / "ix" / "rejects.jsonl").read_text()


def test_wikidata_json_head(tmp_path: Path, shared_data: Path) -> None:
    path = shared_data / "dumps" / "wikidata_json" / "latest-all.head50.json"
    out = tmp_path / "ix"
    build_index(out, [KgSource(path, "wikidata-json")], [], {"keep_external_ids": True})
    counts = read_manifest(IndexPaths(out))["stages"]["kg"]["counts"]
    assert counts["triples"] > 3000
    assert counts["relations"] > 400
    table = pq.read_table(tmp_path / "ix" / "entities.parquet").to_pylist()
    scotland = next(r for r in table if r["id"] == "http://www.wikidata.org/entity/Q22")
    assert scotland["label"] == "Scotland"
    assert scotland["wikipedia_title"] == "Scotland"
    assert scotland["aliases"]
    relations = pq.read_table(tmp_path / "ix" / "relations.parquet").to_pylist()
    assert any(r["id"] == "http://www.wikidata.org/prop/direct/P31" for r in relations)


def test_wikidata_turtle_keeps_truthy_edges_and_sitelinks(tmp_path: Path, shared_data: Path) -> None:
    path = shared_data / "dumps" / "wikidata_rdf" / "Q42.ttl"
    counts = build(tmp_path, path, "wikidata")
    assert counts["triples"] > 100
    assert counts["filtered"]["non-truthy predicate"] > 0  # p:/ps:/pq: statement structure skipped
    rows = {r["id"]: r for r in pq.read_table(tmp_path / "ix" / "entities.parquet").to_pylist()}
    q42 = rows["http://www.wikidata.org/entity/Q42"]
    assert q42["label"] == "Douglas Adams"
    assert q42["wikipedia_title"] == "Douglas Adams"
    assert q42["description"]
    relations = pq.read_table(tmp_path / "ix" / "relations.parquet").to_pylist()
    assert all(r["id"].startswith("http://www.wikidata.org/prop/direct/") for r in relations)


def test_pathquestion_tsv(tmp_path: Path, shared_data: Path) -> None:
    counts = build(tmp_path, shared_data / "pathquestion" / "2H-kb.txt", "tsv")
    assert counts["triples"] == 1211
    assert counts["relations"] > 5


def test_tsv_wrong_column_count_rejected(tmp_path: Path) -> None:
    path = tmp_path / "kb.tsv"
    path.write_text("a\tr\tb\nbroken line\nc\tr\n\nd\tr_reverse\ta\n", encoding="utf-8")
    counts = build(tmp_path, path, "tsv")
    assert counts["triples"] == 2
    assert [r["line"] for r in rejects(tmp_path)] == [2, 3]


def test_metaqa_full_kb(metaqa_index: Path) -> None:
    counts = read_manifest(IndexPaths(metaqa_index))["stages"]["kg"]["counts"]
    assert counts["triples"] == 133_582
    assert counts["entities"] == 43_234
    assert counts["relations"] == 9  # `_reverse` relations are not stored twice


def test_plain_ntriples_fast_path_routes_like_the_slow_one(tmp_path: Path) -> None:
    """A batch without metadata predicates skips routing; a label spelt with a \\u escape in
    its IRI must not sneak in as a fact through that shortcut."""
    plain = tmp_path / "plain.nt"
    plain.write_bytes(b"<http://ex.org/a> <http://ex.org/knows> <http://ex.org/b> .\n"
                      b"<http://ex.org/b> <http://ex.org/age> \"7\" .\n")
    counts = build(tmp_path / "p", plain, "ntriples")
    assert (counts["triples"], counts["entities"]) == (2, 2)
    escaped = tmp_path / "escaped.nt"
    escaped.write_bytes(b"<http://ex.org/a> <http://ex.org/knows> <http://ex.org/b> .\n"
                        b"<http://ex.org/a> <http://www.w3.org/2000/01/rdf-schema\\u0023label> \"Ay\"@en .\n")
    counts = build(tmp_path / "e", escaped, "ntriples")
    assert counts["triples"] == 1  # the label is metadata
    table = pq.read_table(tmp_path / "e" / "ix" / "entities.parquet").to_pydict()
    assert dict(zip(table["id"], table["label"], strict=True))["http://ex.org/a"] == "Ay"
