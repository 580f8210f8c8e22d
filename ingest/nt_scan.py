"""Reading a plain N-Triples batch with Arrow kernels instead of one Python object per line: which
lines are facts and which metadata, and how often each entity is named (its degree).

The scan does not validate. The store's own parser (`bulk_load`) does, and a batch it rejects is
parsed again line by line (see ingest/rdf_reader.py). So the scan only has to be exact on input
that parses; it reads one plain form, `S P O .` with single spaces and no escape in an IRI, and
declines (returns None) a batch with any other line, for the Python parser to take.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
    # The lines whose predicate is a metadata predicate (b"" when none), for the caller to route.
    meta_lines: bytes
    # id (an IRI, or `_:label` for a blank node) -> how many fact lines name it as subject or
    # (non-literal) object; a line counts twice for an entity that is both.
    degrees: pa.Table


def scan_ntriples(data: bytes, meta_predicates: Iterable[str]) -> NtScan | None:
    """Scan `data` (whole N-Triples lines); None when a line is not in the plain form."""
    try:
        lines = _lines(data).cast(pa.large_string())  # also checks that the batch is UTF-8
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
    # leave a later token that fails these tests. A `\\` escape (`\\u0041` spells `A`) makes an
    # IRI's value differ from its text.
    plain = pc.and_(
        pc.and_(_is_node(subject), _is_iri(predicate)),
        pc.or_(literal, pc.and_(_is_node(obj), pc.is_in(tail, _TAILS))),
    )
    if len(triples) and not pc.all(plain).as_py():
        return None
    if pc.any(pc.match_substring(triples, "\\")).as_py():
        escaped = pc.or_(pc.or_(pc.match_substring(subject, "\\"), pc.match_substring(predicate, "\\")),
                         pc.and_(pc.invert(literal), pc.match_substring(obj, "\\")))
        if pc.any(escaped).as_py():
            return None
    meta = pc.is_in(predicate, pa.array([f"<{iri}>" for iri in meta_predicates], pa.large_string()))
    has_meta = pc.any(meta).as_py() is True
    if has_meta:
        keep = pc.invert(meta)
        subject, obj, literal = pc.filter(subject, keep), pc.filter(obj, keep), pc.filter(literal, keep)
    nodes = pa.concat_arrays([subject, pc.filter(obj, pc.invert(literal))])
    return NtScan(
        facts=_joined(pc.filter(triples, keep)) if has_meta else data,
        fact_count=len(subject),
        meta_lines=_joined(pc.filter(triples, meta)) if has_meta else b"",
        degrees=_value_counts(nodes),
    )


def _lines(data: bytes) -> pa.Array:
    """The lines of `data` (each with its newline) as a binary array over the same bytes."""
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")) + 1
    offsets = np.concatenate(([0], ends, [len(data)] if not data.endswith(b"\n") and data else []))
    offsets = offsets.astype(np.int64)
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)]
    )


def _is_iri(terms: pa.Array) -> pa.Array:
    return pc.and_(pc.starts_with(terms, "<"), pc.ends_with(terms, ">"))


def _is_node(terms: pa.Array) -> pa.Array:
    """An IRI or a blank node (`_:label`)."""
    return pc.or_(_is_iri(terms), pc.starts_with(terms, "_:"))


def _value_counts(nodes: pa.Array) -> pa.Table:
    """Degree rows of node terms: an IRI's id is its text inside the brackets."""
    ids = pc.if_else(pc.starts_with(nodes, "<"), pc.utf8_slice_codeunits(nodes, 1, -1), nodes)
    counts = pc.value_counts(ids)
    return pa.table([counts.field("values").cast(pa.string()), counts.field("counts")], schema=DEGREE_SCHEMA)


def _joined(lines: pa.Array) -> bytes:
    """The bytes of a (freshly filtered, so contiguous) string array, lines back to back."""
    if len(lines) == 0:
        return b""
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    return lines.buffers()[2][int(offsets[0]) : int(offsets[-1])].to_pybytes()
