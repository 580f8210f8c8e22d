"""Mappings from document files to entities: a sidecar CSV (`--docs-map`) and front matter.

A map file is a CSV with the header `file,entity` (an optional third column `title`); `file`
is a path relative to the map file's folder (or absolute), `entity` an entity IRI / short id
(Q42, m.0abc) or the label of a KG entity. Every row must name an existing file; the build
fails naming the map file and line otherwise (and, later, for an entity the KG does not have,
or a file no `files` source reads). A mapping is an explicit instruction: dropping a row
quietly would give exactly the unlinked corpus it was written to avoid.

Front matter is the YAML-ish block at the top of a text or markdown file:

    ---
    entity: Acme Corp
    title: Acme Corp annual report 2023
    ---

Only top-level `key: value` lines are read (`entity`, `title`); other keys are allowed and
ignored, and the block is not part of the document's text.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ingest.base.errors import InputError

MAP_COLUMNS = ("file", "entity", "title")
_FRONT_KEY = re.compile(r"^([A-Za-z_][\w-]*)\s*:\s*(.*?)\s*$")


@dataclass(frozen=True)
class MapEntry:
    """The entity (and optional title) a map row gives one file, and where the row is."""

    entity: str
    title: str | None
    origin: str  # "map.csv:3"


class DocsMap:
    """The rows of every `--docs-map` file by resolved document path; remembers which rows a
    reader used, so that rows naming a file no `files` source read can be reported."""

    def __init__(self, entries: dict[Path, MapEntry]) -> None:
        self.entries = entries
        self._used: set[Path] = set()

    @classmethod
    def read(cls, paths: Iterable[Path]) -> DocsMap:
        entries: dict[Path, MapEntry] = {}
        for path in paths:
            for file, entry in _read_map_file(Path(path)):
                known = entries.get(file)
                if known is not None and known.entity != entry.entity:
                    raise InputError(f"{entry.origin}: {file} is already mapped to {known.entity!r} at {known.origin}")
                entries[file] = entry
        return cls(entries)

    def __len__(self) -> int:
        return len(self.entries)

    def lookup(self, file: Path) -> MapEntry | None:
        """The row for `file` (resolved), marked as used; None when no row names it."""
        key = file.resolve()
        entry = self.entries.get(key)
        if entry is not None:
            self._used.add(key)
        return entry

    def unused(self) -> list[tuple[Path, MapEntry]]:
        """Rows no reader asked for, in map order."""
        return [(file, entry) for file, entry in self.entries.items() if file not in self._used]


def _read_map_file(path: Path) -> list[tuple[Path, MapEntry]]:
    if not path.is_file():
        raise InputError(f"{path}: no such --docs-map file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    rows = [(n, row) for n, row in enumerate(csv.reader(text.splitlines()), start=1)
            if row and any(c.strip() for c in row) and not row[0].lstrip().startswith("#")]
    if not rows:
        raise InputError(f"{path}: empty --docs-map file (expected a header row file,entity)")
    line, header = rows[0]
    names = [c.strip().lower() for c in header]
    if names[:2] != ["file", "entity"] or not set(names) <= set(MAP_COLUMNS):
        raise InputError(f"{path}:{line}: the first row must be the header file,entity (optionally ,title); got {','.join(header)!r}")
    result = []
    for line, row in rows[1:]:
        origin = f"{path}:{line}"
        if len(row) != len(names):
            raise InputError(f"{origin}: expected {len(names)} fields ({','.join(names)}), got {len(row)}")
        values = dict(zip(names, (c.strip() for c in row), strict=True))
        if not values["file"] or not values["entity"]:
            raise InputError(f"{origin}: empty {'file' if not values['file'] else 'entity'} field")
        file = Path(values["file"]).expanduser()
        file = (file if file.is_absolute() else path.parent / file).resolve()
        if not file.is_file():
            raise InputError(f"{origin}: no such document file {values['file']!r} (looked for {file})")
        result.append((file, MapEntry(values["entity"], values.get("title") or None, origin)))
    return result


@dataclass(frozen=True)
class FrontMatter:
    """What the front matter of a file gives: entity and title (with the entity's line)."""

    entity: str | None
    entity_line: int | None
    title: str | None


def split_front_matter(raw: str) -> tuple[FrontMatter | None, str]:
    """(front matter, the rest of the text) when `raw` starts with a `---` block closed by a
    `---` line; (None, raw) otherwise (a lone `---` rule is text, not front matter)."""
    lines = raw.lstrip("\ufeff").split("\n")
    if not lines or lines[0].strip() != "---":
        return None, raw
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    except StopIteration:
        return None, raw
    values: dict[str, tuple[str, int]] = {}
    for number, line in enumerate(lines[1:end], start=2):
        match = _FRONT_KEY.match(line)
        if match is not None:  # indented lines (nested YAML) and the rest are not read
            values.setdefault(match.group(1).lower(), (_unquote(match.group(2)), number))
    entity = values.get("entity")
    title = values.get("title")
    front = FrontMatter(entity[0] or None if entity else None, entity[1] if entity else None,
                        title[0] or None if title else None)
    return front, "\n".join(lines[end + 1:])


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value
