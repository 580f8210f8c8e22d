"""The layout of one index folder. Every component finds its files through `IndexPaths`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SCHEMA_VERSION = 1


def previous_root(root: Path) -> Path:
    """Where a build keeps the previous index while it moves the new one into place (only where
    the atomic exchange of two folders is not supported; see index/build.py `_swap`)."""
    return root.parent / f".{root.name}.old"


@dataclass(frozen=True)
class IndexPaths:
    """Where each artefact of an index lives, relative to its root folder.

    When no folder is at `root` but the previous index is at `.NAME.old` (a build was killed
    between the two renames of its swap), `root` is that folder: readers always find a complete
    index. The next build moves it back."""

    root: Path

    def __post_init__(self) -> None:
        root = Path(self.root)
        if not root.exists():
            previous = previous_root(root)
            if (previous / "manifest.json").is_file():
                root = previous
        object.__setattr__(self, "root", root)

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def kg(self) -> Path:
        return self.root / "kg"

    @property
    def entities(self) -> Path:
        return self.root / "entities.parquet"

    @property
    def relations(self) -> Path:
        return self.root / "relations.parquet"

    @property
    def documents(self) -> Path:
        return self.root / "documents.parquet"

    @property
    def chunks(self) -> Path:
        return self.root / "chunks.parquet"

    @property
    def vectors(self) -> Path:
        return self.root / "vectors"

    @property
    def bm25(self) -> Path:
        return self.root / "bm25"

    @property
    def rejects(self) -> Path:
        return self.root / "rejects.jsonl"

    @property
    def dropped_docs(self) -> Path:
        """Documents rendered from KG facts (dropped by --kg-keep, or all with --kg-as-docs), JSONL."""
        return self.root / "dropped_docs.jsonl"

    @property
    def embeddings(self) -> Path:
        """Every chunk / entity-label vector (float16) with a key of its text: read by search,
        and by the next build, which re-embeds only texts it has not seen with the same model."""
        return self.root / "embeddings"

    @property
    def vector_meta(self) -> Path:
        """What the vectors stage built: model, dim, FAISS kind and search parameters per kind."""
        return self.vectors / "meta.json"

    def faiss_index(self, kind: str) -> Path:
        """The FAISS index of `kind` ("chunks" or "entities")."""
        return self.vectors / f"{kind}.faiss"

    def vector_ids(self, kind: str) -> Path:
        """The row -> id map of `kind`'s FAISS index."""
        return self.vectors / f"{kind}.ids.parquet"

    def stored_vectors(self, kind: str) -> Path:
        """Every vector of `kind` as float16, in FAISS row order (exact re-ranking)."""
        return self.embeddings / f"{kind}.f16.npy"
