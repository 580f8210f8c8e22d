"""Name-based triple files: `head<TAB>relation<TAB>tail` (PathQuestion KBs, domain TSV/CSV) and
MetaQA's ID-dict form (`entities.dict`, `relations.dict`, id triples).

A header row (`head,relation,tail`, `subject,predicate,object`, `source,relation,target`...) is
recognised by its column names and skipped, never loaded as a fact; `header="yes"`/`"no"`
forces it. Fields are split on a tab, or by the csv module (quoting) for any other delimiter.

Stable IRIs are minted from names and the names become labels. A `<rel>_reverse` triple is stored
once, as `<tail> <rel> <head>`: the KG is queried in both directions.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import pyoxigraph as ox

from ingest.base.errors import InputError
from ingest.kg_batch import LABEL, KgBatch
from ingest.rejects import Reject
from ingest.sources import check_file, iter_lines
from ingest.terms import mint_entity, mint_relation

REVERSE_SUFFIX = "_reverse"
HEADER_CHOICES = ("auto", "yes", "no")
DELIMITER_NAMES = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}
# Column names of a header row: the middle one names the relation, and the first or the last
# names the head or tail. Real facts (`abraham_lincoln<TAB>children<TAB>...`) do not match.
_HEAD_NAMES = frozenset({"head", "subject", "source", "from", "src", "s", "h", "entity", "entity1", "head_entity",
                         "subject_entity", "source_entity", "start", "node1", "company"})
_RELATION_NAMES = frozenset({"relation", "predicate", "rel", "relationship", "relation_type", "property", "edge",
                             "edge_type", "link", "type", "p", "r", "label"})
_TAIL_NAMES = frozenset({"tail", "object", "target", "to", "dst", "o", "t", "value", "entity2", "tail_entity",
                         "object_entity", "target_entity", "end", "node2"})


class _Minter:
    """Caches NamedNodes per name and emits each entity's label once."""

    def __init__(self) -> None:
        self.entities: dict[str, ox.NamedNode] = {}
        self.relations: dict[str, ox.NamedNode] = {}

    def entity(self, name: str, batch: KgBatch) -> ox.NamedNode:
        node = self.entities.get(name)
        if node is None:
            iri = mint_entity(name)
            node = self.entities[name] = ox.NamedNode(iri)
            batch.meta.append((LABEL, iri, name))
        return node

    def relation(self, name: str) -> ox.NamedNode:
        node = self.relations.get(name)
        if node is None:
            node = self.relations[name] = ox.NamedNode(mint_relation(name))
        return node

    def add(self, head: str, relation: str, tail: str, batch: KgBatch) -> None:
        if relation.endswith(REVERSE_SUFFIX):
            head, tail, relation = tail, head, relation[: -len(REVERSE_SUFFIX)]
        batch.facts.append(
            ox.Quad(self.entity(head, batch), self.relation(relation), self.entity(tail, batch))
        )


def read_tsv(path: Path, header: str = "auto", delimiter: str = "auto") -> Iterator[KgBatch]:
    """Read `head<SEP>relation<SEP>tail` lines: tab-separated, or comma-separated for `.csv`
    files, unless `delimiter` names another (`tab`, `comma`, `;`, `|`, any one character).

    `header`: "auto" skips a first row whose fields are column names (counted as filtered
    "header row"), "yes" always skips the first row, "no" never does.
    """
    name = str(path)
    minter = _Minter()
    sep = tsv_delimiter(path, delimiter)
    if header not in HEADER_CHOICES:
        raise InputError(f"header must be one of {', '.join(HEADER_CHOICES)} (got {header!r})")
    first_row = True
    for first_line, lines, bytes_read in iter_lines(path):
        batch = KgBatch(lines=len(lines), bytes_read=bytes_read)
        for offset, raw in enumerate(lines):
            line_no = first_line + offset
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                batch.rejects.append(Reject(name, line_no, f"invalid UTF-8 at byte {exc.start}", raw.decode("utf-8", "replace")))
                first_row = False
                continue
            if not text.strip() and sep not in text:
                continue  # a blank line; one of delimiters only ("\t\t") is a row of empty fields, rejected below
            try:
                fields = _split(text.lstrip("\ufeff") if first_row else text, sep)
            except csv.Error as exc:
                batch.rejects.append(Reject(name, line_no, f"malformed CSV ({exc})", text))
                first_row = False
                continue
            if first_row:
                first_row = False
                if header == "yes" or (header == "auto" and looks_like_header(fields)):
                    batch.filtered["header row"] += 1
                    continue
            if len(fields) != 3 or not all(fields):
                reason = "only empty fields" if not any(fields) else f"expected 3 non-empty fields, got {len(fields)}"
                batch.rejects.append(Reject(name, line_no, reason, text))
                continue
            minter.add(fields[0], fields[1], fields[2], batch)
        yield batch


