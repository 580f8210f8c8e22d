"""Escaping for every term that enters a SPARQL query string.

Questions and LLM output are untrusted: an entity name such as `x> } DROP ALL #` must reach the
endpoint as data, never as syntax. IRIs are percent-encoded where SPARQL forbids a character;
strings use SPARQL's escapes and lose other control characters.
"""

from __future__ import annotations

import re

_IRI_FORBIDDEN = re.compile(r'[\x00-\x20<>"{}|^`\\]')
_STRING_ESCAPES = {"\\": "\\\\", '"': '\\"', "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_STRING_SPECIAL = re.compile(r"[\\\"'\n\r\t\b\f]|[\x00-\x1f\x7f]")
_LANG = re.compile(r"[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*")


def iri(value: str) -> str:
    """`<value>` with every character SPARQL forbids in an IRI percent-encoded."""
    return "<" + _IRI_FORBIDDEN.sub(lambda m: f"%{ord(m.group(0)):02X}", value) + ">"


def string(value: str) -> str:
    """A double-quoted SPARQL string literal holding `value` exactly (control chars become spaces)."""

    def escape(match: re.Match[str]) -> str:
        char = match.group(0)
        return _STRING_ESCAPES.get(char, " ")

    return '"' + _STRING_SPECIAL.sub(escape, value) + '"'


def lang_literal(value: str, lang: str) -> str:
    """A language-tagged literal; an invalid tag is rejected rather than spliced in."""
    if not _LANG.fullmatch(lang):
        raise ValueError(f"invalid language tag {lang!r}")
    return string(value) + "@" + lang
