"""Plain N-Triples left for the store to parse (ingest/nt_scan.py): the tables, counts and rejects
must be exactly those of the path that parses every line in Python ($LOCALKG_KG_PARSER=python)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import index.kg_stage as kg_stage
import ingest.rdf_reader as rdf_reader
from index.build import build_index
from index.kg_stage import KgSource
from index.manifest import read_manifest
from index.paths import IndexPaths
from ingest.base.errors import InputError
from ingest.nt_scan import MetadataRouting, scan_ntriples
from ingest.terms import META_GRAPH

LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
ROUTING = MetadataRouting((LABEL,), frozenset({"en"}), META_GRAPH)
# A self-loop, a duplicate line, literals with spaces and escapes, CRLF, a comment, a blank line,
# labels in and out of the chosen language, escaped, upper case: the plain form the scan reads.
PLAIN = (
    b"# a comment\n"
    b"<http://ex.org/a> <http://ex.org/knows> <http://ex.org/b> .\n"
    b"<http://ex.org/a> <http://ex.org/knows> <http://ex.org/b> .\n"
    b"<http://ex.org/b> <http://ex.org/knows> <http://ex.org/b> .\r\n"
    b"\n"
    b'<http://ex.org/a> <http://ex.org/motto> "say \\"hi\\" \\u00e9 twice" .\n'
    b'<http://ex.org/c> <http://ex.org/age> "7"^^<http://www.w3.org/2001/XMLSchema#integer> .\n'
    b'<http://ex.org/a> <http://www.w3.org/2000/01/rdf-schema#label> "Alice A"@en .\n'
    b'<http://ex.org/a> <http://www.w3.org/2000/01/rdf-schema#label> "Alicia"@es .\n'
    b'<http://ex.org/b> <http://www.w3.org/2004/02/skos/core#altLabel> "Bobby"@en-GB .\n'
    b"<http://ex.org/d> <http://schema.org/description> <http://ex.org/not-a-literal> .\n"
    b'<http://ex.org/c> <http://www.w3.org/2000/01/rdf-schema#label> "Cee"@EN-US .\n'
    b'<http://ex.org/d> <http://www.w3.org/2000/01/rdf-schema#label> "D \\"q\\""@en .\n'
)
# With blank nodes, which send their batch to the Python parser (bulk_load would rename them).
BLANK = (
    b"_:n1 <http://ex.org/knows> <http://ex.org/a> .\n"
    b"<http://ex.org/a> <http://ex.org/likes> _:n1.x .\n"
    b'_:n2 <http://www.w3.org/2000/01/rdf-schema#label> "nobody" .\n'
)
MIXED = PLAIN + BLANK
# Lines that the scan passes as plain but the store's parser rejects (a relative IRI, bad
# language tags, one in a metadata line), between good ones.
STORE_REJECTS = (
    b"<http://ex.org/x> <http://ex.org/knows> <http://ex.org/y> .\n"
    b"<http://ex.org/x> <knows> <http://ex.org/z> .\n"
    b'<http://ex.org/y> <http://ex.org/name> "why"@1 .\n'
    b"<http://ex.org/y> <http://ex.org/knows> <http://ex.org/z> .\n"
    b'<http://ex.org/z> <http://www.w3.org/2000/01/rdf-schema#label> "zed"@en--x .\n'
)


def build_both(tmp_path: Path, data: bytes, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Build `data` with each parser; return the index folder of each."""
    source = tmp_path / "kg.nt"
    source.write_bytes(data)
    out = {}
    for parser in ("store", "python"):
        monkeypatch.setenv("LOCALKG_KG_PARSER", parser)
        out[parser] = tmp_path / parser
        build_index(out[parser], [KgSource(source, "ntriples")], [])
    return out


