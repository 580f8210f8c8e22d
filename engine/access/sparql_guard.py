"""Refuse a user's SPARQL text that could make the engine (or its endpoint) fetch something.

Nothing localkg does at run time touches the network, but SPARQL can ask for it: `SERVICE <url>`
makes the embedded Oxigraph store send an HTTP request (measured: a POST to the URL, then a
traceback), `LOAD <url>` and other updates change or fetch data, and Virtuoso's `DEFINE get:soft`
pragmas dereference IRIs. `FROM` / `FROM NAMED` are allowed: the embedded store reads them as
names of its own graphs and never dereferences them (measured with a listening socket).

Two independent checks, so that a parser difference cannot open a hole:
- rdflib (already a dependency) parses the query into its algebra, where a `ServiceGraphPattern`
  is visible; text that parses only as an update is refused as one;
- a keyword scan of the text with strings, IRIs, comments, variables and prefixed names removed
  (after SPARQL's `\\uXXXX` pre-processing), for text rdflib cannot parse.
"""

from __future__ import annotations

import re
from typing import Any

from ingest.errors import InputError

FORBIDDEN_KEYWORDS = {
    "SERVICE": "SERVICE calls another endpoint over the network",
    "LOAD": "LOAD fetches a document",
    "DEFINE": "DEFINE pragmas can make an endpoint dereference IRIs",
    **{word: "updates are refused (kg sparql runs queries only)" for word in
       ("INSERT", "DELETE", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH")},
}

_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")
_NOISE = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""'  # long strings
    r"|'''(?:[^'\\]|\\.|'(?!''))*'''"
    r'|"(?:[^"\\\n]|\\.)*"'  # short strings
    r"|'(?:[^'\\\n]|\\.)*'"
    r"|<[^<>\"{}|^`\\\x00-\x20]*>"  # IRIs (a `<` operator is followed by a space or a term)
    r"|#[^\n]*"  # comments
    r"|[?$][\w]+"  # variables
    r"|[\w.-]*:[\w.:%-]*"  # prefixed names and PREFIX declarations
    r"|_:[\w.-]+",  # blank node labels
    re.DOTALL,
)
_WORD = re.compile(r"[A-Za-z]+")


class RefusedQuery(InputError):
    """A SPARQL text that could touch the network or change data."""


def _unescape(text: str) -> str:
    """SPARQL processes \\u / \\U escapes before parsing: check what the parser will see."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)


def keyword_problems(query: str) -> list[str]:
    """The forbidden keywords used as syntax in `query` (not inside strings, IRIs or names)."""
    bare = _NOISE.sub(" ", _unescape(query))
    found = {w.upper() for w in _WORD.findall(bare)} & set(FORBIDDEN_KEYWORDS)
    return sorted(found)


def _services(node: Any, found: list[str]) -> None:
    """Collect the targets of every ServiceGraphPattern in an rdflib parse tree or algebra."""
    name = getattr(node, "name", None)
    if name == "ServiceGraphPattern":
        found.append(str(node.get("term")))
    if isinstance(node, dict):
        for value in node.values():
            _services(value, found)
    elif isinstance(node, list | tuple) or type(node).__name__ == "ParseResults":
        for value in node:
            _services(value, found)


def _rdflib_problems(query: str) -> list[str] | None:
    """What rdflib's parse of `query` shows; None when rdflib cannot parse it as a query."""
    from pyparsing import ParseException
    from rdflib.plugins.sparql import parser

    try:
        tree = parser.parseQuery(query)
    except (ParseException, ValueError, TypeError):
        try:
            parser.parseUpdate(query)
        except (ParseException, ValueError, TypeError):
            return None
        return ["an update (kg sparql runs queries only)"]
    services: list[str] = []
    _services(tree, services)
    return [f"SERVICE <{s}>" for s in services]


def check_local_query(query: str) -> None:
    """RefusedQuery (an InputError: exit 2) when `query` could fetch anything or is an update."""
    problems = [*(_rdflib_problems(query) or [])]
    for word in keyword_problems(query):
        if not any(p.startswith(word + " ") for p in problems):  # rdflib named it already
            problems.append(f"{word} ({FORBIDDEN_KEYWORDS[word]})")
    if problems:
        raise RefusedQuery(
            "SPARQL query refused: " + "; ".join(dict.fromkeys(problems)) + ". localkg never touches "
            "the network at run time; query the index's own graphs (FROM <graph> is allowed)"
        )
