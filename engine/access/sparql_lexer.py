"""Split a SPARQL query into tokens by the rules of the engine that runs it (Oxigraph 0.5).

The guard (sparql_guard.py) must see the words the engine sees, so this follows Oxigraph's
grammar (spargebra), not Python's idea of text:
- whitespace is space, tab, CR and LF only; a form feed, NEL (U+0085), U+2028, U+2029 or any
  other character outside a token is an error here (the engine refuses it too);
- a comment runs from `#` to the next CR or LF (a lone CR ends it, as in the engine);
- strings take only the escapes \\t \\b \\n \\r \\f \\" \\' \\\\; short ones hold no CR or LF;
- `<` starts an IRI, except right after a value inside an expression's parentheses, where the
  engine reads it as "less than" (`FILTER(?a<?b)` is no IRI `<?b)...>`);
- the engine has no word boundaries (`trueSERVICE <u> {}` is `true` then `SERVICE`): words
  are returned whole and the guard looks for keywords inside them;
- a prefixed name whose IRI (prefix + local part) is invalid is read by the engine as the bare
  prefix followed by more tokens, so its local part is only hidden when that IRI is valid.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

import pyoxigraph as ox

_BASE = ("A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u0370-\u037d\u037f-\u1fff\u200c-\u200d"
         "\u2070-\u218f\u2c00-\u2fef\u3001-\ud7ff\uf900-\ufdcf\ufdf0-\ufffd")
_CHARS_U = _BASE + "_"
_CHARS = _CHARS_U + "\\-0-9\u00b7\u0300-\u036f\u203f-\u2040"
_PLX = r"(?:%[0-9A-Fa-f]{2}|\\[_~.\-!$&'()*+,;=/?#@%])"
_ECHAR = r"""\\[tbnrf"'\\]"""

_STRING = re.compile(
    rf"'''(?:(?:''|')?(?:[^'\\]|{_ECHAR}))*'''"
    rf'|"""(?:(?:""|")?(?:[^"\\]|{_ECHAR}))*"""'
    rf"|'(?:[^'\\\n\r]|{_ECHAR})*'"
    rf'|"(?:[^"\\\n\r]|{_ECHAR})*"'
)
_IRI = re.compile(r'<[^<>"{}|^`\\\x00-\x20]*>')
_VAR = re.compile(rf"[?$][0-9{_CHARS_U}][0-9{_CHARS_U}\u00b7\u0300-\u036f\u203f-\u2040]*")
_BNODE = re.compile(rf"_:[0-9{_CHARS_U}][{_CHARS}]*(?:\.+[{_CHARS}]+)*")
_PNAME = re.compile(  # Oxigraph's PN_LOCAL allows one run of dots inside, not several
    rf"(?P<prefix>[{_BASE}][{_CHARS}]*(?:\.+[{_CHARS}]+)*)?:"
    rf"(?P<local>(?:[{_CHARS_U}:0-9]|{_PLX})(?:[{_CHARS}:]|{_PLX})*(?:\.+(?:[{_CHARS}:]|{_PLX})+)?)?"
)
_LANGTAG = re.compile(r"@[a-zA-Z]+(?:-[a-zA-Z0-9]+)*(?:--[a-zA-Z]+)?")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_PUNCT = re.compile(r"&&|\|\||!=|<=|>=|\^\^|[{}()\[\];,.*+\-/!=<>|^?$]")
_SPACE = re.compile(r"[ \t\r\n]+")
_COMMENT = re.compile(r"#[^\r\n]*")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")

OPERAND_KINDS = frozenset({"var", "iri", "pname", "string", "langtag", "number"})


@dataclass(frozen=True)
class Token:
    """One token. Only words, and the prefix of a prefixed name, can hold a keyword: the engine
    reads a string's or IRI's content, a variable's name and a valid local name as data."""

    kind: str  # word, var, iri, pname, string, langtag, bnode, number, punct
    text: str
    start: int
    prefix: str = ""  # pname: the part before ':' (words: the engine may read keywords there)
    local: str = ""  # pname: the part after ':'


@dataclass
class Lexed:
    """The tokens of a query, what could not be read (one line each) and the bracket depth."""

    tokens: list[Token] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    max_depth: int = 0


def position(text: str, offset: int) -> str:
    """`line L, column C` of `offset`, counting CRLF, CR and LF as line ends (as the engine)."""
    before = text[:offset]
    breaks = list(_LINE_BREAK.finditer(before))
    column = offset - (breaks[-1].end() if breaks else 0) + 1
    return f"line {len(breaks) + 1}, column {column}"


def _describe(char: str) -> str:
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" {name}" if name else "")


