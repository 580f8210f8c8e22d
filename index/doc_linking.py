"""Linking a document to an entity of the KG by what it names or by its title (`TitleLinker`),
for the documents stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from index.paths import IndexPaths
from ingest.doc_records import Document
from ingest.terms import expand_entity_id

# Titles whose link is remembered (a repeated title is linked once); cleared when full.
LINK_CACHE_SIZE = 100_000


class TitleLinker:
    """Links a document to a KG entity: the entity it names (pre-linked), else the entity whose
    Wikipedia sitelink is its title, else one whose label or alias matches the title exactly or
    after normalisation (highest degree first). `web` documents are not linked by title."""

    def __init__(self, table: Any | None) -> None:
        self.table = table
        self._sitelinks: dict[str, str] = {}
        self._cache: dict[str, tuple[str | None, str | None]] = {}  # at most LINK_CACHE_SIZE titles
        if table is not None:
            best: dict[str, tuple[int, str]] = {}
            for entity, title, degree in zip(table.ids, table.wikipedia_titles, table.degrees, strict=True):
                if title:
                    key = _wiki_title_key(title)
                    if key not in best or (-degree, entity) < (-best[key][0], best[key][1]):
                        best[key] = (degree, entity)
            self._sitelinks = {key: entity for key, (_, entity) in best.items()}

    @classmethod
    def open(cls, paths: IndexPaths) -> TitleLinker:
        if not paths.entities.exists():
            return cls(None)
        return cls(read_entity_table(paths.entities))

    def link(self, doc: Document, collection: str) -> tuple[str | None, str | None]:
        """(entity id, reason) with reason in given|sitelink|exact|alias|normalised; (None, None)
        when nothing matches, (None, "given entity not in the KG") for an unknown pre-link."""
        if doc.entity:
            if self.table is None:
                return expand_entity_id(doc.entity), "given"
            resolved = self.table.resolve(doc.entity)
            return (resolved, "given") if resolved else (None, "given entity not in the KG")
        if self.table is None or not doc.linkable or not doc.title.strip() or collection == "web":
            return None, None
        if doc.title not in self._cache:
            if len(self._cache) >= LINK_CACHE_SIZE:
                self._cache.clear()  # a corpus of distinct titles would otherwise keep them all
            self._cache[doc.title] = self._by_title(doc.title)
        return self._cache[doc.title]

    def _by_title(self, title: str) -> tuple[str | None, str | None]:
        entity = self._sitelinks.get(_wiki_title_key(title))
        if entity is not None:
            return entity, "sitelink"
        assert self.table is not None
        for entity, how in self.table.find(title):
            if how != "id":
                return entity, how
        return None, None


def read_entity_table(entities: Path) -> Any:
    """An EntityTable straight from entities.parquet (a build's temp folder has no manifest yet)."""
    from index.entities import EntityTable

    return EntityTable.from_parquet(entities)


def _wiki_title_key(title: str) -> str:
    """Wikipedia titles: underscores are spaces and the first letter is case-insensitive."""
    title = title.replace("_", " ").strip()
    return title[:1].upper() + title[1:]
