"""Freebase specifics kept free of heavy imports (the CLI's --help shows the drop list): the
predicates dropped by default, and repairs for the dump's known malformed lines (tried only on
lines that fail).
"""

from __future__ import annotations

import re

# Freebase predicates that say nothing a reasoning path can use (keys, typing, bookkeeping, web
# links). Prefix match on the local name (after http://rdf.freebase.com/ns/). `common.*` is
# dropped except the three predicates routed to entity metadata (name, alias, description),
# which are never dropped. `index --freebase-drop` replaces this list.
FREEBASE_DROP_PREFIXES: tuple[str, ...] = (
    "type.object.key",
    "type.object.type",
    "type.object.permission",
    "type.object.id",
    "type.type.",
    "type.property.",
    "type.user.",
    "type.namespace.",
    "type.content",
    "freebase.",
    "common.",
    "kg.",
    "user.",
    "dataworld.",
)

_IRI = re.compile(rb"<([^<>\s]*(?:\s[^<>]*)?)>")
_BAD_IRI_CHARS = re.compile(rb'[ "{}|^`\\]')
_BAD_ESCAPE = re.compile(rb'\\(?![tbnrf"\'\\uU])')
_LITERAL = re.compile(rb'"((?:[^"\\]|\\.)*)"')


def mend_freebase_line(line: bytes) -> bytes | None:
    """Return a repaired line, or None if nothing could be repaired.

    Repairs: characters that are illegal in IRIs (spaces, quotes, braces, backslashes) are
    percent-encoded; backslash escapes that N-Triples does not define (`\\$` for `$`) lose the
    backslash; a missing final ` .` is added.
    """
    fixed = _IRI.sub(lambda m: b"<" + _BAD_IRI_CHARS.sub(_percent, m.group(1)) + b">", line)
    fixed = _LITERAL.sub(lambda m: b'"' + _BAD_ESCAPE.sub(b"", m.group(1)) + b'"', fixed)
    stripped = fixed.rstrip()
    if not stripped.endswith(b"."):
        fixed = stripped + b" .\n"
    return fixed if fixed != line else None


def _percent(match: re.Match[bytes]) -> bytes:
    return b"%%%02X" % match.group(0)[0]
