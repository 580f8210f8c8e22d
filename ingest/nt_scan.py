"""Reading a plain N-Triples batch with Arrow kernels instead of one Python object per line: which
lines are facts and which metadata, and how often each entity is named (its degree).

The scan does not validate. The store's own parser (`bulk_load`) does, and a batch it rejects is
parsed again line by line (see ingest/rdf_reader.py). So the scan only has to be exact on input
that parses; it reads one plain form, `S P O .` with single spaces and no escape in an IRI, and
declines (returns None) a batch with any other line, or with a blank node (which bulk_load
renames), for the Python parser to take. A literal must end its line: the facts and metadata of a
batch are loaded as N-Quads, where a fourth term would be a graph name, not an error.

Metadata lines in other languages that are valid for sure are counted here
(`drop_other_languages`); the other metadata lines left are parsed in Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.line_terms import SURE_BODY, SURE_IRI, language_is_valid, lines_of

DEGREE_SCHEMA = pa.schema([("id", pa.string()), ("n", pa.int64())])
# What may follow the object of a plain line: the final dot and the line end.
_TAILS = pa.array([".\n", ".\r\n", "."], pa.large_string())
_SKIPPED = pa.array(["\n", "\r\n", ""], pa.large_string())


@dataclass
class NtScan:
    """One batch as the scan read it."""

    # The bytes to bulk-load: the batch itself when no line is metadata, else its fact lines.
    facts: bytes
    fact_count: int
    # The lines whose predicate is a metadata predicate and that `plain_metadata` did not take
    # (b"" when none), for the caller to route.
    meta_lines: bytes
    # id (an IRI, or `_:label` for a blank node) -> how many fact lines name it as subject or
    # (non-literal) object; a line counts twice for an entity that is both.
    degrees: pa.Table
    # Metadata lines kept here (see `plain_metadata`), as N-Quads in the metadata graph.
    meta_nquads: bytes = b""
    meta_kept: int = 0


@dataclass(frozen=True)
class MetadataRouting:
    """How metadata lines are routed: predicates (IRIs), kept languages, the graph they go to."""

    predicates: tuple[str, ...]
    languages: frozenset[str]
    graph: str


# `<iri> <iri> "text"@lang .`: an IRI subject, a literal with no escape, no datatype (so no `^^`),
# an optional language tag. Any other metadata line is left to the caller.
_PLAIN_METADATA = r'^<[^>]*> <[^>]*> "[^"\\]*"(?:@(?P<lang>[A-Za-z][A-Za-z0-9-]*))? \.\r?\n?$'
# A backslash in the subject, the predicate or an object that is no literal (read from the
# line's start, so the match stops at a literal's opening quote).
_ESCAPED_IRI = r'^(?:[^ ]*\\|[^ ]+ [^ ]*\\|[^ ]+ [^ ]+ [^" ][^ ]*\\)'
# A line whose object is a literal must end with it: a fourth term (`"x" <g> .`, which the N-Quads
# load of a batch with metadata would take as a graph name) or a carriage return inside the
# literal (the parser's line end) declines the batch. A line that passes the first (end-anchored,
# so cheap) pattern but holds another term is not valid N-Quads either: the store rejects it.
_LITERAL_END = r'"(?:@[A-Za-z0-9-]+|\^\^<[^\x00-\x20<>"{}|^`\\]*>)? \.\r?\n?$'
_LITERAL_LINE = r'^[^ ]+ [^ ]+ "(?:[^"\\\r]|\\.)*"(?:@[A-Za-z0-9-]+|\^\^<[^\x00-\x20<>"{}|^`\\]*>)? \.\r?\n?$'
# A metadata line that is valid for sure (see ingest/line_terms.py) up to its language tag.
_SURE_LANGUAGE_LINE = rf'^{SURE_IRI} <[^>]*> {SURE_BODY}"@(?P<lang>[A-Za-z]+(?:-[A-Za-z0-9]+)*) \.\r?\n?$'


def scan_ntriples(data: bytes, meta: MetadataRouting) -> NtScan | None:
    """Scan `data` (whole N-Triples lines); None when a line is not in the plain form."""
    try:
        lines = lines_of(data).cast(pa.large_string())  # also checks that the batch is UTF-8
    except pa.ArrowInvalid:
        return None  # the line path rejects the line that is not UTF-8, naming it
    # Comments and blank lines are left to bulk_load, which skips them; an indented one is not
    # plain and declines the batch below.
    skipped = pc.or_(pc.starts_with(lines, "#"), pc.is_in(lines, _SKIPPED))
    triples = pc.filter(lines, pc.invert(skipped)) if pc.any(skipped).as_py() else lines
    parts = pc.split_pattern(triples, " ", max_splits=3)
    if len(triples) and pc.min(pc.list_value_length(parts)).as_py() != 4:
        return None
    subject, predicate, obj, tail = (pc.list_element(parts, i) for i in range(4))
    literal = pc.starts_with(obj, '"')
    # Each token must be one whole term: on a line that parses, two terms run together (`<a><b>`)
    # leave a later token that fails these tests. A backslash escape (`\u0041` spells `A`) makes
    # an IRI's value differ from its text.
    plain = pc.and_(
        pc.and_(_is_node(subject), _is_iri(predicate)),
        pc.or_(literal, pc.and_(_is_node(obj), pc.is_in(tail, _TAILS))),
    )
    if len(triples) and not pc.all(plain).as_py():
        return None
    # The store's bulk_load renames blank nodes (a new random id per load), so the entity table
    # would name nodes the store does not hold: a batch with one is parsed in Python.
    if pc.any(pc.or_(pc.starts_with(subject, "_:"), pc.starts_with(obj, "_:"))).as_py():
        return None
    if pc.any(literal).as_py() and not _literals_end_their_lines(pc.filter(triples, literal)):
        return None
    if pc.any(pc.match_substring_regex(triples, _ESCAPED_IRI)).as_py():
        return None
    is_meta = pc.is_in(predicate, pa.array([f"<{iri}>" for iri in meta.predicates], pa.large_string()))
    if pc.any(is_meta).as_py() is not True:
        nodes = pa.concat_arrays([subject, pc.filter(obj, pc.invert(literal))])
        return NtScan(facts=data, fact_count=len(subject), meta_lines=b"", degrees=_value_counts(nodes))
    keep = pc.invert(is_meta)
    subject, obj, literal = pc.filter(subject, keep), pc.filter(obj, keep), pc.filter(literal, keep)
    nodes = pa.concat_arrays([subject, pc.filter(obj, pc.invert(literal))])
    scan = NtScan(facts=_joined(pc.filter(triples, keep)), fact_count=len(subject), meta_lines=b"",
                  degrees=_value_counts(nodes))
    plain_metadata(pc.filter(triples, is_meta), meta, scan)
    return scan


def _literals_end_their_lines(lines: pa.Array) -> bool:
    if not pc.all(pc.match_substring_regex(lines, _LITERAL_END)).as_py():
        return False
    returns = pc.match_substring(lines, "\r")
    return not pc.any(returns).as_py() or pc.all(pc.match_substring_regex(pc.filter(lines, returns), _LITERAL_LINE)).as_py() is True


def plain_metadata(lines: pa.Array, meta: MetadataRouting, scan: NtScan) -> None:
    """Keep the metadata lines of the plain form `<iri> <iri> "text"@lang .` (no escape) whose
    language is none or one of `meta.languages` (or whose primary subtag is), as the generic
    profile would, as N-Quads in `meta.graph` (the store's parser validates them). The other
    lines, other languages included, go to `scan.meta_lines` for Python to parse: a line left
    out here must still be checked, and rejected if it does not parse.

    A kept line loses its language tag (checked here), as the KG stage writes parsed metadata:
    one entity's labels in `en` and `en-gb` are then the same quads on both paths, and so is
    the label that the entity table takes first."""
    found = pc.extract_regex(lines, _PLAIN_METADATA)
    plain = pc.is_valid(found)
    lang = pc.utf8_lower(found.field("lang"))  # the store writes language tags in lower case
    wanted = pa.array(sorted(meta.languages), pa.large_string())
    primary = pc.extract_regex(lang, r"^(?P<primary>[^-]*)").field("primary")
    lang_ok = pc.or_kleene(pc.is_null(lang), pc.or_kleene(pc.is_in(lang, wanted), pc.is_in(primary, wanted)))
    invalid = [tag for tag in pc.unique(pc.drop_null(lang)).to_pylist() if not language_is_valid(tag)]
    if invalid:
        lang_ok = pc.and_kleene(lang_ok, pc.invert(pc.is_in(lang, pa.array(invalid, pa.large_string()))))
    kept = pc.and_(plain, pc.fill_null(lang_ok, False))
    scan.meta_kept = pc.sum(kept).as_py() or 0
    quads = pc.replace_substring_regex(pc.filter(lines, kept), r'"(?:@[A-Za-z0-9-]+)? \.\r?\n?$', f'" <{meta.graph}> .\n')
    scan.meta_nquads = _joined(quads.combine_chunks() if isinstance(quads, pa.ChunkedArray) else quads)
    scan.meta_lines = _joined(pc.filter(lines, pc.invert(kept)))


def drop_other_languages(meta_lines: bytes, meta: MetadataRouting) -> tuple[bytes, int]:
    """Leave out of `meta_lines` (metadata lines that `plain_metadata` did not keep) those in a
    language other than `meta.languages` that are valid for sure (their subject, literal and
    language tag; the predicate is a metadata predicate): the profile would only count them.
    Return the other lines, for Python to parse, and how many were left out."""
    if not meta_lines:
        return meta_lines, 0
    lines = lines_of(meta_lines).cast(pa.large_string())
    lang = pc.utf8_lower(pc.extract_regex(lines, _SURE_LANGUAGE_LINE).field("lang"))
    tags = pc.unique(pc.drop_null(lang)).to_pylist()
    other = [tag for tag in tags if language_is_valid(tag) and tag not in meta.languages and tag.split("-")[0] not in meta.languages]
    drop = pc.fill_null(pc.is_in(lang, pa.array(other, pa.large_string())), False)
    dropped = pc.sum(drop).as_py() or 0
    return (_joined(pc.filter(lines, pc.invert(drop))) if dropped else meta_lines), dropped


def _is_iri(terms: pa.Array) -> pa.Array:
    return pc.and_(pc.starts_with(terms, "<"), pc.ends_with(terms, ">"))


def _is_node(terms: pa.Array) -> pa.Array:
    """An IRI or a blank node (`_:label`)."""
    return pc.or_(_is_iri(terms), pc.starts_with(terms, "_:"))


def _value_counts(nodes: pa.Array) -> pa.Table:
    """Degree rows of node terms: an IRI's id is its text inside the brackets (cut after counting:
    there are fewer distinct terms than terms)."""
    counts = pc.value_counts(nodes)
    terms = counts.field("values")
    ids = pc.if_else(pc.starts_with(terms, "<"), pc.utf8_slice_codeunits(terms, 1, -1), terms)
    return pa.table([ids.cast(pa.string()), counts.field("counts")], schema=DEGREE_SCHEMA)


def _joined(lines: pa.Array) -> bytes:
    """The bytes of a (freshly filtered, so contiguous) string array, lines back to back."""
    if len(lines) == 0:
        return b""
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    return lines.buffers()[2][int(offsets[0]) : int(offsets[-1])].to_pybytes()
