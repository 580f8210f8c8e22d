"""The relation table (`relations.parquet`): ids, readable labels, triple counts, lookup by name."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.parquet as pq

from index.entities import normalise
from index.manifest import read_manifest
from index.paths import IndexPaths
from ingest.base.errors import IndexError_
from ingest.terms import local_name


@dataclass
class RelationTable:
    ids: list[str]
    labels: list[str]
    counts: list[int]

    @classmethod
    def open(cls, paths: IndexPaths) -> RelationTable:
        read_manifest(paths)
        if not paths.relations.exists():
            raise IndexError_(f"{paths.root}: index has no relation table (was it built with --kg?)")
        data = pq.read_table(paths.relations).to_pydict()
        return cls(ids=data["id"], labels=data["label"], counts=data["count"])

    def label(self, relation: str) -> str:
        try:
            return self.labels[self.ids.index(relation)]
        except ValueError:
            return local_name(relation)

    def resolve(self, name: str) -> str | None:
        """A relation id from its IRI, label or local name (case/underscore-insensitive)."""
        if name in self.ids:
            return name
        key = normalise(name.strip("<>"))
        for rid, label in zip(self.ids, self.labels, strict=True):
            if key in (normalise(label), normalise(local_name(rid)), normalise(rid)):
                return rid
        return None
