"""Real dump excerpts as a new user meets them: Wikidata relations that read as words (or are
counted when the dump has no label), external identifiers left out and counted, empty sources
and binary files refused with their reasons, CSV/TSV header rows and delimiters."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import cli
from index.build import build_index
from index.kg_stage import KgSource
from index.manifest import read_manifest
from index.paths import IndexPaths
from ingest.base.errors import InputError
from ingest.tsv import looks_like_header

WDT = "http://www.wikidata.org/prop/direct/"
WD = "http://www.wikidata.org/entity/"
# Property entities as the full Turtle dump (latest-all.ttl) writes them; the excerpts hold none.
PROPERTY_DECLARATIONS = """\
@prefix wd: <http://www.wikidata.org/entity/> .
@prefix wikibase: <http://wikiba.se/ontology#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix schema: <http://schema.org/> .
wd:P19 a wikibase:Property ; rdfs:label "place of birth"@en ; schema:name "place of birth"@en ;
    wikibase:propertyType wikibase:WikibaseItem .
wd:P569 a wikibase:Property ; schema:name "date of birth"@en ; wikibase:propertyType wikibase:Time .
wd:P213 a wikibase:Property ; rdfs:label "ISNI"@en ; wikibase:propertyType wikibase:ExternalId .
"""


def kg_counts(out: Path) -> dict:
    return read_manifest(IndexPaths(out))["stages"]["kg"]["counts"]


def relations(out: Path) -> dict[str, str]:
    table = pq.read_table(out / "relations.parquet").to_pydict()
    return dict(zip(table["id"], table["label"], strict=True))


@pytest.fixture(scope="module")
def q42(shared_data: Path) -> Path:
    return shared_data / "dumps" / "wikidata_rdf" / "Q42.ttl"


# --- Wikidata Turtle --------------------------------------------------------------------------


def test_q42_external_ids_left_out_and_unlabeled_relations_counted(tmp_path: Path, q42: Path) -> None:
    out = tmp_path / "q42"
    build_index(out, [KgSource(q42, "wikidata")], [])
    counts = kg_counts(out)
    # 25 properties have a wdtn: (normalised) value in Q42.ttl: external ids; 27 wdt: statements
    assert counts["external_ids"] == {"properties": 25, "statements_left_out": 27, "kept": False}
    assert counts["triples"] == 296 - 27
    labels = relations(out)
    assert WDT + "P214" not in labels  # VIAF ID
    assert labels[WDT + "P19"] == "P19"  # no label in the excerpt: the id, as Wikidata shows it
    assert counts["unlabeled_relations"]["count"] == counts["relations"] == len(labels)

    kept = tmp_path / "kept"
    build_index(kept, [KgSource(q42, "wikidata")], [], {"keep_external_ids": True})
    assert kg_counts(kept)["triples"] == 296
    assert WDT + "P214" in relations(kept)
    assert kg_counts(kept)["external_ids"]["kept"] is True


def test_property_labels_and_declarations_from_the_dump(tmp_path: Path, q42: Path) -> None:
    props = tmp_path / "properties.ttl"
    props.write_text(PROPERTY_DECLARATIONS, encoding="utf-8")
    out = tmp_path / "q42"
    build_index(out, [KgSource(q42, "wikidata"), KgSource(props, "wikidata")], [])
    labels = relations(out)
    assert labels[WDT + "P19"] == "place of birth"
    assert labels[WDT + "P569"] == "date of birth"  # from schema:name
    assert WDT + "P213" not in labels  # declared wikibase:ExternalId (no wdtn: in Q42.ttl)
    counts = kg_counts(out)
    assert counts["external_ids"]["statements_left_out"] == 28
    assert counts["unlabeled_relations"]["count"] == counts["relations"] - 2
    entity_ids = set(pq.read_table(out / "entities.parquet").column("id").to_pylist())
    assert WD + "P19" not in entity_ids  # a named property is a relation, not an entity

    result = CliRunner().invoke(cli.main, ["kg", "relations", "--index", str(out), "--entity", "Q42"])
    assert result.exit_code == 0, result.output
    assert "-> place of birth  <http://www.wikidata.org/prop/direct/P19>" in result.output
    result = CliRunner().invoke(
        cli.main, ["kg", "tails", "--index", str(out), "--entity", "Douglas Adams", "--relation", "date of birth", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert [t["label"] for t in json.loads(result.output)["tails"]] == ["1952-03-11T00:00:00Z"]


def test_build_summary_says_what_was_left_out(tmp_path: Path, q42: Path) -> None:
    result = CliRunner().invoke(cli.main, ["index", "--out", str(tmp_path / "q42"), "--kg", str(q42), "--kg-format", "wikidata"])
    assert result.exit_code == 0, result.output
    assert "external identifiers: 27 statements of 25 recognised properties left out" in result.output
    assert "240 of 240 relations have no label in the dump: shown as their property id" in result.output
    assert "non-truthy predicate 2,191" in result.output


# --- Wikidata JSON ----------------------------------------------------------------------------


def test_wikidata_json_external_ids_by_datatype_and_property_labels(tmp_path: Path, shared_data: Path) -> None:
    head = shared_data / "dumps" / "wikidata_json" / "latest-all.head50.json"
    external = set()
    for line in head.read_bytes().splitlines()[1:]:
        for prop, statements in json.loads(line.rstrip(b",")).get("claims", {}).items():
            if any(s["mainsnak"].get("datatype") == "external-id" for s in statements):
                external.add(WDT + prop)
    # a property entity in the dump's own line format names its relation
    dump = tmp_path / "with-property.json"
    prop = {"type": "property", "datatype": "wikibase-item", "id": "P17", "labels": {"en": {"language": "en", "value": "country"}},
            "claims": {}}
    dump.write_bytes(head.read_bytes() + json.dumps(prop).encode() + b",\n")
    out = tmp_path / "wdj"
    build_index(out, [KgSource(dump, "wikidata-json")], [])
    counts = kg_counts(out)
    assert counts["external_ids"]["properties"] == len(external) == 205
    assert counts["filtered"]["external-id statement"] == counts["external_ids"]["statements_left_out"] > 0
    labels = relations(out)
    assert not external & set(labels)
    assert labels[WDT + "P17"] == "country"


# --- empty sources, binary files --------------------------------------------------------------


def test_freebase_excerpt_fails_plainly_and_keeps_the_previous_index(tmp_path: Path, shared_data: Path, q42: Path) -> None:
    out = tmp_path / "ix"
    build_index(out, [KgSource(q42, "wikidata")], [])
    before = (out / "manifest.json").read_bytes()
    freebase = shared_data / "dumps" / "freebase" / "fb-rdf-10k-head.nt"
    result = CliRunner().invoke(cli.main, ["index", "--out", str(out), "--kg", str(freebase), "--kg-format", "freebase"])
    assert result.exit_code == 2
    assert f"{freebase.resolve()}: 0 facts read (freebase): non-entity subject 10,000" in result.output
    assert "schema section" in result.output and "--allow-empty" in result.output
    assert (out / "manifest.json").read_bytes() == before

    allowed = tmp_path / "allowed"
    result = CliRunner().invoke(
        cli.main, ["index", "--out", str(allowed), "--kg", str(freebase), "--kg-format", "freebase", "--allow-empty"]
    )
    assert result.exit_code == 0, result.output
    assert "NOTHING from this source: non-entity subject 10,000" in result.output


def test_a_source_of_rejected_lines_fails_with_its_top_reason(tmp_path: Path) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text("just one field\nanother\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.tsv: 0 facts read \(tsv\): rejected: expected 3 non-empty fields, got 1 2"):
        build_index(tmp_path / "ix", [KgSource(path, "tsv")], [])
    assert not (tmp_path / "ix").exists()


@pytest.mark.parametrize("fmt", ["auto", "ntriples", "turtle", "tsv", "wikidata-json"])
def test_binary_file_is_an_error(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "picture.nt"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    with pytest.raises(InputError, match=r"picture.nt: is a binary file, not a text dump"):
        build_index(tmp_path / "ix", [KgSource(path, fmt)], [])


# --- CSV / TSV --------------------------------------------------------------------------------


def test_csv_header_row_is_never_a_fact(tmp_path: Path) -> None:
    path = tmp_path / "companies.csv"
    path.write_text('source,relation,target\nNorvale Motors,subsidiary_of,"Halden Group, Inc."\n', encoding="utf-8")
    out = tmp_path / "ix"
    build_index(out, [KgSource(path, "tsv")], [])
    counts = kg_counts(out)
    assert counts["triples"] == 1
    assert counts["filtered"] == {"header row": 1}
    labels = set(pq.read_table(out / "entities.parquet").column("label").to_pylist())
    assert labels == {"Norvale Motors", "Halden Group, Inc."}


def test_header_and_delimiter_options(tmp_path: Path) -> None:
    path = tmp_path / "graph.txt"
    path.write_text("a;knows;b\nb;knows;c\n", encoding="utf-8")
    result = CliRunner().invoke(cli.main, ["index", "--out", str(tmp_path / "no"), "--kg", str(path), "--kg-format", "tsv",
                                           "--delimiter", "semicolon"])
    assert result.exit_code == 0, result.output
    assert kg_counts(tmp_path / "no")["triples"] == 2
    result = CliRunner().invoke(cli.main, ["index", "--out", str(tmp_path / "yes"), "--kg", str(path), "--kg-format", "tsv",
                                           "--delimiter", ";", "--header"])
    assert result.exit_code == 0, result.output
    assert kg_counts(tmp_path / "yes")["triples"] == 1  # the first row forced to be a header
    header = tmp_path / "header.tsv"
    header.write_text("subject\tpredicate\tobject\nx\tsubject\ty\n", encoding="utf-8")
    build_index(tmp_path / "forced", [KgSource(header, "tsv")], [], {"tsv_header": "no"})
    assert kg_counts(tmp_path / "forced")["triples"] == 2  # --no-header: loaded as the user asked
    result = CliRunner().invoke(cli.main, ["index", "--out", str(tmp_path / "bad"), "--kg", str(path), "--delimiter", "::"])
    assert result.exit_code == 2 and "delimiter must be one character" in result.output


def test_pathquestion_first_fact_is_not_taken_for_a_header(tmp_path: Path, shared_data: Path) -> None:
    kb = shared_data / "pathquestion" / "3H-kb.txt"
    first = kb.read_text(encoding="utf-8").splitlines()[0].split("\t")
    assert not looks_like_header(first)
    out = tmp_path / "pq"
    build_index(out, [KgSource(kb, "tsv")], [])
    assert kg_counts(out)["filtered"] == {}
    assert kg_counts(out)["triples"] == 2839  # every line of the KB (../shared/data/README.md)
    from engine.access.open_kg import open_kg
    from ingest.terms import mint_entity, mint_relation

    kg = open_kg(out)
    first_fact = kg.tails(mint_entity("eleanor_of_provence"), mint_relation("children"), "out")
    assert mint_entity("beatrice_of_england") in first_fact


def test_header_names_are_recognised() -> None:
    assert looks_like_header(["head", "relation", "tail"])
    assert looks_like_header(["Subject", "Predicate", "Object"])
    assert looks_like_header(["company", "relation", "related company"])
    assert not looks_like_header(["joan_crawford", "spouse", "phillip_terry"])
    assert not looks_like_header(["head", "tail"])


# --- progress ---------------------------------------------------------------------------------


def test_plain_progress_lines_when_not_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from ingest.base.progress import progress_bar

    monkeypatch.setenv("LOCALKG_PROGRESS_SECONDS", "0.01")
    with progress_bar("embedding chunks", 300, "items") as bar:
        for _ in range(3):
            time.sleep(0.02)
            bar.advance(100)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("embedding chunks: 100/300 (33%) items, ")
    assert lines[-1].startswith("embedding chunks: 300/300 (100%) items, ") and ", done" in lines[-1]


def test_embedding_progress_moves_per_batch_not_per_shard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextlib import contextmanager

    import index.vectors as vectors

    advanced: list[float] = []

    class Recorder:
        def advance(self, amount: float = 1, status: str | None = None) -> None:
            advanced.append(amount)

    @contextmanager
    def recording_bar(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        yield Recorder()

    class TinyEmbedder:  # control flow only: the vectors' values do not matter here
        name, dim, fingerprint = "tiny", 2, "tiny"

        def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
            return np.ones((len(texts), 2), dtype=np.float32)

    monkeypatch.setattr(vectors, "progress_bar", recording_bar)
    texts = [f"text {i}" for i in range(600)]
    shards, _, _ = vectors.embed_in_shards("chunks", lambda: iter([texts]), 600, TinyEmbedder(), tmp_path, 4096)
    assert advanced == [256, 256, 88]
    assert np.load(shards[0]).shape == (600, 2)
