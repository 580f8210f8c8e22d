"""Name-based triple files: `head<TAB>relation<TAB>tail` (PathQuestion KBs, domain TSV/CSV) and
MetaQA's ID-dict form (`entities.dict`, `relations.dict`, id triples).

Stable IRIs are minted from names and the names become labels. A `<rel>_reverse` triple is stored
once, as `<tail> <rel> <head>`: the KG is queried in both directions.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import pyoxigraph as ox

from ingest.errors import InputError
from ingest.kg_batch import LABEL, KgBatch
from ingest.rejects import Reject
from ingest.sources import check_file, iter_lines
from ingest.terms import mint_entity, mint_relation

REVERSE_SUFFIX = "_reverse"


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


def read_tsv(path: Path) -> Iterator[KgBatch]:
    """Read `head<TAB>relation<TAB>tail` lines (or comma-separated for `.csv` files)."""
    name = str(path)
    minter = _Minter()
    delimiter = "," if path.suffix.lower() == ".csv" else "\t"
    for first_line, lines, bytes_read in iter_lines(path):
        batch = KgBatch(lines=len(lines), bytes_read=bytes_read)
        for offset, raw in enumerate(lines):
            line_no = first_line + offset
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                batch.rejects.append(Reject(name, line_no, f"invalid UTF-8 at byte {exc.start}", raw.decode("utf-8", "replace")))
                continue
            if not text.strip():
                continue
            fields = next(csv.reader(io.StringIO(text), delimiter=delimiter)) if delimiter == "," else text.split("\t")
            fields = [f.strip() for f in fields]
            if len(fields) != 3 or not all(fields):
                batch.rejects.append(Reject(name, line_no, f"expected 3 non-empty fields, got {len(fields)}", text))
                continue
            minter.add(fields[0], fields[1], fields[2], batch)
        yield batch


def _read_dict(path: Path) -> dict[str, str]:
    check_file(path)
    mapping: dict[str, str] = {}
    for line_no, raw in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}:{line_no}: invalid UTF-8") from exc
        if not text.strip():
            continue
        parts = text.split("\t")
        if len(parts) != 2:
            raise InputError(f"{path}:{line_no}: expected 'id<TAB>name', got {text[:80]!r}")
        mapping[parts[0]] = parts[1]
    return mapping


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
    entities, relations = _read_dict(entities_path), _read_dict(relations_path)
    minter = _Minter()
    for triples in triple_files:
        name = str(triples)
        for first_line, lines, bytes_read in iter_lines(triples):
            batch = KgBatch(lines=len(lines), bytes_read=bytes_read)
            for offset, raw in enumerate(lines):
                parts = raw.decode("utf-8", "replace").strip().split("\t")
                if parts == [""]:
                    continue
                if len(parts) != 3:
                    batch.rejects.append(Reject(name, first_line + offset, f"expected 3 ids, got {len(parts)}", "\t".join(parts)))
                    continue
                try:
                    head, rel, tail = entities[parts[0]], relations[parts[1]], entities[parts[2]]
                except KeyError as exc:
                    batch.rejects.append(Reject(name, first_line + offset, f"unknown id {exc.args[0]!r}", "\t".join(parts)))
                    continue
                minter.add(head, rel, tail, batch)
            yield batch
