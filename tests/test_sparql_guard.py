"""`kg sparql` never touches the network: SERVICE, LOAD, updates and DEFINE pragmas are refused
before the query reaches the store or an endpoint (issue 10, the SPARQL hole).

A real listening socket on 127.0.0.1 stands for the remote side: Oxigraph's HTTP client is
native code, so patching Python's socket alone would not see its request. Before the fix the
embedded store POSTed to it and the command died with a traceback."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from engine.access.oxigraph_kg import OxigraphKG
from engine.access.sparql_endpoint_kg import SparqlEndpointKG
from engine.access.sparql_guard import RefusedQuery, check_local_query, keyword_problems
from index.build import build_index
from index.kg_stage import KgSource
from index.paths import IndexPaths


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sparql-guard")
    kb = root / "kb.tsv"
    kb.write_text("Ada\tknows\tBob\nBob\tlives_in\tParis\n", encoding="utf-8")
    out = root / "ix"
    build_index(out, [KgSource(kb, "tsv")], [])
    return out


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server on 127.0.0.1 that records every connection it gets."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    seen: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    seen.append(conn.recv(200))
                except OSError:
                    seen.append(b"")

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], seen
    stop.set()
    thread.join(timeout=2)
    server.close()


@pytest.fixture
def no_python_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: socket.socket, address: object) -> None:
        raise AssertionError(f"a socket connected to {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


def _queries(port: int) -> list[str]:
    url = f"http://127.0.0.1:{port}/sparql"
    return [
        f"SELECT * WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }}",
        f"SELECT * WHERE {{ ?a ?b ?c OPTIONAL {{ SERVICE SILENT <{url}> {{ ?s ?p ?o }} }} }}",
        "SELECT * WHERE { SERVICE <file:///etc/passwd> { ?s ?p ?o } }",
        f"SELECT * WHERE {{ \\u0053ERVICE <{url}> {{ ?s ?p ?o }} }}",  # SPARQL's escape pre-pass
        f"LOAD <{url}>",
        "INSERT DATA { <http://a> <http://b> <http://c> }",
        f'DEFINE get:soft "replace" SELECT * FROM <{url}> WHERE {{ ?s ?p ?o }}',
    ]


def test_embedded_store_refuses_and_connects_nowhere(small_index: Path, listener: tuple[int, list[bytes]],
                                                     no_python_connect: None) -> None:
    port, seen = listener
    kg = OxigraphKG.open(IndexPaths(small_index))
    for query in _queries(port):
        with pytest.raises(RefusedQuery, match="SPARQL query refused"):
            kg.sparql(query)
    assert seen == []


def test_endpoint_backend_sends_nothing(listener: tuple[int, list[bytes]], no_python_connect: None) -> None:
    port, seen = listener
    remote = SparqlEndpointKG(f"http://127.0.0.1:{port}/sparql")  # constructing it sends nothing
    for query in _queries(port):
        with pytest.raises(RefusedQuery):
            remote.sparql(query)
    assert seen == []


def test_cli_refuses_with_exit_2_and_no_traceback(small_index: Path, listener: tuple[int, list[bytes]]) -> None:
    port, seen = listener
    result = CliRunner().invoke(main, ["kg", "sparql", "--index", str(small_index),
                                       f"SELECT * WHERE {{ SERVICE <http://127.0.0.1:{port}/x> {{ ?s ?p ?o }} }}"])
    assert result.exit_code == 2, result.output
    assert f"SERVICE <http://127.0.0.1:{port}/x>" in result.output
    assert "Traceback" not in result.output
    assert seen == []


def test_local_queries_still_run(small_index: Path, no_python_connect: None) -> None:
    kg = OxigraphKG.open(IndexPaths(small_index))
    # FROM names a graph of the store (never dereferenced); words inside strings, IRIs,
    # variables and prefixed names are data, not keywords.
    query = ('PREFIX ex: <http://example.org/load#> SELECT ?service WHERE { ?service ?p ?o '
             'FILTER(?o != "service desk" && ?o != ex:drop) } LIMIT 5')
    assert len(list(kg.sparql(query))) > 0
    assert list(kg.sparql("SELECT * FROM <urn:localkg:graph:meta> WHERE { ?s ?p ?o } LIMIT 1"))
    assert keyword_problems("SELECT ?load WHERE { ?s <http://x/service> 'DROP' } # SERVICE") == []
    check_local_query("ASK { ?s ?p ?o FILTER(?s < 3 && ?p > 2) }")
