"""Escaping for every term that enters a SPARQL query string.

Questions and LLM output are untrusted: an entity name such as `x> } DROP ALL #` must reach the
endpoint as data, never as syntax. An IRI holding a character SPARQL forbids inside `<...>`
(space, `<`, `>`, `"`, `{`, `}`, `|`, `^`, backtick, backslash, control characters), a lone
surrogate, or no scheme is rejected with ValueError: it cannot name a node of an RDF store, and
percent-encoding it would name a different IRI (`a b` would find `a%20b`). Everything else,
raw non-ASCII, `#`, `'`, `;`, `?` included, is legal inside `<...>` and passes unchanged. Strings
use SPARQL's escapes and lose other control characters.
"""

from __future__ import annotations

import re

_IRI_FORBIDDEN = re.compile(r'[\x00-\x20<>"{}|^`\\\ud800-\udfff]')
_IRI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_STRING_ESCAPES = {"\\": "\\\\", '"': '\\"', "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_STRING_SPECIAL = re.compile(r"[\\\"'\n\r\t\b\f]|[\x00-\x1f\x7f\ud800-\udfff]")
_LANG = re.compile(r"[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*")


def iri(value: str) -> str:
    """`<value>`; ValueError when `value` is no absolute IRI that SPARQL can write as `<value>`."""
    bad = _IRI_FORBIDDEN.search(value)
    if bad is not None:
        raise ValueError(f"invalid IRI {value!r}: character {bad.group(0)!r} is not allowed")
    if not _IRI_SCHEME.match(value):
        raise ValueError(f"invalid IRI {value!r}: no scheme (not an absolute IRI)")
    return "<" + value + ">"


def string(value: str) -> str:
    """A double-quoted SPARQL string literal holding `value` exactly (control characters and lone
    surrogates, which no UTF-8 query can carry, become spaces)."""

    def escape(match: re.Match[str]) -> str:
        char = match.group(0)
        return _STRING_ESCAPES.get(char, " ")

    return '"' + _STRING_SPECIAL.sub(escape, value) + '"'


def lang_literal(value: str, lang: str) -> str:
    """A language-tagged literal; an invalid tag is rejected rather than spliced in."""
    if not _LANG.fullmatch(lang):
        raise ValueError(f"invalid language tag {lang!r}")
    return string(value) + "@" + lang
