"""KG access: embedded Oxigraph (read-only, shared by processes) and a real SPARQL endpoint
(`oxigraph serve-read-only` on 127.0.0.1), fed hostile names that must be data, not syntax,
and reached from the CLI (`--kg-endpoint`) with the same answers as the embedded store.

Without the `oxigraph` binary the endpoint tests skip, except under CI (CI=true), where they
fail: a broken install must not pass as green."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import pytest
from click.testing import CliRunner

from cli import main
from engine.access import sparql_escape
from engine.access.kg_protocol import SCAN_FACTOR, Edges, stable_sample
from engine.access.oxigraph_kg import OxigraphKG
from engine.access.sparql_endpoint_kg import SparqlEndpointKG
from engine.llm.scripted import ScriptedLLM, ScriptedRequest
from engine.questions.record import Question
from engine.runs.answer import answer_question as run_question
from engine.runs.context import open_context
from index.build import build_index
from index.entities import EntityTable
from index.kg_stage import KgSource
from index.paths import IndexPaths
from ingest.base.errors import LocalkgError
from ingest.terms import local_name, mint_entity, mint_relation

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"

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
    assert sparql_escape.iri("http://ex.org/Zoë#x'y;(a),b?c=1&d") == "<http://ex.org/Zoë#x'y;(a),b?c=1&d>"
    assert sparql_escape.iri("urn:x") == "<urn:x>"
    assert sparql_escape.string('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    assert sparql_escape.string("a\ud800b") == '"a b"'  # a lone surrogate cannot be sent as UTF-8
    with pytest.raises(ValueError):
        sparql_escape.lang_literal("x", "en} .")


@pytest.mark.parametrize("char", [" ", "<", ">", '"', "{", "}", "|", "^", "`", "\\", "\n", "\t", "\x00", "\ud800"])
def test_characters_illegal_in_an_iri_are_rejected_not_rewritten(char: str) -> None:
    # percent-encoding would name another IRI (`a b` -> `a%20b`, which may exist)
    with pytest.raises(ValueError, match="invalid IRI"):
        sparql_escape.iri(f"http://ex.org/a{char}b")


@pytest.mark.parametrize("value", ["", "relative/path", "#frag", ":x", "_:b0"])
def test_iris_without_a_scheme_are_rejected(value: str) -> None:
    with pytest.raises(ValueError, match=r"no scheme|not allowed"):
        sparql_escape.iri(value)


def test_entity_lookup_by_label_alias_and_id(metaqa_index: Path) -> None:
    table = EntityTable.open(IndexPaths(metaqa_index))
    assert table.resolve("Ginger Snaps") == mint_entity("Ginger Snaps")
    assert table.resolve("ginger  snaps") == mint_entity("Ginger Snaps")  # normalised
    assert table.resolve(mint_entity("Ginger Snaps")) == mint_entity("Ginger Snaps")
    assert table.resolve("no such film at all") is None


def test_metaqa_relations_tails_and_edges(metaqa_index: Path) -> None:
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
    # edges: every fact of one direction; with a limit a stable sample from a bounded scan
    out_edges = kg.edges(film, "out")
    assert out_edges.complete and (mint_relation("directed_by"), mint_entity("John Fawcett")) in out_edges.pairs
    hub = kg.edges(english, "in", limit=25)
    assert len(hub.pairs) == 25 and not hub.complete and hub.scanned == 25 * SCAN_FACTOR
    assert hub == kg.edges(english, "in", limit=25)
    assert {r for r, _ in hub.pairs} == {mint_relation("in_language")}


def test_store_is_shared_read_only_by_processes(metaqa_index: Path) -> None:
    code = (
        "import sys; from engine.access.oxigraph_kg import OxigraphKG; from index.paths import IndexPaths; "
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


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def oxigraph_binary() -> str:
    """The `oxigraph` server binary; without it the endpoint tests skip, or fail under CI."""
    binary = shutil.which("oxigraph") or str(Path(sys.executable).parent / "oxigraph")
    if not Path(binary).exists():
        message = "oxigraph server binary not installed (pip install oxigraph)"
        if _ci():
            pytest.fail(f"{message}; CI is set, so the endpoint tests must run, not skip")
        pytest.skip(message)
    return binary


@contextlib.contextmanager
def serve(store: Path) -> Iterator[str]:
    """`oxigraph serve-read-only` over the store folder on a free local port: its query URL."""
    binary = oxigraph_binary()
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "serve-read-only", "--location", str(store), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
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
        yield f"http://127.0.0.1:{port}/query"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _store_copy(index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the index's store (the served one is never the one the tests open)."""
    copy = tmp_path_factory.mktemp("served") / "kg"
    shutil.copytree(index / "kg", copy)
    return copy