def same_outputs(out: dict[str, Path]) -> dict:
    """Assert both indexes hold the same tables, counts and rejects; return the counts."""
    store, python = out["store"], out["python"]
    for table in ("entities.parquet", "relations.parquet"):
        assert pq.read_table(store / table).to_pylist() == pq.read_table(python / table).to_pylist(), table
    counts = read_manifest(IndexPaths(store))["stages"]["kg"]["counts"]
    assert counts == read_manifest(IndexPaths(python))["stages"]["kg"]["counts"]
    rejects = [(store / "rejects.jsonl"), (python / "rejects.jsonl")]
    texts = [p.read_text(encoding="utf-8") if p.exists() else "" for p in rejects]
    assert texts[0] == texts[1]
    return counts


def test_scan_reads_degrees_and_splits_metadata_lines() -> None:
    scan = scan_ntriples(PLAIN, ROUTING)
    assert scan is not None
    assert scan.fact_count == 7  # 11 triple lines, 4 of rdfs:label (other metadata: facts here)
    degrees = dict(zip(scan.degrees["id"].to_pylist(), scan.degrees["n"].to_pylist(), strict=True))
    assert degrees == {"http://ex.org/a": 3, "http://ex.org/b": 5, "http://ex.org/c": 1,
                       "http://ex.org/d": 1, "http://ex.org/not-a-literal": 1}
    assert LABEL.encode() not in scan.facts
    # English labels of the plain form are kept as N-Quads; the Spanish and the escaped one are
    # left for Python to route.
    assert (scan.meta_kept, scan.meta_nquads.count(META_GRAPH.encode()), scan.meta_lines.count(b"\n")) == (2, 2, 2)


def test_scan_without_metadata_hands_over_the_batch_itself() -> None:
    data = b"<http://ex.org/a> <http://ex.org/p> <http://ex.org/b> .\n"
    scan = scan_ntriples(data, ROUTING)
    assert scan is not None and scan.facts is data and scan.meta_lines == b""


@pytest.mark.parametrize("line", [
    b"<http://ex.org/a>\t<http://ex.org/p> <http://ex.org/b> .\n",  # a tab between terms
    b"<http://ex.org/a>  <http://ex.org/p> <http://ex.org/b> .\n",  # two spaces
    b"<http://ex.org/a> <http://ex.org/p> <http://ex.org/b>.\n",  # no space before the dot
    b"<http://ex.org/a> <http://ex.org/p> <http://ex.org/b> . # note\n",  # a trailing comment
    b"<http://ex.org/a> <http://ex.org/p>\"x y\" .\n",  # predicate and literal run together
    b"<http://ex.org/\\u0061> <http://ex.org/p> <http://ex.org/b> .\n",  # an escape in an IRI
    b"<http://ex.org/a> <http://ex.org/p> <http://ex.org/caf\xe9> .\n",  # not UTF-8
    b"  # an indented comment\n",
    b"_:n1 <http://ex.org/p> <http://ex.org/b> .\n",  # a blank node: bulk_load would rename it
    b"<http://ex.org/a> <http://ex.org/p> _:n1 .\n",
])
def test_scan_declines_lines_not_in_the_plain_form(line: bytes) -> None:
    assert scan_ntriples(b"<http://ex.org/a> <http://ex.org/p> <http://ex.org/c> .\n" + line, ROUTING) is None


def test_both_parsers_build_the_same_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = same_outputs(build_both(tmp_path, MIXED, monkeypatch))
    assert counts["triples"] == 6  # the duplicate once; skos/schema lines are metadata, not facts
    assert counts["sources"][0]["facts_read"] == 7  # lines, the duplicate twice
    assert counts["sources"][0]["metadata"] == 4  # a blank node's label is not kept
    assert counts["filtered"] == {"other-language metadata": 2}
    entities = {e["id"]: e for e in pq.read_table(tmp_path / "store" / "entities.parquet").to_pylist()}
    assert (entities["http://ex.org/a"]["label"], entities["http://ex.org/a"]["degree"]) == ("Alice A", 5)
    assert (entities["http://ex.org/b"]["aliases"], entities["http://ex.org/b"]["degree"]) == (["Bobby"], 4)
    assert (entities["http://ex.org/c"]["label"], entities["http://ex.org/d"]["label"]) == ("Cee", 'D "q"')


