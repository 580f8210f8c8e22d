"""KG access: embedded Oxigraph (read-only, shared by processes) and a real SPARQL endpoint
(`oxigraph serve-read-only` on 127.0.0.1), fed hostile names that must be data, not syntax."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import sparql_escape
from engine.entities import EntityTable
from engine.kg import OxigraphKG, SparqlEndpointKG
from index.build import build_index
from index.kg_stage import KgSource
from index.paths import IndexPaths
from ingest.terms import mint_entity, mint_relation

HOSTILE = ['O"Brien', "a}b", "x>y", "#hash", "Zoë 東京", "back\\slash", "'; DROP ALL; '", "<tag>"]
ATTACKS = [
    'http://ex.org/a> ?p ?o } ; DROP ALL ; SELECT * WHERE { <http://ex.org/b',
    "http://ex.org/a>\n} #",
    "}",
    '"',
    "",
    "_:",
    "http://ex.org/\u0000nul",
]


@pytest.fixture(scope="module")
def hostile_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    kb = root / "kb.tsv"
    lines = [f"{name}\tlinked_to\t{HOSTILE[(i + 1) % len(HOSTILE)]}" for i, name in enumerate(HOSTILE)]
    kb.write_text("\n".join(lines) + "\nhub\tmember\tleaf\n", encoding="utf-8")
    out = root / "ix"
    build_index(out, [KgSource(kb, "tsv")], [])
    return out


def test_hostile_names_round_trip_in_embedded_store(hostile_index: Path) -> None:
    kg = OxigraphKG.open(IndexPaths(hostile_index))
    for i, name in enumerate(HOSTILE):
        entity = mint_entity(name)
        assert kg.label(entity) == name
        assert [r.id for r in kg.relations_of(entity, "out")] == [mint_relation("linked_to")]
        tails = kg.tails(entity, mint_relation("linked_to"), "out")
        assert [kg.label(t) for t in tails] == [HOSTILE[(i + 1) % len(HOSTILE)]]


def test_attacks_are_neither_errors_nor_injections(hostile_index: Path) -> None:
    kg = OxigraphKG.open(IndexPaths(hostile_index))
    for attack in ATTACKS:
        assert kg.relations_of(attack) == []
        assert kg.tails(attack, attack) == []
    assert len(kg.relations_of(mint_entity("hub"))) == 1  # data still there


def test_escaping_functions() -> None:
    assert sparql_escape.iri("http://ex.org/a> } #") == "<http://ex.org/a%3E%20}%20#>".replace("}", "%7D")
    assert sparql_escape.string('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    with pytest.raises(ValueError):
        sparql_escape.lang_literal("x", "en} .")


def test_entity_lookup_by_label_alias_and_id(metaqa_index: Path) -> None:
    table = EntityTable.open(IndexPaths(metaqa_index))
    assert table.resolve("Ginger Snaps") == mint_entity("Ginger Snaps")
    assert table.resolve("ginger  snaps") == mint_entity("Ginger Snaps")  # normalised
    assert table.resolve(mint_entity("Ginger Snaps")) == mint_entity("Ginger Snaps")
    assert table.resolve("no such film at all") is None


def test_metaqa_relations_tails_and_neighbourhood(metaqa_index: Path) -> None:
    kg = OxigraphKG.open(IndexPaths(metaqa_index))
    film = mint_entity("Ginger Snaps")
    out = {kg.relation_label(r.id) for r in kg.relations_of(film, "out")}
    assert {"directed by", "written by", "starred actors", "release year"} <= out
    assert kg.tails(film, mint_relation("directed_by")) == [mint_entity("John Fawcett")]
    # incoming: films directed by John Fawcett include Ginger Snaps
    assert film in kg.tails(mint_entity("John Fawcett"), mint_relation("directed_by"), "in")
    # a hub is capped, and the sample is the same on every call
    english = mint_entity("English")
    capped = kg.tails(english, mint_relation("in_language"), "in", limit=25)
    assert len(capped) == 25
    assert capped == kg.tails(english, mint_relation("in_language"), "in", limit=25)
    triples = kg.neighbourhood([film], hops=2, max_degree=10)
    assert any(t.head == film for t in triples)
    assert len({t.head for t in triples} | {t.tail for t in triples}) > 20


def test_store_is_shared_read_only_by_processes(metaqa_index: Path) -> None:
    code = (
        "import sys; from engine.kg import OxigraphKG; from index.paths import IndexPaths; "
        "from ingest.terms import mint_entity; from pathlib import Path; "
        "kg = OxigraphKG.open(IndexPaths(Path(sys.argv[1]))); "
        "print(len(kg.relations_of(mint_entity('Ginger Snaps'))))"
    )
    repo = Path(__file__).resolve().parents[1]
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(metaqa_index)], cwd=repo, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    kg = OxigraphKG.open(IndexPaths(metaqa_index))  # and this process too, at the same time
    outputs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert set(outputs) == {str(len(kg.relations_of(mint_entity("Ginger Snaps"))))}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def endpoint(hostile_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("oxigraph") or str(Path(sys.executable).parent / "oxigraph")
    if not Path(binary).exists():
        pytest.skip("oxigraph server binary not installed (pip install oxigraph)")
    store_copy = tmp_path_factory.mktemp("served") / "kg"
    shutil.copytree(hostile_index / "kg", store_copy)
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "serve-read-only", "--location", str(store_copy), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/query"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/query?query=ASK%7B%7D", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("oxigraph server did not start")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_endpoint_backend_matches_embedded(endpoint: str, hostile_index: Path) -> None:
    remote = SparqlEndpointKG(endpoint, timeout=10)
    local = OxigraphKG.open(IndexPaths(hostile_index))
    for name in HOSTILE:
        entity = mint_entity(name)
        assert remote.relations_of(entity) == local.relations_of(entity)
        assert remote.tails(entity, mint_relation("linked_to"), "out") == local.tails(entity, mint_relation("linked_to"), "out")
        assert remote.label(entity) == name


def test_endpoint_attacks_are_data(endpoint: str) -> None:
    remote = SparqlEndpointKG(endpoint, timeout=10)
    for attack in ATTACKS:
        assert remote.relations_of(attack) == []
        assert remote.tails(attack, attack) == []
    assert remote.relations_of(mint_entity("hub")) != []


def test_endpoint_down_is_a_clear_error() -> None:
    from ingest.errors import LocalkgError

    remote = SparqlEndpointKG(f"http://127.0.0.1:{_free_port()}/query", timeout=2)
    with pytest.raises(LocalkgError, match="unreachable"):
        remote.relations_of(mint_entity("x"))
