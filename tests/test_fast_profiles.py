"""Wikidata truthy and Freebase N-Triples routed by the scans (ingest/profile_scan.py) and parsed
by the store: the store, the tables, the manifest counts and the rejects must be exactly those of
the path that parses and routes every line in Python ($LOCALKG_KG_PARSER=python). Also the
generic profile's scan on the same kind of lines (ingest/nt_scan.py)."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyoxigraph as ox
import pytest

import ingest.rdf_reader as rdf_reader
from bench.gen_dump_lines import write_dump
from index.build import build_index
from index.kg_stage import KgSource
from index.manifest import read_manifest
from index.paths import IndexPaths
from ingest.kg_batch import KgBatch
from ingest.kg_profiles import WikidataProfile
from ingest.line_terms import SURE_BLANK, SURE_BODY, SURE_IRI
from ingest.profile_scan import WikidataScan

FIXTURES = Path(__file__).parent / "fixtures"
WD, WDT, WDTN = "http://www.wikidata.org/entity/", "http://www.wikidata.org/prop/direct/", "http://www.wikidata.org/prop/direct-normalized/"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
FB = "http://rdf.freebase.com/ns/"

# Wikidata truthy lines a real dump has, and some it should not: comments, a blank line, CRLF,
# labels in other languages and in two English variants, escapes, an external id before and after
# its `wdtn:` value and after a declaration, a property's schema:name, sitelinks (a chosen and
# another language, a percent-encoded title), a blank-node value, a value that is no entity.
WIKIDATA_LINES = f"""\
# a comment
<{WD}P214> <http://wikiba.se/ontology#propertyType> <http://wikiba.se/ontology#ExternalId> .
<{WD}P19> <http://schema.org/name> "place of birth"@en .
<{WD}Q42> <{WDT}P19> <{WD}Q350> .
<{WD}Q42> <{WDT}P214> "113230702" .
<{WD}Q42> <{WDT}P646> "/m/0282x" .
<{WD}Q42> <{WDTN}P646> <http://g.co/kg/m/0282x> .
<{WD}Q42> <{WDT}P646> "/m/0282y" .

