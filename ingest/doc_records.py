"""The record every document reader yields."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Document:
    """One document as read from a source, before linking and chunking.

    `entity` is a pre-linked entity (an IRI, a Wikidata QID, or the label of a KG entity) when
    the source names one; `entity_origin` says where a user wrote it down ("map.csv:3" for a
    row of a `--docs-map` file, "acme.md:2" for front matter): such an entity must exist, and
    the build fails naming that place when it does not. `linkable=False` keeps a document out
    of title-based entity linking (AdvHotpotQA's distractor paragraphs, titled "added").
    """

    id: str
    title: str
    text: str
    entity: str | None = None
    linkable: bool = True
    entity_origin: str | None = None
