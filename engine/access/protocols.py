"""The protocols methods see: KG, documents, entity linking (and, from below, embedding).

Methods are typed against these only, so a SPARQL endpoint can replace the embedded store, or
another document store the Parquet/FAISS one, without touching a method.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from engine.access.kg_protocol import KnowledgeGraph
from index.embedder import Embedder

if TYPE_CHECKING:
    from engine.access.documents import ChunkRecord, SearchHit
    from engine.access.linking import LinkCandidate

__all__ = ["DocumentStore", "Embedder", "EntityLinker", "KnowledgeGraph"]


class DocumentStore(Protocol):
    """Chunks of documents: by entity or id, dense and sparse search by collection."""

    def chunks_of(self, entity: str, limit: int | None = None) -> list[ChunkRecord]:
        """Chunks of the documents linked to `entity`, in document order."""
        ...

    def get(self, chunk_ids: Sequence[str]) -> list[ChunkRecord]:
        """Chunks by id, in the given order (unknown ids are skipped)."""
        ...

    def dense_search(self, text: str, k: int = 10, collection: str | None = None) -> list[SearchHit]: ...

    def sparse_search(self, text: str, k: int = 10, collection: str | None = None) -> list[SearchHit]: ...

    @property
    def embedder(self) -> Embedder:
        """The embedding model the store's vectors were made with."""
        ...


class EntityLinker(Protocol):
    """Question text (or given ids / names) -> KG entities, best first."""

    def link(self, question: str, topic_entities: Iterable[str] | Mapping[str, str] | None = None,
             mentions: Sequence[str] | None = None) -> list[LinkCandidate]: ...

    def resolve(self, mention: str, prefix: str = "mention", limit: int = 3) -> list[LinkCandidate]: ...

    def has(self, entity: str) -> bool:
        """Whether `entity` is an entity of the index."""
        ...