<{WD}Q42> <{LABEL}> "Douglas Adams"@en .\r
<{WD}Q42> <{LABEL}> "Douglas N. Adams"@en-gb .
<{WD}Q42> <{LABEL}> "Дуглас Адамс"@ru .
<{WD}Q42> <http://www.w3.org/2004/02/skos/core#prefLabel> "Douglas Adams"@en .
<{WD}Q42> <http://schema.org/description> "English writer \\"and\\" humorist \\u00e9"@en .
<{WD}Q42> <http://schema.org/description> "écrivain"@fr .
<{WD}Q42> <http://www.w3.org/2004/02/skos/core#altLabel> "DNA"@EN .
<{WD}Q42> <{WDT}P1476> "The Hitchhiker's Guide"@en .
<{WD}Q42> <{WDT}P1476> "Per Anhalter"@de .
<{WD}Q42> <{WDT}P569> "1952-03-11T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
<{WD}Q42> <{WDT}P20> _:b0 .
<{WD}Q42> <{WDT}P856> <https://douglasadams.com/> .
<https://en.wikipedia.org/wiki/Douglas_Adams> <http://schema.org/about> <{WD}Q42> .
<https://en.wikipedia.org/wiki/Caf%C3%A9_%28place%29> <http://schema.org/about> <{WD}Q350> .
<https://de.wikipedia.org/wiki/Douglas_Adams> <http://schema.org/about> <{WD}Q42> .
<https://en.wikipedia.org/wiki/Douglas_Adams> <http://schema.org/inLanguage> "en" .
<https://www.wikidata.org/wiki/Special:EntityData/Q42> <http://schema.org/version> "1"^^<http://www.w3.org/2001/XMLSchema#integer> .
<{WD}Q350> <{WDT}P214> "1234" .
<{WD}Q350> <{LABEL}> "Cambridge"@en .
""".encode()
# Lines that no parser takes, each where a profile would filter it out (so only a check finds
# it): not a triple, a relative IRI, a bad language tag, a fourth term, an unknown escape.
BAD_LINES = [
    b"this line is not a triple at all\n",
    f"<{WD}Q42> <{LABEL}> \"Douglas\"@1de .\n".encode(),
    f"<relative> <{WDT}P31> <{WD}Q5> .\n".encode(),
    f"<{WD}Q42> <{WDT}P31> <{WD}Q5> <http://ex.org/g> .\n".encode(),
    f"<{WD}Q42> <http://schema.org/description> \"bad \\$ escape\"@de .\n".encode(),
]
# Freebase lines (tab-separated): names in several languages, dropped namespaces, a key, a CVT,
# a type, a schema-section subject, an rdfs:label, a literal in another language.
FREEBASE_LINES = "".join(f"{s}\t{p}\t{o}\t.\n" for s, p, o in [
    (f"<{FB}m.01>", f"<{FB}type.object.name>", '"Harbourview"@en'),
    (f"<{FB}m.01>", f"<{FB}type.object.name>", '"Phare"@fr'),
    (f"<{FB}m.01>", f"<{FB}common.topic.alias>", '"The Old Light"@en-GB'),
    (f"<{FB}m.01>", f"<{FB}common.topic.description>", '"A \\"lighthouse\\"."@en'),
    (f"<{FB}m.01>", f"<{FB}type.object.type>", f"<{FB}architecture.lighthouse>"),
    (f"<{FB}m.01>", f"<{FB}common.topic.notable_types>", f"<{FB}m.01xr>"),
    (f"<{FB}m.01>", f"<{FB}user.x.default_domain.y>", f"<{FB}m.02>"),
    (f"<{FB}m.01>", f"<{FB}freebase.valuenotation.is_reviewed>", f"<{FB}location.location.containedby>"),
    (f"<{FB}m.01>", "<http://rdf.freebase.com/key/wikipedia.en>", '"Harbourview"'),
    (f"<{FB}m.01>", f"<{FB}location.location.containedby>", f"<{FB}m.02>"),
    (f"<{FB}m.01>", "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>", f"<{FB}architecture.lighthouse>"),
    (f"<{FB}m.01>", f"<{FB}architecture.structure.height_meters>", '"31.5"^^<http://www.w3.org/2001/XMLSchema#float>'),
    (f"<{FB}m.01>", f"<{FB}film.film.tagline>", '"Une lumière"@fr'),
    (f"<{FB}m.02>", f"<{LABEL}>", '"Port Calder"@en'),
    (f"<{FB}m.02>", f"<{FB}location.statistical_region.population>", f"<{FB}g.11cvt>"),
    (f"<{FB}g.11cvt>", f"<{FB}measurement_unit.dated_integer.number>", '"48210"^^<http://www.w3.org/2001/XMLSchema#int>'),
    (f"<{FB}film.film>", f"<{FB}type.object.name>", '"Film"@en'),
    ("_:cvt", f"<{FB}location.location.containedby>", f"<{FB}m.02>"),
]).encode()


def build_both(tmp_path: Path, data: bytes, fmt: str, monkeypatch: pytest.MonkeyPatch,
               options: dict[str, Any] | None = None, suffix: str = ".nt") -> dict[str, Path]:
    """Build `data` with each parser; return the index folder of each."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    source = tmp_path / f"kg{suffix}"
    source.write_bytes(data)
    out = {}
    for parser in ("store", "python"):
        monkeypatch.setenv("LOCALKG_KG_PARSER", parser)
        out[parser] = tmp_path / parser
        build_index(out[parser], [KgSource(source, fmt)], [], {"allow_empty": True, **(options or {})})
    return out


