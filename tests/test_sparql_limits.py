"""`kg sparql` with limits (issue 24, item 2): a query too long or too deep is refused with a
clear message; one that runs past `--timeout` or crashes the store ends with a message and exit
2, never a traceback or a segfault of the caller; the probe's CR-comment SERVICE reaches nothing.

Before: a 130 KB chain of OPTIONALs segfaulted `kg sparql` after 37 s, a 107 KB IN list ran 98 s,
and `# c<CR>SERVICE <url> {...}` made the store POST to the URL, then a traceback."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli import main
from engine.access.sparql_guard import MAX_NESTING_DEPTH, MAX_QUERY_CHARS
from engine.access.sparql_sandbox import QueryCrashed, run_user_query
from tests import test_sparql_guard

REPO = Path(__file__).resolve().parents[1]
small_index = test_sparql_guard.small_index  # fixtures: a two-fact index, a recording TCP listener
listener = test_sparql_guard.listener


def _sparql(index: Path, query: str, *options: str) -> Result:
    return CliRunner().invoke(main, ["kg", "sparql", "--index", str(index), *options, query])


def _values_query(chars: int) -> str:
    head, tail = "SELECT ?x WHERE { VALUES ?x { ", "} }"
    return head + '"v" ' * ((chars - len(head) - len(tail)) // 4) + tail


def _nested(depth: int) -> str:
    return "SELECT * WHERE " + "{ " * depth + "?s ?p ?o" + " }" * depth


def test_a_query_over_the_size_limit_is_refused(small_index: Path) -> None:
    result = _sparql(small_index, _values_query(MAX_QUERY_CHARS + 100))
    assert result.exit_code == 2, result.output
    assert f"the limit is {MAX_QUERY_CHARS:,}" in result.output
    assert _sparql(small_index, _values_query(MAX_QUERY_CHARS)).exit_code == 0


def test_an_over_deep_query_is_refused(small_index: Path) -> None:
    for depth in (MAX_NESTING_DEPTH + 1, 40):  # 40: rdflib's parser overflowed Python's stack
        result = _sparql(small_index, _nested(depth))
        assert result.exit_code == 2, result.output
        assert f"nest {depth} deep; the limit is {MAX_NESTING_DEPTH}" in result.output
        assert "Traceback" not in result.output
    assert _sparql(small_index, _nested(MAX_NESTING_DEPTH)).exit_code == 0


def test_a_query_past_a_tiny_timeout_is_stopped_with_exit_2(small_index: Path) -> None:
    # 2 facts, 40 independent patterns: 2**40 rows to count, so it would run for hours
    patterns = " ".join(f"?a{i} ?b{i} ?c{i} ." for i in range(40))
    query = f"SELECT (COUNT(*) AS ?n) WHERE {{ {patterns} }}"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "cli.py", "kg", "sparql", "--index", str(small_index),
                           "--timeout", "1", query], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "SPARQL query stopped after 1 s (--timeout)" in done.stderr
    assert "Traceback" not in done.stderr
    assert time.monotonic() - started < 60


def test_a_crash_of_the_store_is_a_message(small_index: Path) -> None:
    """20,000 nested groups overflow Oxigraph's stack (a segfault within 0.2 s): with the guard
    off, so that the query reaches the store, the caller gets a one-line error."""
    with pytest.raises(QueryCrashed, match=r"crashed the store process \(signal SIG"):
        run_user_query(small_index, _nested(20_000), 60, guard=False)
    result = _sparql(small_index, _nested(20_000))  # with the guard: refused before it runs
    assert result.exit_code == 2
    assert "characters long; the limit is" in result.output


def test_the_cr_comment_service_command_reaches_nothing(small_index: Path,
                                                        listener: tuple[int, list[bytes]]) -> None:
    port, seen = listener
    query = f"SELECT * WHERE {{ ?s ?p ?o # c\rSERVICE <http://127.0.0.1:{port}/k> {{ ?a ?b ?c }}\n}} LIMIT 1"
    result = _sparql(small_index, query)
    assert result.exit_code == 2, result.output
    assert f"SPARQL query refused: SERVICE <http://127.0.0.1:{port}/k>" in result.output
    assert "Traceback" not in result.output
    time.sleep(0.3)
    assert seen == []