class _Context:
    """Which brackets are open, to tell a `<` comparison from an IRI (see module docstring)."""

    def __init__(self) -> None:
        self.stack: list[str] = []  # "{", "[", "expr" (an expression's parentheses), "list"
        self.recent: list[Token] = []  # the last two tokens
        self.max_depth = 0

    def in_expression_after_value(self) -> bool:
        prev = self.recent[-1] if self.recent else None
        if not self.stack or self.stack[-1] != "expr" or prev is None:
            return False
        return (prev.kind in OPERAND_KINDS or prev.text == ")"
                or (prev.kind == "word" and prev.text.lower() in {"true", "false"}))

    def see(self, token: Token) -> None:
        if token.kind == "punct" and token.text in "({[":
            self.stack.append(self._opened(token.text))
            self.max_depth = max(self.max_depth, len(self.stack))
        elif token.kind == "punct" and token.text in ")}]" and self.stack:
            self.stack.pop()
        self.recent = [*self.recent[-1:], token]

    def _opened(self, bracket: str) -> str:
        if bracket != "(":
            return bracket
        prev = self.recent[-1] if self.recent else None
        before = self.recent[-2] if len(self.recent) > 1 else None
        if (self.stack and self.stack[-1] == "expr") or prev is None:
            return "expr"
        if prev.kind == "word" and prev.text.lower() not in {"values", "a"}:
            return "expr"  # FILTER( BIND( STR( IN( SELECT( BY( ...
        if prev.kind in {"iri", "pname"} and before is not None and before.kind == "word":
            return "expr"  # FILTER <fn>( ...
        return "list"  # a collection, a property path, a VALUES row


def _local_is_data(prefix: str, local: str, prefixes: dict[str, str]) -> bool:
    """True when the engine reads `prefix:local` as one name: the prefix is declared and the IRI
    it makes is valid (else the engine falls back to `prefix:` and reads `local` as tokens)."""
    base = prefixes.get(prefix)
    if base is None:
        return False
    try:
        ox.NamedNode(base + local.replace("\\", ""))
    except ValueError:
        return False
    return True


def _read(text: str, pos: int, ctx: _Context, prefixes: dict[str, str]) -> Token | str:
    """The token at `pos` (not whitespace or a comment), or what is wrong there."""
    char = text[pos]
    if char in "\"'":
        found = _STRING.match(text, pos)
        return Token("string", found.group(), pos) if found else "an unterminated string"
    if char == "<" and not ctx.in_expression_after_value() and (found := _IRI.match(text, pos)):
        return Token("iri", found.group(), pos)
    for kind, pattern in (("var", _VAR), ("bnode", _BNODE), ("langtag", _LANGTAG)):
        if found := pattern.match(text, pos):
            return Token(kind, found.group(), pos)
    if found := _PNAME.match(text, pos):
        prefix, local = found.group("prefix") or "", found.group("local") or ""
        if local and not _local_is_data(prefix, local, prefixes):
            found = _PNAME.match(text[: pos + len(prefix) + 1], pos)  # `prefix:` alone
            assert found is not None
            local = ""
        return Token("pname", found.group(), pos, prefix, local)
    for kind, pattern in (("word", _WORD), ("number", _NUMBER), ("punct", _PUNCT)):
        if found := pattern.match(text, pos):
            return Token(kind, found.group(), pos)
    if char == "\\" and text[pos + 1: pos + 2] in ("u", "U"):
        return "a \\u escape outside a string or IRI"
    return f"{_describe(char)}, which is no SPARQL token or whitespace (only space, tab, CR and LF are)"


def _prefix_declared(tokens: list[Token], prefixes: dict[str, str]) -> None:
    """Record `PREFIX p: <iri>` once its three tokens are read (relative IRIs stay unknown)."""
    if len(tokens) >= 3 and tokens[-3].kind == "word" and tokens[-3].text.upper() == "PREFIX":
        name, iri = tokens[-2], tokens[-1]
        if name.kind == "pname" and not name.local and iri.kind == "iri":
            prefixes[name.prefix] = iri.text[1:-1]


def lex(text: str) -> Lexed:
    """The tokens of `text` by the engine's rules. An unreadable character is an error (named
    with its position); reading goes on after it, so that the guard still sees what follows."""
    out, ctx, prefixes = Lexed(), _Context(), {}
    pos = 0
    while pos < len(text):
        skip = _SPACE.match(text, pos) or _COMMENT.match(text, pos)
        if skip:
            pos = skip.end()
            continue
        token = _read(text, pos, ctx, prefixes)
        if isinstance(token, str):
            out.errors.append(f"{position(text, pos)}: {token}")
            pos += 1
            continue
        out.tokens.append(token)
        ctx.see(token)
        _prefix_declared(out.tokens, prefixes)
        pos += len(token.text)
    out.max_depth = ctx.max_depth
    return out