def same_outputs(out: dict[str, Path]) -> dict[str, Any]:
    """Assert both indexes hold the same quads, tables, counts and rejects; return the counts."""
    store, python = out["store"], out["python"]
    for table in ("entities.parquet", "relations.parquet"):
        assert pq.read_table(store / table).to_pylist() == pq.read_table(python / table).to_pylist(), table
    counts = read_manifest(IndexPaths(store))["stages"]["kg"]["counts"]
    assert counts == read_manifest(IndexPaths(python))["stages"]["kg"]["counts"]
    texts = [(p / "rejects.jsonl").read_text(encoding="utf-8") if (p / "rejects.jsonl").exists() else "" for p in (store, python)]
    assert texts[0] == texts[1]
    quads = []
    for index in (store, python):
        kg = ox.Store.read_only(str(index / "kg"))
        quads.append(sorted(str(q) for q in kg))
        del kg
    assert quads[0] == quads[1]
    return dict(counts)


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Per batch a profile scan was offered: whether it routed the batch (False: declined)."""
    seen: list[bool] = []
    routed = rdf_reader._routed_batch

    def record(*args: Any) -> KgBatch | None:
        batch = routed(*args)
        seen.append(batch is not None)
        return batch

    monkeypatch.setattr(rdf_reader, "_routed_batch", record)
    return seen


def small_batches(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    monkeypatch.setattr(rdf_reader, "BATCH_BYTES", size)
    monkeypatch.setattr(rdf_reader, "UNPARSED_BATCH_BYTES", size)


@pytest.mark.parametrize(("kind", "fmt"), [("wikidata", "wikidata"), ("freebase", "freebase"), ("wikidata", "ntriples")])
def test_generated_dumps_build_the_same_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scans: list[bool],
                                              kind: str, fmt: str) -> None:
    data = write_dump(kind, 12_000, tmp_path / "gen.nt", seed=3).read_bytes()
    small_batches(monkeypatch, 200_000)  # several batches: learning crosses them
    counts = same_outputs(build_both(tmp_path, data, fmt, monkeypatch))
    if fmt != "ntriples":
        assert len(scans) > 3 and all(scans)  # every batch on the fast path
    source = counts["sources"][0]
    assert source["facts_read"] > 1000 and source["metadata"] > 100 and counts["filtered"]
    if fmt == "wikidata":
        assert counts["filtered"]["external-id statement"] > 0
        assert counts["external_ids"]["properties"] >= 4


def test_real_freebase_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scans: list[bool], shared_data: Path) -> None:
    data = (shared_data / "dumps" / "freebase" / "fb-rdf-10k-head.nt").read_bytes()
    counts = same_outputs(build_both(tmp_path, data, "freebase", monkeypatch))
    assert scans == [True]
    assert counts["filtered"] == {"non-entity subject": 10_000}


def test_real_wikidata_entities_as_ntriples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scans: list[bool],
                                            shared_data: Path) -> None:
    """The Turtle excerpts (full dump: statements, references, sitelinks, labels) written as
    N-Triples, each entity in its own small batch."""
    folder = shared_data / "dumps" / "wikidata_rdf"
    data = b"".join(ox.serialize(ox.parse(path=str(path), format=ox.RdfFormat.TURTLE), format=ox.RdfFormat.N_TRIPLES)
                    for path in sorted(folder.glob("*.ttl")))
    small_batches(monkeypatch, 100_000)
    counts = same_outputs(build_both(tmp_path, data, "wikidata", monkeypatch))
    assert len(scans) > 3 and all(scans)
    assert counts["triples"] > 300 and counts["filtered"]["non-truthy predicate"] > 1000
    assert counts["filtered"]["external-id statement"] > 0


@pytest.mark.parametrize("batch", [1 << 20, 400])
def test_awkward_wikidata_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scans: list[bool], batch: int) -> None:
    small_batches(monkeypatch, batch)
    counts = same_outputs(build_both(tmp_path, WIKIDATA_LINES, "wikidata", monkeypatch))
    assert all(scans)
    # P214 is declared an external id first, P646 by its wdtn: value: the P646 line before that is a fact
    assert counts["filtered"]["external-id statement"] == 3
    assert counts["external_ids"] == {"properties": 2, "statements_left_out": 4, "kept": False}
    assert counts["filtered"]["other-language metadata"] == 2 and counts["filtered"]["other-language literal"] == 1
    assert counts["filtered"]["other sitelink"] == 1 and counts["filtered"]["non-entity object"] == 2
    rows = {r["id"]: r for r in pq.read_table(tmp_path / "store" / "entities.parquet").to_pylist()}
    assert rows[WD + "Q42"]["description"] == 'English writer "and" humorist é'
    assert rows[WD + "Q42"]["wikipedia_title"] == "Douglas Adams"
    assert rows[WD + "Q350"]["wikipedia_title"] == "Café (place)"  # percent-decoded, in Python
    relations = pq.read_table(tmp_path / "store" / "relations.parquet").to_pydict()
    assert dict(zip(relations["id"], relations["label"], strict=True))[WDT + "P19"] == "place of birth"


@pytest.mark.parametrize("options", [{"languages": ("de", "ru")}, {"keep_external_ids": True}])
def test_wikidata_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scans: list[bool], options: dict[str, Any]) -> None:
    counts = same_outputs(build_both(tmp_path, WIKIDATA_LINES, "wikidata", monkeypatch, options))
    assert scans == [True]
    assert ("external-id statement" in counts["filtered"]) is not options.get("keep_external_ids", False)


def test_comment_only_batches_and_no_final_newline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scans: list[bool]) -> None:
    small_batches(monkeypatch, 120)
    last = f"<{FB}m.02>\t<{FB}location.location.containedby>\t<{FB}m.01>\t.".encode()  # a fact, no newline
    data = b"# one\n\n# two\n" * 20 + FREEBASE_LINES + last
    same_outputs(build_both(tmp_path, data, "freebase", monkeypatch))
    assert len(scans) > 10 and all(scans)


@pytest.mark.parametrize("bad", BAD_LINES)
@pytest.mark.parametrize("batch", [1 << 20, 300])
def test_bad_wikidata_lines_are_rejects_on_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: bytes, batch: int) -> None:
    small_batches(monkeypatch, batch)
    lines = WIKIDATA_LINES.splitlines(keepends=True)
    counts = same_outputs(build_both(tmp_path, b"".join([*lines[:12], bad, *lines[12:]]), "wikidata", monkeypatch))
    assert counts["sources"][0]["rejects"] == 1


@pytest.mark.parametrize("batch", [1 << 20, 250])
@pytest.mark.parametrize("drop", [None, ("film.", "common.")])
def test_awkward_freebase_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scans: list[bool], batch: int,
                                drop: tuple[str, ...] | None) -> None:
    small_batches(monkeypatch, batch)
    options = {"freebase_drop": drop} if drop else {}
    counts = same_outputs(build_both(tmp_path, b"# head\n\n" + FREEBASE_LINES, "freebase", monkeypatch, options))
    assert all(scans)
    if drop is None:
        assert counts["filtered"] == {"other-language metadata": 1, "dropped predicate": 4, "non-entity object": 1,
                                      "other-language literal": 1, "non-entity subject": 2}
        assert counts["triples"] == 5


def test_freebase_lines_the_store_or_mend_must_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scans: list[bool]) -> None:
    """The project's fixture (a mended escape and IRI, bad bytes, an unterminated literal, not a
    triple) with clean batches around it: the batches with bad lines go to Python (declined, or
    rejected by the store and parsed again), the others stay on the fast path."""
    small_batches(monkeypatch, 600)
    data = FREEBASE_LINES + (FIXTURES / "freebase_entities.nt").read_bytes() + FREEBASE_LINES
    counts = same_outputs(build_both(tmp_path, data, "freebase", monkeypatch))
    assert True in scans and False in scans
    assert counts["filtered"]["mended line"] == 2 and counts["sources"][0]["rejects"] == 3


def test_generic_profile_on_wikidata_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generic scan: English labels in two variants (the first label must be the same one),
    other languages counted, a literal with a fourth term rejected (not loaded into a graph)."""
    scanned: list[bool] = []
    unparsed = rdf_reader._unparsed_batch
    monkeypatch.setattr(rdf_reader, "_unparsed_batch", lambda *a: scanned.append((b := unparsed(*a)) is not None) or b)
    lines = [line for line in WIKIDATA_LINES.splitlines(keepends=True) if b"_:" not in line]  # a blank node: Python
    counts = same_outputs(build_both(tmp_path, b"".join(lines), "ntriples", monkeypatch))
    assert scanned == [True]
    assert counts["filtered"] == {"other-language metadata": 2}
    fourth = f'<{WD}Q42> <{WDT}P1476> "x" <http://ex.org/g> .\n'.encode()
    counts = same_outputs(build_both(tmp_path / "fourth", b"".join(lines) + fourth, "ntriples", monkeypatch))
    assert scanned == [True, False]  # declined: the line goes to Python, which rejects it
    assert counts["sources"][0]["rejects"] == 1