def tsv_delimiter(path: Path, delimiter: str = "auto") -> str:
    """The field separator: by extension for "auto" (`.csv` -> comma, else tab), else the named
    or given single character."""
    if delimiter == "auto":
        return "," if _base_suffix(path) == "csv" else "\t"
    sep = DELIMITER_NAMES.get(delimiter.lower(), delimiter)
    if len(sep) != 1 or sep in "\r\n\"":
        raise InputError(
            f"delimiter must be one character or one of {', '.join(n for n in DELIMITER_NAMES if n.isalpha())} (got {delimiter!r})"
        )
    return sep


def looks_like_header(fields: list[str]) -> bool:
    """Whether a first row names columns: three fields, the middle one a relation column name and
    the first or last a head or tail column name (`head,relation,tail`, `source,relation,target`)."""
    if len(fields) != 3:
        return False
    head, relation, tail = (f.strip().lower().replace(" ", "_").replace("-", "_") for f in fields)
    return relation in _RELATION_NAMES and (head in _HEAD_NAMES or tail in _TAIL_NAMES)


def _base_suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes if s.lower() not in (".gz", ".bz2")]
    return suffixes[-1].lstrip(".") if suffixes else ""


def _split(text: str, delimiter: str) -> list[str]:
    """The stripped fields of one line (CSV quoting rules for any delimiter but a tab)."""
    fields = text.split("\t") if delimiter == "\t" else next(csv.reader(io.StringIO(text), delimiter=delimiter))
    return [f.strip() for f in fields]


def _read_dict(path: Path) -> tuple[dict[str, str], list[Reject]]:
    """An `id<TAB>name` dictionary; a malformed line is rejected (file, line, reason), not fatal."""
    check_file(path)
    name = str(path)
    mapping: dict[str, str] = {}
    rejects: list[Reject] = []
    for line_no, raw in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            rejects.append(Reject(name, line_no, f"invalid UTF-8 at byte {exc.start}", raw.decode("utf-8", "replace")))
            continue
        if not text.strip():
            continue
        parts = text.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            rejects.append(Reject(name, line_no, "expected 'id<TAB>name'", text))
            continue
        mapping[parts[0].strip()] = parts[1]
    if not mapping:
        raise InputError(f"{path}: no 'id<TAB>name' line could be read ({len(rejects)} rejected)")
    return mapping, rejects


def metaqa_files(folder: Path) -> tuple[Path, Path, list[Path]]:
    """The entities dict, relations dict and triple files of a MetaQA KB folder."""
    if not folder.exists():
        raise InputError(f"{folder}: no such folder")
    if not folder.is_dir():
        raise InputError(f"{folder}: the metaqa format expects a folder holding entities.dict, relations.dict and the triple file")
    entities, relations = folder / "entities.dict", folder / "relations.dict"
    triples = sorted(p for p in folder.glob("*.txt"))
    for required in (entities, relations):
        if not required.exists():
            raise InputError(f"{folder}: missing {required.name}")
    if not triples:
        raise InputError(f"{folder}: no triple file (*.txt) found")
    return entities, relations, triples


def read_metaqa(folder: Path) -> Iterator[KgBatch]:
    """Read a MetaQA KB folder: id triples resolved through the two dictionaries."""
    entities_path, relations_path, triple_files = metaqa_files(folder)
    entities, entity_rejects = _read_dict(entities_path)
    relations, relation_rejects = _read_dict(relations_path)
    if entity_rejects or relation_rejects:
        yield KgBatch(rejects=entity_rejects + relation_rejects)
    minter = _Minter()
    for triples in triple_files:
        name = str(triples)
        for first_line, lines, bytes_read in iter_lines(triples):
            batch = KgBatch(lines=len(lines), bytes_read=bytes_read)
            for offset, raw in enumerate(lines):
                reject = _metaqa_triple(raw, entities, relations, minter, batch)
                if reject is not None:
                    batch.rejects.append(Reject(name, first_line + offset, *reject))
            yield batch


def _metaqa_triple(
    raw: bytes, entities: dict[str, str], relations: dict[str, str], minter: _Minter, batch: KgBatch
) -> tuple[str, str] | None:
    """Add one id triple line to `batch`; return (reason, text) when it is rejected instead."""
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        return f"invalid UTF-8 at byte {exc.start}", raw.decode("utf-8", "replace").strip()
    if not text:
        return None
    parts = [p.strip() for p in text.split("\t")]
    if len(parts) != 3:
        return f"expected 3 ids, got {len(parts)}", text
    lookups = (("entity", parts[0], entities), ("relation", parts[1], relations), ("entity", parts[2], entities))
    for kind, key, mapping in lookups:
        if key not in mapping:
            return f"unknown {kind} id {key!r}", text
    minter.add(entities[parts[0]], relations[parts[1]], entities[parts[2]], batch)
    return None
