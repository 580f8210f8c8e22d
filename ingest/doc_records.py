"""The record every document reader yields."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Document:
    """One document as read from a source, before linking and chunking.

    `entity` is a pre-linked entity (an IRI or a Wikidata QID) when the source names one;
    `linkable=False` keeps a document out of title-based entity linking (AdvHotpotQA's
    distractor paragraphs, titled "added").
    """

    id: str
    title: str
    text: str
    entity: str | None = None
    linkable: bool = True