def test_external_id_learned_in_file_order() -> None:
    """A `wdt:` statement of an external-id property is a fact before the line that makes the
    property known, filtered after it, as the profile routes quad by quad."""
    scan = WikidataScan(profile := WikidataProfile())
    scanned = scan.scan(WIKIDATA_LINES)
    assert scanned is not None
    batch, before = scanned
    assert profile.external_ids == {WDT + "P214", WDT + "P646"} and before.external_ids == set()
    parsed = KgBatch()
    WikidataProfile().route(ox.parse(WIKIDATA_LINES, ox.RdfFormat.N_TRIPLES), parsed)
    assert batch.filtered == parsed.filtered
    assert batch.unparsed_facts == len(parsed.facts)
    assert batch.unparsed_meta_count + len(batch.meta) == len(parsed.meta)


def test_the_python_path_is_forced_by_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scans: list[bool]) -> None:
    source = tmp_path / "kg.nt"
    source.write_bytes(FREEBASE_LINES)
    monkeypatch.setenv("LOCALKG_KG_PARSER", "python")
    build_index(tmp_path / "python", [KgSource(source, "freebase")], [])
    monkeypatch.setenv("LOCALKG_KG_PARSER", "store")  # --kg-keep samples parsed facts: Python parses
    build_index(tmp_path / "keep", [KgSource(source, "freebase")], [], {"keep_fraction": 0.5})
    assert scans == []
    build_index(tmp_path / "store", [KgSource(source, "freebase")], [])
    assert scans == [True]


