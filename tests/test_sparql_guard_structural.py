"""A user's SPARQL can never make localkg reach the network (issue 24, item 1).

Two layers, each tested alone and together:
- the store runs a user's query in a child that cannot open a socket (sparql_sandbox.py): with
  the text guard switched off, a SERVICE call is stopped by the kernel;
- the text guard reads the query by the engine's rules (a CR ends a comment, a form feed is no
  whitespace, `trueSERVICE` is two words to Oxigraph) and refuses what it cannot read.
A property test generates queries that hide SERVICE in comments, strings, IRIs, escapes, line
endings, glued words and nested groups, and runs each through `kg sparql` against a real index
with a TCP listener on 127.0.0.1 standing for the remote side: it never sees a connection.
"""

from __future__ import annotations

import contextlib
import socket
import time
from pathlib import Path

import pyoxigraph as ox
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli import main
from engine.access.sparql_guard import RefusedQuery, check_local_query
from engine.access.sparql_sandbox import NetworkBlocked, run_user_query
from tests import test_sparql_guard

small_index = test_sparql_guard.small_index  # fixtures: a two-fact index, a recording TCP listener
listener = test_sparql_guard.listener

ENGINE_LINE_ENDS = ["\n", "\r", "\r\n"]
OTHER_BREAKS = ["\x0c", "\x0b", "\x85", "\u2028", "\u2029"]  # no line end, no space to the engine


def _quirks(url: str, base: str) -> dict[str, str]:
    """Queries where Oxigraph calls `url` although a naive reading sees no SERVICE keyword."""
    return {
        "CR ends a comment": f"SELECT * WHERE {{ ?s ?p ?o # c\rSERVICE <{url}> {{ ?a ?b ?c }}\n}}",
        "glued after true": f"SELECT * WHERE {{ ?s ?p trueSERVICE <{url}> {{ ?a ?b ?c }} }}",
        "SILENT glued": f"SELECT * WHERE {{ ?s ?p ?o SERVICESILENT <{url}> {{ ?a ?b ?c }} }}",
        "one dot group in a local name": ("PREFIX e: <http://example.org/> SELECT * WHERE "
                                          f"{{ ?s ?p e:a.b.SERVICE <{url}> {{ ?a ?b ?c }} }}"),
        "invalid IRI falls back to the prefix": (f"PREFIX e: <{base}> SELECT * WHERE "
                                                 f"{{ ?s ?p e:SERVICE <{url}> {{ ?a ?b ?c }} }}"),
        "comparison read as an IRI": ("SELECT * WHERE { ?s ?p ?o FILTER(!(?o<?o))SERVICE#>\r"
                                      f"<{url}>{{ ?a ?b ?c }}\n}}"),
    }


def _accepts(query: str) -> bool:
    try:
        check_local_query(query)
    except RefusedQuery:
        return False
    return True


def _calls_out(query: str, port: int, seen: list[bytes]) -> bool:
    """Whether an unguarded, in-process Oxigraph store calls the listener for `query`."""
    store = ox.Store()
    s, p = ox.NamedNode("http://example.org/s"), ox.NamedNode("http://example.org/p")
    for o in (ox.Literal("x"), ox.Literal(True), ox.NamedNode("http://example.org/a.b"),
              ox.NamedNode(f"http://127.0.0.1:{port}")):
        store.add(ox.Quad(s, p, o))
    before = len(seen)
    with contextlib.suppress(OSError):  # the listener hangs up once the request is in
        list(store.query(query))
    deadline = time.monotonic() + 3
    while len(seen) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(seen) > before


@pytest.mark.parametrize("name", list(_quirks("http://h/k", "http://h")))
def test_guard_refuses_each_engine_quirk(name: str, listener: tuple[int, list[bytes]]) -> None:
    port, seen = listener
    query = _quirks(f"http://127.0.0.1:{port}/k", f"http://127.0.0.1:{port}")[name]
    assert _calls_out(query, port, seen), f"{name}: not a real quirk, the engine did not call out"
    with pytest.raises(RefusedQuery, match="SERVICE"):
        check_local_query(query)


def test_comments_end_where_the_engine_ends_them() -> None:
    for end in ENGINE_LINE_ENDS + OTHER_BREAKS:
        query = f"SELECT * WHERE {{ ?s ?p ?o # note{end}SERVICE <http://127.0.0.1:9/k> {{ ?a ?b ?c }}\n}}"
        # CR, LF, CRLF end the comment (SERVICE is live); the others do not (it is commented out)
        assert _accepts(query) == (end not in ENGINE_LINE_ENDS), ascii(end)


@pytest.mark.parametrize("space", [*OTHER_BREAKS, "\xa0"], ids=ascii)
def test_only_engine_whitespace_separates_tokens(space: str) -> None:
    with pytest.raises(RefusedQuery, match=f"U\\+{ord(space):04X}"):
        check_local_query(f"SELECT{space}* WHERE {{ ?s ?p ?o }}")
    for end in [*ENGINE_LINE_ENDS, "\t"]:
        check_local_query(f"SELECT{end}*{end}WHERE{end}{{ ?s ?p ?o }}")


