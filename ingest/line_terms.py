"""A batch of N-Triples lines cut into terms with Arrow kernels, for the profile scans
(ingest/profile_scan.py); and the check of the lines that no parser will read.

The cut reads one line form: `S P O .`, the terms and the final dot separated by single spaces
or single tabs (the Freebase dump writes tabs), no escape in a subject or object IRI, a literal
with no unescaped quote and no carriage return inside. It declines (returns None) a batch with
any other line, for the Python parser to take. Comments and blank lines are left out (every
parser skips them).

Predicates and literal suffixes (`@lang`, `^^<datatype>`) are few per dump: each distinct one is
parsed once by pyoxigraph (`TermCache`), so a profile routes on exactly the values the line
parser would give, and an invalid one declines its batch.

The store validates what it loads. A line that a profile filters out is never loaded, so
`unparsed_lines_parse` checks those: a strict pattern that only valid terms match (plain http(s)
IRIs, literals without `\\u` escapes), and pyoxigraph's parser for the rest.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyoxigraph as ox

_TAILS = pa.array([".\n", ".\r\n", "."], pa.large_string())
_SKIPPED = pa.array(["\n", "\r\n", ""], pa.large_string())
# The shape of a subject or object term: an IRI without escape, or a blank node.
_NODE = r'^(?:<[^\x00-\x20<>"{}|^`\\]*>|_:[^\x00-\x20<>"\\]+)$'
# A literal up to its closing quote: escapes allowed (the store checks them), no bare quote.
_BODY = r'^"(?:[^"\\\r]|\\.)*$'
_SUFFIX = r'^(?:@[A-Za-z0-9-]+|\^\^<[^\x00-\x20<>"{}|^`\\]*>)?$'
_PREDICATE = r'^<[^\x00-\x20<>"]*>$'
# Terms that are valid for sure (RFC 3987 in its plain ASCII form; N-Triples escapes without
# \u): a line that holds only such terms parses. Anything else is left to pyoxigraph.
_PCHAR = r"(?:[A-Za-z0-9._~!$&'()*+,;=:@/-]|%[0-9A-Fa-f]{2})"
_QCHAR = r"(?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})"
SURE_IRI = rf"<https?://[A-Za-z0-9.-]+(?::[0-9]+)?(?:/{_PCHAR}*)?(?:\?{_QCHAR}*)?(?:#{_QCHAR}*)?>"
SURE_BLANK = r"_:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_-])?"
SURE_BODY = r'"(?:[^"\\\r\n]|\\[tbnrf"\'\\])*'
_SURE_NODE = f"^(?:{SURE_IRI}|{SURE_BLANK})$"


@dataclass
class LineTerms:
    """The triple lines of one batch and their terms, one row per line, in file order."""

    lines: pa.Array  # the whole lines (large_string)
    subject: pa.Array  # `<iri>` or `_:label`
    predicates: list[str]  # the distinct predicate terms
    predicate_index: np.ndarray  # per row, its predicate's place in `predicates`
    obj: pa.Array  # the object term; for a literal, with its suffix
    literal: np.ndarray  # per row, whether the object is a literal
    literal_rows: np.ndarray  # the rows of literal objects, ascending
    body: pa.Array  # per literal row: `"text`, the literal up to its closing quote
    suffixes: list[str]  # the distinct literal suffixes: "", "@en", "^^<iri>"
    suffix_index: np.ndarray  # per literal row, its suffix's place in `suffixes`
    whole: bool  # whether `lines` is the batch itself (no comment or blank line left out)

    def __len__(self) -> int:
        return len(self.lines)


def lines_of(data: bytes) -> pa.Array:
    """The lines of `data` (each with its newline) as a binary array over the same bytes."""
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")) + 1
    offsets = np.concatenate(([0], ends, [len(data)] if not data.endswith(b"\n") and data else []))
    offsets = offsets.astype(np.int64)
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)]
    )


def cut_lines(data: bytes) -> LineTerms | None:
    """Cut `data` (whole lines) into terms; None when a line is not in the form read here."""
    try:
        lines = lines_of(data).cast(pa.large_string())  # also checks that the batch is UTF-8
    except pa.ArrowInvalid:
        return None  # the line parser rejects the line that is not UTF-8, naming it
    skipped = pc.or_(pc.starts_with(lines, "#"), pc.is_in(lines, _SKIPPED))
    whole = not pc.any(skipped).as_py()
    if not whole:
        lines = pc.filter(lines, pc.invert(skipped))
    if len(lines) == 0:
        return _empty(lines)
    first = lines[0].as_py()
    sep = "\t" if first[first.find(">") + 1 : first.find(">") + 2] == "\t" else " "
    parts = pc.split_pattern(lines, sep, max_splits=2)
    if pc.min(pc.list_value_length(parts)).as_py() != 3:
        return None
    subject, predicate, rest = (pc.list_element(parts, i) for i in range(3))
    ends = pc.split_pattern(rest, sep, max_splits=1, reverse=True)
    if pc.min(pc.list_value_length(ends)).as_py() != 2 or not pc.all(pc.is_in(pc.list_element(ends, 1), _TAILS)).as_py():
        return None
    obj = pc.list_element(ends, 0)
    is_literal = pc.starts_with(obj, '"')
    nodes_ok = pc.and_(pc.match_substring_regex(subject, _NODE),
                       pc.or_(is_literal, pc.match_substring_regex(obj, _NODE)))
    if not pc.all(nodes_ok).as_py():
        return None
    literal = is_literal.to_numpy(zero_copy_only=False)
    literal_rows = np.flatnonzero(literal)
    halves = pc.split_pattern(pc.take(obj, literal_rows), '"', max_splits=1, reverse=True)
    body, suffix = pc.list_element(halves, 0), pc.list_element(halves, 1)
    if len(literal_rows) and not pc.all(pc.match_substring_regex(body, _BODY)).as_py():
        return None
    predicates, predicate_index = _distinct(predicate)
    suffixes, suffix_index = _distinct(suffix)
    return LineTerms(lines, subject, predicates, predicate_index, obj, literal, literal_rows, body,
                     suffixes, suffix_index, whole)


def _distinct(terms: pa.Array) -> tuple[list[str], np.ndarray]:
    encoded = pc.dictionary_encode(terms)
    return encoded.dictionary.to_pylist(), encoded.indices.to_numpy(zero_copy_only=False)


def _empty(lines: pa.Array) -> LineTerms:
    none = np.zeros(0, dtype=np.int64)
    empty = pa.array([], pa.large_string())
    return LineTerms(lines, empty, [], none, empty, np.zeros(0, dtype=bool), none, empty, [], none, False)


@dataclass
class TermCache:
    """Predicate IRIs and literal suffixes as pyoxigraph parses them, each parsed once."""

    predicates: dict[str, str | None] = field(default_factory=dict)
    suffixes: dict[str, ox.Literal | None] = field(default_factory=dict)

    def predicate(self, term: str) -> str | None:
        """The IRI of a predicate term (`<...>`, escapes decoded); None when it is not valid."""
        if term not in self.predicates:
            quad = _parse_one(f"<x:s> {term} <x:o> .\n") if re.fullmatch(_PREDICATE, term) else None
            self.predicates[term] = quad.predicate.value if quad is not None else None
        return self.predicates[term]

    def suffix(self, suffix: str) -> ox.Literal | None:
        """The empty literal with this suffix (its language or datatype); None when not valid."""
        if suffix not in self.suffixes:
            quad = _parse_one(f'<x:s> <x:p> ""{suffix} .\n') if re.fullmatch(_SUFFIX, suffix) else None
            self.suffixes[suffix] = quad.object if quad is not None and isinstance(quad.object, ox.Literal) else None
        return self.suffixes[suffix]


def _parse_one(line: str) -> ox.Quad | None:
    try:
        quads = list(ox.parse(line.encode(), ox.RdfFormat.N_TRIPLES))
    except (SyntaxError, ValueError):
        return None
    return quads[0] if len(quads) == 1 else None


@lru_cache(maxsize=4096)
def language_is_valid(tag: str) -> bool:
    """Whether pyoxigraph's parser takes `tag` as a literal's language tag."""
    return re.fullmatch(_SUFFIX, f"@{tag}") is not None and _parse_one(f'<x:s> <x:p> ""@{tag} .\n') is not None


def unparsed_lines_parse(terms: LineTerms, rows: np.ndarray) -> bool:
    """Whether the lines at `rows` (which no parser will read) are valid N-Triples, as the line
    parser would find. Their predicates and suffixes are checked by `TermCache` already."""
    if len(rows) == 0:
        return True
    sure = pc.match_substring_regex(pc.take(terms.subject, rows), _SURE_NODE).to_numpy(zero_copy_only=False)
    literal = terms.literal[rows]
    sure_obj = np.zeros(len(rows), dtype=bool)
    nodes = np.flatnonzero(~literal)
    sure_obj[nodes] = pc.match_substring_regex(pc.take(terms.obj, rows[nodes]), _SURE_NODE).to_numpy(zero_copy_only=False)
    literals = np.flatnonzero(literal)
    if len(literals):
        at = np.searchsorted(terms.literal_rows, rows[literals])
        sure_obj[literals] = pc.match_substring_regex(pc.take(terms.body, at), f"^{SURE_BODY}$").to_numpy(zero_copy_only=False)
    unsure = rows[~(sure & sure_obj)]
    if len(unsure) == 0:
        return True
    text = "".join(pc.take(terms.lines, unsure).to_pylist())
    try:
        deque(ox.parse(text.encode(), ox.RdfFormat.N_TRIPLES), maxlen=0)
    except (SyntaxError, ValueError):
        return False
    return True
