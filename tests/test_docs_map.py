"""Own corpora: document files mapped to entities by a sidecar CSV (`--docs-map`) or front
matter. The example corpus data/examples/filings (a CSV company graph with a header row and
filings named by ticker) builds, and each mapped filing links to its company; bad mappings
fail the build naming the file and line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from cli import main
from ingest.base.errors import InputError
from ingest.docs_map import DocsMap, split_front_matter
from ingest.terms import mint_entity

EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "examples" / "filings"


def run_cli(*args: object, expect: int = 0) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == expect, result.output
    return result.output


def flags(corpus: Path, out: Path, *extra: object) -> list[object]:
    """`index` arguments for the example corpus at `corpus`, without its map."""
    return ["index", "--out", out, "--kg", corpus / "companies.csv", "--kg-format", "tsv",
            "--docs", corpus / "filings", "--docs-format", "files", "--collection", "domain", *extra]


def documents(index: Path) -> dict[str, dict[str, object]]:
    return {d["doc_id"]: d for d in pq.read_table(index / "documents.parquet").to_pylist()}


@pytest.fixture(scope="module")
def filings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example filings index, built from its recipe."""
    out = tmp_path_factory.mktemp("filings") / "index"
    output = run_cli("index", "--config", EXAMPLE / "index.toml", "--out", out)
    assert "built kg, docs, vectors" in output
    return out


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    """A copy of the example corpus to break."""
    return Path(shutil.copytree(EXAMPLE, tmp_path / "filings"))


def test_each_mapped_filing_links_to_its_company(filings: Path) -> None:
    docs = documents(filings)
    expected = {
        "filings/LRK-2024-annual.txt": "Larkspur Instruments",   # map row
        "filings/QFR-2024-annual.txt": "Quillon Ferries",        # map row
        "filings/ORV-2024-annual.txt": "Orvel Holdings",         # map row
        "filings/TAG-2024-annual.md": "Tamsin Agritech",         # front matter
    }
    assert {k: d["entity"] for k, d in docs.items()} == {
        **{k: mint_entity(v) for k, v in expected.items()}, "filings/estmark-sector-note-2024.txt": None}
    assert docs["filings/LRK-2024-annual.txt"]["title"] == "Larkspur Instruments annual report 2024"  # map title
    assert docs["filings/QFR-2024-annual.txt"]["title"] == "QFR-2024-annual"  # no title given: the file name
    assert docs["filings/TAG-2024-annual.md"]["title"] == "Tamsin Agritech annual report 2024"
    assert not str(docs["filings/TAG-2024-annual.md"]["text"]).startswith("---")  # front matter is not text
    counts = json.loads((filings / "manifest.json").read_text())["counts"]
    assert counts["mapped_documents"] == 4 and counts["linked_documents"] == 4
    assert counts["triples"] == 13  # the CSV's header row is not a fact
    chunks = json.loads(run_cli("docs", "chunks", "--index", filings, "--entity", "Larkspur Instruments", "--json"))
    assert [c["doc_id"] for c in chunks] == ["filings/LRK-2024-annual.txt"] and "Ilse Marrow" in chunks[0]["text"]


def test_without_the_map_only_front_matter_links(corpus: Path, tmp_path: Path) -> None:
    run_cli(*flags(corpus, tmp_path / "ix"))
    linked = {k for k, d in documents(tmp_path / "ix").items() if d["entity"]}
    assert linked == {"filings/TAG-2024-annual.md"}


def test_a_changed_map_rebuilds_the_documents(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "ix"
    run_cli(*flags(corpus, out, "--docs-map", corpus / "filings.map.csv"))
    assert "up to date" in run_cli(*flags(corpus, out))  # the map is a recorded option
    with (corpus / "filings.map.csv").open("a") as fh:
        fh.write("filings/estmark-sector-note-2024.txt,Tamsin Agritech,\n")
    output = run_cli(*flags(corpus, out))
    assert "built docs, vectors; reused kg" in output
    assert documents(out)["filings/estmark-sector-note-2024.txt"]["entity"] == mint_entity("Tamsin Agritech")


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("file,entity\nfilings/LRK-2024-annual.txt,Larkspur Instrument\n",
         "1 document(s) are mapped to an entity the KG does not have (give an IRI, or a label or alias of a KG "
         "entity): {map}:2: 'Larkspur Instrument'"),
        ("file,entity\n\nfilings/nope.txt,Larkspur Instruments\n",
         "{map}:3: no such document file 'filings/nope.txt'"),
        ("file,entity\nREADME.md,Larkspur Instruments\n",
         "{map}:2: {corpus}/README.md is not a document of any --docs source of format files"),
        ("file;entity\n", "{map}:1: the first row must be the header file,entity"),
        ("file,entity\nfilings/LRK-2024-annual.txt\n", "{map}:2: expected 2 fields (file,entity), got 1"),
        ("file,entity\nfilings/LRK-2024-annual.txt,Orvel Holdings\nfilings/LRK-2024-annual.txt,Quillon Ferries\n",
         "{map}:3: {corpus}/filings/LRK-2024-annual.txt is already mapped to 'Orvel Holdings' at {map}:2"),
        ("file,entity\nfilings/TAG-2024-annual.md,Orvel Holdings\n",
         "{map}:2: maps {corpus}/filings/TAG-2024-annual.md to 'Orvel Holdings', but its front matter "
         "({corpus}/filings/TAG-2024-annual.md:2) says 'Tamsin Agritech'"),
    ],
)
def test_bad_mappings_fail_naming_file_and_line(corpus: Path, tmp_path: Path, rows: str, message: str) -> None:
    bad = corpus / "bad.map.csv"
    bad.write_text(rows)
    output = run_cli(*flags(corpus, tmp_path / "ix", "--docs-map", bad), expect=2)
    assert message.format(map=bad, corpus=corpus) in " ".join(output.split())
    assert not (tmp_path / "ix").exists()  # nothing half-built is left at the path


def test_front_matter_entity_unknown_to_the_kg_fails(corpus: Path, tmp_path: Path) -> None:
    note = corpus / "filings" / "estmark-sector-note-2024.txt"
    note.write_text("---\ntitle: Sector note\nentity: Estmark Grain Board\n---\n" + note.read_text())
    output = run_cli(*flags(corpus, tmp_path / "ix"), expect=2)
    assert f"{note}:3: 'Estmark Grain Board'" in " ".join(output.split())


def test_front_matter_parsing() -> None:
    front, text = split_front_matter("---\nentity: \"Acme Corp\"\ntags:\n  - a\ndate: 2024\n---\nBody\n")
    assert front is not None and (front.entity, front.entity_line, front.title) == ("Acme Corp", 2, None)
    assert text == "Body\n"
    # a rule that opens no closed block is text
    assert split_front_matter("---\nno end\n") == (None, "---\nno end\n")
    assert split_front_matter("Text\n---\nentity: x\n---\n")[0] is None


def test_map_rows_are_relative_to_the_map_file(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("A.")
    (tmp_path / "maps").mkdir()
    mapping = tmp_path / "maps" / "m.csv"
    mapping.write_text("# comment\nfile,entity,title\n../docs/a.txt,Q42,Doc A\n")
    docs_map = DocsMap.read([mapping])
    entry = docs_map.lookup(tmp_path / "docs" / "a.txt")
    assert entry is not None and (entry.entity, entry.title, entry.origin) == ("Q42", "Doc A", f"{mapping}:3")
    assert docs_map.unused() == []
    with pytest.raises(InputError, match="no such --docs-map file"):
        DocsMap.read([tmp_path / "missing.csv"])
