"""Refuse a user's SPARQL text that could make the engine (or its endpoint) fetch something, or
that is too big or too deep to run safely.

Nothing localkg does at run time touches the network, but SPARQL can ask for it: `SERVICE <url>`
makes the embedded Oxigraph store send an HTTP request (measured: a POST to the URL, then a
traceback), `LOAD <url>` and other updates change or fetch data, and Virtuoso's `DEFINE get:soft`
pragmas dereference IRIs. `FROM` / `FROM NAMED` are allowed: the embedded store reads them as
names of its own graphs and never dereferences them (measured with a listening socket).

This guard is a message, not the wall: on the embedded store a user's query runs in a child
process that cannot open a socket (sparql_sandbox.py). It is what stands before an endpoint.

The text is read by the engine's rules (sparql_lexer.py: CR ends a comment; a form feed or
U+2028 is no whitespace), and what cannot be read is refused. Then two independent checks, so
that one parser's quirk cannot open a hole:
- a keyword scan of the engine's tokens (SERVICE and DEFINE also inside glued words such as
  `trueSERVICE`, which the engine reads as two);
- rdflib (already a dependency) parses the query, with every CR turned into LF so that its
  comments end where the engine's do; its parse tree shows each `ServiceGraphPattern`. Text that
  rdflib cannot parse as a query is refused (as an update when it parses as one).
`\\u` escapes are refused outright: engines disagree on whether they apply before parsing.
"""

from __future__ import annotations

import re
from typing import Any

from engine.access.sparql_lexer import Lexed, lex
from ingest.base.errors import InputError

MAX_QUERY_CHARS = 20_000
"""Longer texts are refused: rdflib takes seconds on 20,000 characters of arithmetic (4-10 s
measured), and the probe's 107 KB IN list ran 98 s, its 130 KB of OPTIONALs crashed the store."""
MAX_NESTING_DEPTH = 16
"""Deeper brackets ({, (, [) are refused: rdflib's parser overflows Python's stack at 26."""

FORBIDDEN_KEYWORDS = {
    "SERVICE": "SERVICE calls another endpoint over the network",
    "LOAD": "LOAD fetches a document",
    "DEFINE": "DEFINE pragmas can make an endpoint dereference IRIs",
    **{word: "updates are refused (kg sparql runs queries only)" for word in
       ("INSERT", "DELETE", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH")},
}
GLUED_KEYWORDS = ("SERVICE", "DEFINE")
"""Looked for inside words too: the engine reads `trueSERVICE` as `true SERVICE`."""

_ESCAPE = re.compile(r"\\[uU]")


class RefusedQuery(InputError):
    """A SPARQL text that could touch the network, change data, or exceed a limit."""


def _refuse(reason: str) -> RefusedQuery:
    return RefusedQuery(f"SPARQL query refused: {reason}")


def _keywords(lexed: Lexed) -> list[str]:
    found: set[str] = set()
    for token in lexed.tokens:
        word = token.text if token.kind == "word" else token.prefix if token.kind == "pname" else ""
        upper = word.upper()
        if upper in FORBIDDEN_KEYWORDS:
            found.add(upper)
        found.update(k for k in GLUED_KEYWORDS if k in upper)
    return sorted(found)


def keyword_problems(query: str) -> list[str]:
    """The forbidden keywords used as syntax in `query` (not inside strings, IRIs or names)."""
    return _keywords(lex(query))


def readable(query: str) -> Lexed:
    """The tokens of `query`; RefusedQuery when it is too long, uses \\u escapes, holds what the
    engine would not read (a form feed, U+2028, an unterminated string), or nests too deep."""
    if len(query) > MAX_QUERY_CHARS:
        raise _refuse(f"it is {len(query):,} characters long; the limit is {MAX_QUERY_CHARS:,} "
                      "(split it, or use a shorter VALUES or IN list)")
    if _ESCAPE.search(query):
        raise _refuse("\\u and \\U escapes are not accepted (engines disagree on where they "
                      "apply); write the character itself")
    lexed = lex(query)
    if lexed.errors:
        more = f" (and {len(lexed.errors) - 1} more)" if len(lexed.errors) > 1 else ""
        raise _refuse(f"cannot read it at {lexed.errors[0]}{more}")
    if lexed.max_depth > MAX_NESTING_DEPTH:
        raise _refuse(f"its brackets nest {lexed.max_depth} deep; the limit is "
                      f"{MAX_NESTING_DEPTH} (flatten the query)")
    return lexed


def _target(term: Any) -> str:
    """A SERVICE target as written: `<iri>`, `?var` or `prefix:local`."""
    if getattr(term, "name", None) == "pname":
        return f"{term.get('prefix') or ''}:{term.get('localname') or ''}"
    if type(term).__name__ == "Variable":
        return f"?{term}"
    return f"<{term}>"


def _services(node: Any, found: list[str]) -> None:
    """Collect the targets of every ServiceGraphPattern in an rdflib parse tree."""
    name = getattr(node, "name", None)
    if name == "ServiceGraphPattern":
        found.append(_target(node.get("term")))
    if isinstance(node, dict):
        for value in node.values():
            _services(value, found)
    elif isinstance(node, list | tuple) or type(node).__name__ == "ParseResults":
        for value in node:
            _services(value, found)


def _rdflib_problems(query: str) -> list[str]:
    """What rdflib's parse of `query` shows (its comments end at LF only: CR is made LF first)."""
    from pyparsing import ParseException
    from rdflib.plugins.sparql import parser

    text = query.replace("\r", "\n")
    failures = (ParseException, ValueError, TypeError, RecursionError)
    try:
        tree = parser.parseQuery(text)
    except failures as exc:
        try:
            parser.parseUpdate(text)
        except failures:
            reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            return [f"it does not parse as a SPARQL 1.1 query ({reason})"]
        return ["an update (kg sparql runs queries only)"]
    services: list[str] = []
    _services(tree, services)
    return [f"SERVICE {s}" for s in services]


def check_local_query(query: str) -> None:
    """RefusedQuery (an InputError: exit 2) when `query` could fetch anything, is an update,
    cannot be read by the engine's rules or parsed, or exceeds a limit (see `readable`)."""
    lexed = readable(query)
    parsed = _rdflib_problems(query)
    unparsed = [p for p in parsed if p.startswith("it does not parse")]
    problems = [p for p in parsed if p not in unparsed]
    for word in _keywords(lexed):
        if not any(p.startswith(word + " ") for p in problems):  # rdflib named it already
            problems.append(f"{word} ({FORBIDDEN_KEYWORDS[word]})")
    if problems:
        raise _refuse("; ".join(dict.fromkeys(problems + unparsed)) + ". localkg never touches "
                      "the network at run time; query the index's own graphs (FROM <graph> is "
                      "allowed)")
    if unparsed:
        raise RefusedQuery(f"SPARQL query failed: {unparsed[0]}")