def test_store_rejected_batch_is_parsed_again_and_rejects_name_their_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert scan_ntriples(STORE_REJECTS, ROUTING) is not None  # so the store is what rejects them
    # Small batches: the bad lines fall in the middle of several.
    monkeypatch.setattr(rdf_reader, "BATCH_BYTES", 150)
    monkeypatch.setattr(rdf_reader, "UNPARSED_BATCH_BYTES", 150)
    settled: list[bool] = []  # per unparsed batch: whether the store loaded it
    settle = kg_stage._Load._settle
    monkeypatch.setattr(kg_stage._Load, "_settle", lambda self, batch, loaded, tally: (
        settled.append(loaded), settle(self, batch, loaded, tally)))
    lines = MIXED.splitlines(keepends=True)
    out = build_both(tmp_path, b"".join(lines[:5]) + STORE_REJECTS + b"".join(lines[5:]), monkeypatch)
    assert True in settled and False in settled
    counts = same_outputs(out)
    found = [json.loads(line) for line in (out["store"] / "rejects.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["line"], r["text"][:30]) for r in found] == [
        (7, "<http://ex.org/x> <knows> <htt"), (8, '<http://ex.org/y> <http://ex.o'), (10, '<http://ex.org/z> <http://www.')]
    assert counts["sources"][0]["rejects"] == 3
    assert counts["triples"] == 8  # MIXED's 6 and x->y, y->z


def test_kg_keep_and_bad_parser_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "kg.nt"
    source.write_bytes(MIXED)
    monkeypatch.setenv("LOCALKG_KG_PARSER", "rust")
    with pytest.raises(InputError, match="LOCALKG_KG_PARSER"):
        build_index(tmp_path / "bad", [KgSource(source, "ntriples")], [])
    monkeypatch.setenv("LOCALKG_KG_PARSER", "store")  # --kg-keep samples parsed facts: Python parses
    build_index(tmp_path / "keep", [KgSource(source, "ntriples")], [], kg_options={"keep_fraction": 0.5, "seed": 1})
    kept = read_manifest(IndexPaths(tmp_path / "keep"))["stages"]["kg"]["counts"]["kg_keep"]
    assert kept["dropped"] > 0


def test_blank_nodes_keep_their_labels_in_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The entity table names `_:n1`; the store must hold that node, one node across batches."""
    import pyoxigraph as ox

    monkeypatch.setattr(rdf_reader, "BATCH_BYTES", 60)
    monkeypatch.setattr(rdf_reader, "UNPARSED_BATCH_BYTES", 60)
    out = build_both(tmp_path, PLAIN + BLANK + b"_:n1 <http://ex.org/knows> <http://ex.org/c> .\n", monkeypatch)
    same_outputs(out)
    for index in out.values():
        store = ox.Store.read_only(str(index / "kg"))
        subjects = {q.subject for q in store.quads_for_pattern(None, ox.NamedNode("http://ex.org/knows"), None)}
        assert ox.BlankNode("n1") in subjects and sum(isinstance(t, ox.BlankNode) for t in subjects) == 1
        del store


def test_a_batch_the_scan_declines_is_parsed_in_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch that the scan declines (tabs, a trailing comment, no space before the dot) is
    parsed in Python, with the same tables."""
    data = (b"<http://ex.org/a>\t<http://ex.org/p>\t<http://ex.org/b> .\n"
            b"<http://ex.org/b> <http://ex.org/p> <http://ex.org/c> . # c\n"
            b"<http://ex.org/c> <http://ex.org/q> <http://ex.org/a>.\n")
    assert scan_ntriples(data, ROUTING) is None
    counts = same_outputs(build_both(tmp_path, data, monkeypatch))
    assert (counts["triples"], counts["entities"]) == (3, 3)
