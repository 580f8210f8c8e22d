"""The entity table (`entities.parquet`): ids, labels, aliases, degrees, and lookups by name."""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pyarrow.parquet as pq

from index.manifest import read_manifest
from index.paths import IndexPaths
from ingest.base.errors import IndexError_
from ingest.terms import expand_entity_id, local_name

_SPACES = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")


def normalise(text: str) -> str:
    """Case-, accent-, underscore- and spacing-insensitive form of a name for matching."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = text.casefold().replace("_", " ")
    text = _SPACES.sub(" ", text).strip()
    return _EDGE_PUNCT.sub("", text) or text


@dataclass
class EntityTable:
    """In-memory view of entities.parquet with exact, alias and normalised-name lookups."""

    ids: list[str]
    labels: list[str | None]
    aliases: list[list[str]]
    degrees: list[int]
    descriptions: list[str | None]
    wikipedia_titles: list[str | None]

    @classmethod
    def open(cls, paths: IndexPaths) -> EntityTable:
        read_manifest(paths)  # a clear error when the folder is not an index
        if not paths.entities.exists():
            raise IndexError_(
                f"{paths.root}: index has no entity table (build it with --kg or --docs; a documents-only "
                f"index made before documents gave entities gets one from `index --out {paths.root}`)"
            )
        return cls.from_parquet(paths.entities)

    @classmethod
    def from_parquet(cls, path: Path) -> EntityTable:
        """Read entities.parquet directly (also inside a build's temp folder, before a manifest)."""
        columns = ["id", "label", "aliases", "degree", "description", "wikipedia_title"]
        data = pq.read_table(path, columns=columns).to_pydict()
        return cls(
            ids=data["id"],
            labels=data["label"],
            aliases=[a or [] for a in data["aliases"]],
            degrees=data["degree"],
            descriptions=data["description"],
            wikipedia_titles=data["wikipedia_title"],
        )

    def __len__(self) -> int:
        return len(self.ids)

    @cached_property
    def _row(self) -> dict[str, int]:
        return {entity: i for i, entity in enumerate(self.ids)}

    @cached_property
    def _exact(self) -> dict[str, list[int]]:
        index: dict[str, list[int]] = defaultdict(list)
        for i, label in enumerate(self.labels):
            if label:
                index[label].append(i)
        return index

    @cached_property
    def _alias(self) -> dict[str, list[int]]:
        index: dict[str, list[int]] = defaultdict(list)
        for i, names in enumerate(self.aliases):
            for name in names:
                index[name].append(i)
        return index

    @cached_property
    def _normalised(self) -> dict[str, list[int]]:
        index: dict[str, list[int]] = defaultdict(list)
        for i, label in enumerate(self.labels):
            if label:
                index[normalise(label)].append(i)
        for i, names in enumerate(self.aliases):
            for name in names:
                key = normalise(name)
                if i not in index[key]:
                    index[key].append(i)
        return index

    def has(self, entity: str) -> bool:
        return entity in self._row

    def label(self, entity: str) -> str:
        """The entity's label, or a readable stand-in (local name) when it has none."""
        row = self._row.get(entity)
        label = self.labels[row] if row is not None else None
        return label or local_name(entity)

    def description(self, entity: str) -> str | None:
        """The entity's description (Wikidata's, `schema:description`), None when it has none."""
        row = self._row.get(entity)
        return self.descriptions[row] if row is not None else None

    def degree(self, entity: str) -> int:
        row = self._row.get(entity)
        return self.degrees[row] if row is not None else 0

    def _ranked(self, rows: list[int]) -> list[str]:
        return [self.ids[i] for i in sorted(rows, key=lambda i: (-self.degrees[i], self.ids[i]))]

    def find(self, name: str) -> list[tuple[str, str]]:
        """Entities named `name`, as (id, how) with how in id|exact|alias|normalised; best first."""
        expanded = expand_entity_id(name)
        if expanded in self._row:
            return [(expanded, "id")]
        for how, index, key in (("exact", self._exact, name), ("alias", self._alias, name), ("normalised", self._normalised, normalise(name))):
            rows = index.get(key)
            if rows:
                return [(entity, how) for entity in self._ranked(rows)]
        return []

    def resolve(self, name: str) -> str | None:
        """The single best entity for an id or a name (highest degree among equal names)."""
        found = self.find(name)
        return found[0][0] if found else None

    def normalised_names(self) -> dict[str, list[int]]:
        """normalised name -> rows (for n-gram mention matching in linking)."""
        return self._normalised