def test_sure_patterns_only_match_terms_that_parse() -> None:
    """The strict patterns that spare a filtered line pyoxigraph's check: whatever they match,
    the parser takes. Random terms from an alphabet of troublemakers."""
    rng = random.Random(7)
    alphabet = [*"ab09.-_~%:/?#@!$&'()*+,;=[]{}|^`\\\"<> AF\té", "%4", "%zz", "http://", "https://", "\\u0041", "\\n", "\\$"]
    cases = {SURE_IRI: (["<http://", "<https://a.b", "<http://a.b/"], ">", "<s:s> <p:p> {} ."),
             SURE_BLANK: (["_:"], "", "<s:s> <p:p> {} ."), SURE_BODY: (['"'], "", '<s:s> <p:p> {}" .')}
    matched = 0
    for pattern, (prefixes, end, line) in cases.items():
        terms = [rng.choice(prefixes) + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) + end
                 for _ in range(3000)]
        hits = pc.match_substring_regex(pa.array(terms), f"^(?:{pattern})$").to_pylist()
        for term, hit in zip(terms, hits, strict=True):
            if hit:
                matched += 1
                assert list(ox.parse(line.format(term).encode(), ox.RdfFormat.N_TRIPLES)), term
    assert matched > 500
    assert re.fullmatch(SURE_IRI, "<http://www.wikidata.org/entity/Q42>")