@pytest.fixture(scope="module")
def endpoint(hostile_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve(_store_copy(hostile_index, tmp_path_factory)) as url:
        yield url


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_missing_oxigraph_skips_but_fails_under_ci(ci: str, outcome: type[BaseException], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome):
        oxigraph_binary()


def test_endpoint_backend_matches_embedded(endpoint: str, hostile_index: Path) -> None:
    remote = SparqlEndpointKG(endpoint, timeout=10)
    local = OxigraphKG.open(IndexPaths(hostile_index))
    for name in HOSTILE:
        entity = mint_entity(name)
        assert remote.relations_of(entity) == local.relations_of(entity)
        assert remote.tails(entity, mint_relation("linked_to"), "out") == local.tails(entity, mint_relation("linked_to"), "out")
        assert remote.label(entity) == name
        assert _subgraph_edges(remote, entity, 3) == _subgraph_edges(local, entity, 3)


# Query text an attacker could put where an entity or relation id goes. The first ones are no
# IRI (rejected before any query); the last ones are valid IRIs full of SPARQL punctuation,
# which reach the endpoint and must name nothing.
INJECTIONS = [
    "x> } ; DROP ALL ; SELECT * { <y",
    "http://ex.org/hub> ?p ?o } UNION { ?s ?p ?o",
    mint_entity("hub") + "> ?p ?o . ?s ?p ?o } #",
    "http://ex.org/a>\nSELECT * WHERE { ?s ?p ?o }",
    "http://ex.org/\ud800",
    "http://ex.org/x';DROP(ALL);SELECT*WHERE#'",
    "http://ex.org/?q=UNION&s=?p&o=*;DROP#SELECT*WHERE'",
    mint_entity("hub") + "#",
]


def test_endpoint_attacks_are_data(endpoint: str, hostile_index: Path) -> None:
    remote = SparqlEndpointKG(endpoint, timeout=10)
    local = OxigraphKG.open(IndexPaths(hostile_index))
    hub, member = mint_entity("hub"), mint_relation("member")
    for attack in ATTACKS + INJECTIONS:
        assert remote.relations_of(attack) == [] == local.relations_of(attack)
        assert remote.tails(attack, attack) == []
        assert remote.tails(attack, member, "in", limit=5) == [] == remote.tails(hub, attack, limit=5)
        # not an error, not another node's label, not "all triples": the same as the embedded store
        assert remote.label(attack) == local.label(attack)
        assert remote.edges(attack, "out") == Edges() == remote.edges(attack, "in", limit=3)
        assert _subgraph_edges(remote, attack, 2) == set()
    assert remote.relations_of(hub) != []  # data still there


def test_invalid_iris_never_reach_the_endpoint() -> None:
    dead = SparqlEndpointKG(f"http://127.0.0.1:{_free_port()}/query", timeout=2)
    for attack in [*ATTACKS, *INJECTIONS[:5], "http://ex.org/a b", "http://ex.org/{x}"]:
        assert dead.relations_of(attack) == []  # no query sent, so no "unreachable" either
        assert dead.tails(attack, "http://ex.org/p") == [] == dead.tails("http://ex.org/s", attack)
        assert dead.label(attack) == local_name(attack) or attack.startswith('"')


def test_endpoint_down_is_a_clear_error() -> None:
    remote = SparqlEndpointKG(f"http://127.0.0.1:{_free_port()}/query", timeout=2)
    with pytest.raises(LocalkgError, match="unreachable"):
        remote.relations_of(mint_entity("x"))


# ---- real IRIs with raw unicode, `#`, `'` and SPARQL punctuation (tests/fixtures/hostile_iris.ttl)

ZOE = "http://ex.org/Zoë#x'y"
REL = "http://ex.org/rel/"
HUB = "http://ex.org/hub"
FACTS_GRAPH = "http://ex.org/graph/facts"


@pytest.fixture(scope="module")
def iris_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("iris") / "ix"
    build_index(out, [KgSource(FIXTURES / "hostile_iris.ttl", "turtle")], [])
    return out


@pytest.fixture(scope="module")
def iris_endpoint(iris_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The index's store, with its facts also copied into the named graph FACTS_GRAPH."""
    copy = _store_copy(iris_index, tmp_path_factory)
    store = ox.Store(str(copy))
    facts = list(store.quads_for_pattern(None, None, None, ox.DefaultGraph()))
    store.extend([ox.Quad(q.subject, q.predicate, q.object, ox.NamedNode(FACTS_GRAPH)) for q in facts])
    store.flush()
    del store
    with serve(copy) as url:
        yield url


def _entities(kg: OxigraphKG) -> list[str]:
    nodes: set[str] = set()
    for quad in kg.store.quads_for_pattern(None, None, None, ox.DefaultGraph()):
        nodes.add(quad.subject.value)
        if isinstance(quad.object, ox.NamedNode):
            nodes.add(quad.object.value)
    return sorted(nodes)


def assert_same_answers(remote: SparqlEndpointKG, local: OxigraphKG, entities: list[str]) -> None:
    """label, relations_of, tails (with and without a limit), edges and subgraphs agree."""
    for entity in entities:
        assert remote.label(entity) == local.label(entity), entity
        for direction in ("out", "in", "both"):
            assert remote.relations_of(entity, direction) == local.relations_of(entity, direction), entity
        for rel in local.relations_of(entity):
            assert remote.relation_label(rel.id) == local.relation_label(rel.id)
            for limit in (None, 1, 3):
                tails = local.tails(entity, rel.id, rel.direction, limit)
                assert remote.tails(entity, rel.id, rel.direction, limit) == tails, (entity, rel, limit)
                assert [remote.label(t) for t in tails] == [local.label(t) for t in tails]
        for direction in ("out", "in"):
            assert remote.edges(entity, direction) == local.edges(entity, direction), entity  # type: ignore[arg-type]
        assert _subgraph_edges(remote, entity, 2) == _subgraph_edges(local, entity, 2)


def _subgraph_edges(kg: Any, entity: str, hops: int) -> set[tuple[str, str, str]]:
    """The (subject, relation, object) facts of an entity's question subgraph."""
    from engine.access.graph import subgraph_within

    sub = subgraph_within(kg, [entity], hops)
    return {(u, key, v) for u, v, key in sub.graph.edges(keys=True)}


def test_fixture_holds_the_hostile_names(iris_index: Path) -> None:
    local = OxigraphKG.open(IndexPaths(iris_index))
    assert local.label(ZOE) == 'Zoë "the" {brace} > #tag'
    assert set(local.tails(ZOE, REL + "knows")) == {"http://ex.org/東京#駅", "http://ex.org/q?a=1&b=(2);c,d"}
    assert local.tails(ZOE, REL + "note") == ['"two\nlines } with \'quotes\'"']
    assert local.tails(ZOE, REL + "größe") == ['"1,5 m"']
    assert local.label("http://ex.org/q?a=1&b=(2);c,d") == "q } UNION { ?s ?p ?o"
    assert local.label("http://ex.org/東京#駅") == "東京駅 <station>"
    assert local.label("http://ex.org/hash#") == "#"


@pytest.mark.parametrize("graph", [None, FACTS_GRAPH], ids=["default-graph", "named-graph"])
def test_real_iris_give_the_same_answers_on_both_backends(iris_index: Path, iris_endpoint: str,
                                                          graph: str | None) -> None:
    local = OxigraphKG.open(IndexPaths(iris_index))
    entities = _entities(local)
    assert ZOE in entities and "http://ex.org/a%20b" in entities and len(entities) >= 36
    assert_same_answers(SparqlEndpointKG(iris_endpoint, timeout=10, default_graph=graph), local, entities)


def test_percent_encoding_is_no_way_into_another_node(iris_index: Path, iris_endpoint: str) -> None:
    # `a b` is no IRI; `a%20b` is a node of the KG. Rewriting one into the other would find it.
    remote, local = SparqlEndpointKG(iris_endpoint, timeout=10), OxigraphKG.open(IndexPaths(iris_index))
    assert remote.relations_of("http://ex.org/a%20b") != []
    for name in ("http://ex.org/a b", "http://ex.org/a<b", "http://ex.org/Zoë#x'y>"):
        assert remote.relations_of(name) == [] == local.relations_of(name)
        assert remote.label(name) == local.label(name) != "percent-encoded space"


def test_default_graph_names_the_graph_of_the_facts(iris_endpoint: str) -> None:
    elsewhere = SparqlEndpointKG(iris_endpoint, timeout=10, default_graph="http://ex.org/graph/none")
    assert elsewhere.relations_of(ZOE) == [] and elsewhere.tails(ZOE, REL + "knows") == []
    assert elsewhere.label(ZOE) == 'Zoë "the" {brace} > #tag'  # labels: localkg's meta graph
    with pytest.raises(ValueError, match="invalid IRI"):
        SparqlEndpointKG(iris_endpoint, default_graph="http://ex.org/a graph")


class _CountingKG(SparqlEndpointKG):
    """Remembers each query and how many rows came back."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(url, timeout=10, **kwargs)
        self.sent: list[tuple[str, int]] = []

    def select(self, query: str) -> list[dict[str, Any]]:
        rows = super().select(query)
        self.sent.append((query, len(rows)))
        return rows


def test_tails_limit_goes_into_the_query(iris_index: Path, iris_endpoint: str) -> None:
    local = OxigraphKG.open(IndexPaths(iris_index))
    member = REL + "member"
    everything = local.tails(HUB, member)
    assert len(everything) == 31 and '"literal member"' in everything
    # under max_fetch: exactly the embedded store's stable sample
    remote = _CountingKG(iris_endpoint)
    assert remote.tails(HUB, member, limit=5) == local.tails(HUB, member, limit=5)
    assert remote.tails(HUB, member) == everything
    # a hub above max_fetch: only max(limit, max_fetch) rows travel, the first in SPARQL order,
    # and the sample is drawn from them, the same on every call
    small = _CountingKG(iris_endpoint, max_fetch=10)
    first_ten = [f"http://ex.org/m/{i:02d}" for i in range(1, 11)]
    assert small.tails(HUB, member, limit=5) == stable_sample(first_ten, 5) == small.tails(HUB, member, limit=5)
    assert [rows for _, rows in small.sent] == [10, 10] and "LIMIT 10" in small.sent[0][0]
    assert len(small.tails(HUB, member, limit=12)) == 12 and small.sent[-1][1] == 12
    assert small.tails(HUB, member, "in", limit=3) == []


# ---- the CLI and the methods' context reach the endpoint (--kg-endpoint) -------------------


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "ix"
    build_index(out, [KgSource(REPO / "data" / "demo" / "kg.ttl", "turtle")], [])
    return out


@pytest.fixture(scope="module")
def demo_endpoint(demo_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve(_store_copy(demo_index, tmp_path_factory)) as url:
        yield url


def test_back_relations_are_the_same_on_both_backends(demo_index: Path, demo_endpoint: str) -> None:
    """`back_relations` (what `relation_inverses.graph_inverses` reads): of a relation's facts with
    an entity tail, how many were read and how many have each other relation back. Every demo
    `capital` fact (country -> city) has a `located in` fact back; the two backends count alike
    (each relation has fewer facts than the limit, so both read them all), and a literal-valued
    relation (`founded year`) has no facts to read."""
    remote = SparqlEndpointKG(demo_endpoint, timeout=10)
    local = OxigraphKG.open(IndexPaths(demo_index))
    relations = sorted({row["p"].value for row in local.sparql("SELECT DISTINCT ?p WHERE { ?s ?p ?o }")
                        if row["p"].value.startswith("https://demo.localkg.example/relation/")})
    assert len(relations) > 10
    for relation in relations:
        assert remote.back_relations(relation, 1000) == local.back_relations(relation, 1000), relation
    read, back = local.back_relations("https://demo.localkg.example/relation/capital", 1000)
    assert read > 0 and back["https://demo.localkg.example/relation/located_in"] == read
    assert local.back_relations("https://demo.localkg.example/relation/founded_year", 1000)[0] == 0
    assert local.back_relations("not an iri", 10) == (0, {})


def cli_json(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("args", [
    ["kg", "relations", "--entity", "Norvale Motors"],
    ["kg", "relations", "--entity", "Valdoria", "--direction", "in"],
    ["kg", "tails", "--entity", "Norvale Motors", "--relation", "founded_by"],
    ["kg", "tails", "--entity", "Norvale Motors", "--relation", "founded_year"],
    ["kg", "tails", "--entity", "Valdoria", "--relation", "operates_in", "--limit", "3"],
], ids=lambda a: " ".join(a[:2]) + " " + a[3])
def test_kg_commands_give_the_same_answers_from_the_endpoint(args: list[str], demo_index: Path,
                                                             demo_endpoint: str) -> None:
    embedded = cli_json(*args, "--index", str(demo_index), "--json")
    remote = cli_json(*args, "--index", str(demo_index), "--kg-endpoint", demo_endpoint, "--json")
    assert remote == embedded
    assert embedded.get("relations") or embedded.get("tails")


def test_kg_sparql_on_the_endpoint(demo_index: Path, demo_endpoint: str) -> None:
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    assert cli_json("kg", "sparql", "--kg-endpoint", demo_endpoint, count) == [{"n": "773"}]
    assert cli_json("kg", "sparql", "--index", str(demo_index), count) == [{"n": "773"}]
    assert cli_json("kg", "sparql", "--kg-endpoint", demo_endpoint, "ASK { ?s ?p ?o }") is True
    construct = CliRunner().invoke(main, ["kg", "sparql", "--kg-endpoint", demo_endpoint,
                                          "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o } LIMIT 3"])
    assert construct.exit_code == 0 and len(construct.stdout.splitlines()) == 3
    neither = CliRunner().invoke(main, ["kg", "sparql", count])
    assert neither.exit_code == 2 and "give --index or --kg-endpoint" in neither.output
    bad = CliRunner().invoke(main, ["kg", "sparql", "--kg-endpoint", demo_endpoint, "SELEKT nonsense"])
    # refused by the guard before it reaches the endpoint: one line, where it stopped parsing
    assert bad.exit_code == 2 and "does not parse" in bad.output and len(bad.output.strip().splitlines()) == 1
    not_http = CliRunner().invoke(main, ["kg", "sparql", "--kg-endpoint", "file:///etc/passwd", count])
    assert not_http.exit_code == 2 and "http(s) URL" in not_http.output


@pytest.mark.parametrize("url, message", [
    ("http://127.0.0.1:{port}/query", "unreachable"),
    ("ftp://example.org/sparql", "http(s) URL"),
])
def test_a_bad_endpoint_is_a_one_line_error(url: str, message: str, demo_index: Path) -> None:
    result = CliRunner().invoke(main, ["kg", "relations", "--index", str(demo_index), "--entity", "Norvale Motors",
                                       "--kg-endpoint", url.format(port=_free_port())])
    assert result.exit_code == 2 and message in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def _walk_first_candidates(req: ScriptedRequest) -> Any:
    """Prune: the first candidates the schema allows; never sufficient; then an answer."""
    if req.stage in ("relation_prune", "entity_prune"):
        key = "relations" if req.stage == "relation_prune" else "entities"
        assert req.schema is not None
        prop = req.schema["properties"][key]
        return {key: prop["items"]["enum"][: prop["maxItems"]]}
    if req.stage == "reasoning":
        return {"sufficient": False, "answer": ""}
    return {"answer": "Edda Norvale"}


def test_open_context_uses_the_endpoint(demo_index: Path, demo_endpoint: str) -> None:
    ctx = open_context(demo_index, ScriptedLLM(_walk_first_candidates), kg_endpoint=demo_endpoint)
    assert isinstance(ctx.kg, SparqlEndpointKG) and ctx.kg.url == demo_endpoint
    record = run_question("tog", Question("q", "Who founded Norvale Motors?", topic_entities=["Norvale Motors"]),
                          ctx, {"depth": 1})
    assert record.error is None and record.paths
    with pytest.raises(LocalkgError, match="unreachable"):
        open_context(demo_index, ScriptedLLM([]), kg_endpoint=f"http://127.0.0.1:{_free_port()}/query")


def test_ask_with_kg_endpoint_walks_the_same_graph(demo_index: Path, demo_endpoint: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    models: list[ScriptedLLM] = []

    def scripted_llm(spec: str | None, cache: bool = True, **_: Any) -> ScriptedLLM:
        models.append(ScriptedLLM(_walk_first_candidates))
        return models[-1]

    def ask(*extra: str) -> Any:
        return cli_json("ask", "--index", str(demo_index), "--method", "tog", "--set", "depth=2", "--set", "width=2",
                        "--topic", "Norvale Motors", "--json", *extra, "Who founded Norvale Motors?")

    monkeypatch.setattr("engine.runs.context.open_llm", scripted_llm)
    embedded, remote = ask(), ask("--kg-endpoint", demo_endpoint)
    assert remote["extra"].pop("kg_endpoint") == demo_endpoint and "kg_endpoint" not in embedded["extra"]
    assert embedded["error"] is None and embedded["paths"] and len(embedded["extra"]["trace"]) == 2
    for key in ("prediction", "answer_source", "topic_entities", "paths", "error"):
        assert remote[key] == embedded[key], key
    assert remote["extra"]["trace"] == embedded["extra"]["trace"]
    assert [r.messages for r in models[1].requests] == [r.messages for r in models[0].requests]