def test_sandbox_alone_stops_service(small_index: Path, listener: tuple[int, list[bytes]]) -> None:
    """Whatever the text guard says: with it switched off, the child cannot open a socket."""
    port, seen = listener
    for service in ("SERVICE", "SERVICE SILENT"):
        query = f"SELECT * WHERE {{ ?s ?p ?o {service} <http://127.0.0.1:{port}/k> {{ ?a ?b ?c }} }}"
        with pytest.raises(NetworkBlocked, match="sandbox stopped it"):
            run_user_query(small_index, query, 20, guard=False)
    time.sleep(0.3)
    assert seen == []


# --- the property: generated hiding places, run through `kg sparql` ---------------------------

PRELUDE = ("PREFIX svc: <@URL@/> PREFIX e: <http://example.org/> PREFIX port: <@BASE@> "
           "SELECT * WHERE { BIND(<@URL@> AS ?svc) ?s ?p ?o ")
GAPS = [" ", "", "\t", "\r", "\r\n", "# c\r", "# c\n", *OTHER_BREAKS]


@st.composite
def service_calls(draw: st.DrawFn) -> str:
    keyword = draw(st.sampled_from(["SERVICE", "service", "SeRvIcE", "SERVICE SILENT", "SERVICESILENT"]))
    target = draw(st.sampled_from(["<@URL@>", "svc:k", "?svc"]))
    gap = draw(st.sampled_from(GAPS))
    return f"{keyword}{gap or ' '}{target}{gap}{{ ?a ?b ?c }}"


def _escaped(call: str, index: int, form: str) -> str:
    char = call[index % 7]  # a letter of SERVICE
    escape = {"u": f"\\u{ord(char):04X}", "U": f"\\U{ord(char):08X}", "uu": f"\\\\u{ord(char):04X}"}[form]
    return call[: index % 7] + escape + call[index % 7 + 1:]


@st.composite
def hidden(draw: st.DrawFn) -> str:
    """A fragment of a group that holds a SERVICE call somewhere: live, or hidden, or half-hidden."""
    call = draw(service_calls())
    place = draw(st.sampled_from(["plain", "comment", "string", "iri", "escape", "glued", "name"]))
    end = draw(st.sampled_from(ENGINE_LINE_ENDS + OTHER_BREAKS))
    if place == "comment":
        return draw(st.sampled_from([f"# {call}\n", f"# x{end}{call}\n", f"#{end}{call}#\n"]))
    if place == "string":
        quote = draw(st.sampled_from(["'", '"', "'''", '"""']))
        return f"BIND({quote}{call}{quote} AS ?z)"
    if place == "iri":
        return draw(st.sampled_from([f"FILTER(?o != <http://x/{call}>)", f"?s ?p <http://x/#{call}>",
                                     f"FILTER(?o<?o)#>{end}{call}\n"]))
    if place == "escape":
        return _escaped(call, draw(st.integers(0, 6)), draw(st.sampled_from(["u", "U", "uu"])))
    if place == "glued":
        glue = draw(st.sampled_from(["?s ?p true", "?s ?p 1", "?s ?p e:a.b.", "?s ?p port:", "?s ?p ?o."]))
        return glue + call
    if place == "name":
        return draw(st.sampled_from([f"?s ?p ?{call}", f"?s ?p e:{call}", f"?s ?p _:{call}"]))
    return call


@st.composite
def queries(draw: st.DrawFn) -> str:
    fragment = draw(hidden())
    for _ in range(draw(st.integers(0, 3))):
        wrap = draw(st.sampled_from(["{{ {} }}", "OPTIONAL {{ ?s ?p ?o {} }}", "{{ {} }} UNION {{ ?s ?p ?o }}",
                                     "FILTER EXISTS {{ {} }}", "MINUS {{ {} }}", "GRAPH ?g {{ {} }}"]))
        fragment = wrap.format(fragment)
    return PRELUDE + fragment + "\n} LIMIT 1"


def test_generated_queries_never_reach_the_listener(small_index: Path,
                                                    listener: tuple[int, list[bytes]]) -> None:
    port, seen = listener

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(template=queries())
    def run(template: str) -> None:
        query = (template.replace("@URL@", f"http://127.0.0.1:{port}/k")
                 .replace("@BASE@", f"http://127.0.0.1:{port}"))
        before = len(seen)
        result = CliRunner().invoke(main, ["kg", "sparql", "--index", str(small_index), query])
        assert result.exit_code in (0, 2), result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert "Traceback" not in result.output
        assert len(seen) == before, f"the listener got a connection: {query!r}"
        assert "sandbox stopped it" not in result.output, f"the guard let a call through: {query!r}"

    run()
    time.sleep(0.5)  # the listener polls: a late connection is still counted
    assert seen == []
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass  # and the oracle can fail: one plain connection is counted
    deadline = time.monotonic() + 2
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(seen) == 1
