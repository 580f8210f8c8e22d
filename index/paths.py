"""The layout of one index folder. Every component finds its files through `IndexPaths`, and a
reader opens its parts through `open_index`, which is never caught by a build's swap."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ingest.base.errors import LocalkgError

SCHEMA_VERSION = 1
SWAP_WAIT_SECONDS = 30.0
"""How long `open_index` keeps trying while builds keep swapping the index it opens."""
_T = TypeVar("_T")


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
    requested: Path = field(init=False, repr=False, compare=False)  # the path asked for

    def __post_init__(self) -> None:
        root = Path(self.root)
        object.__setattr__(self, "requested", root)
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


def generation(paths: IndexPaths) -> tuple[str, int, int] | None:
    """Which folder `paths` names at this instant: its path (the index, or `.NAME.old`), device
    and inode; None when there is none. Every swap changes it: a build's new index is another
    folder, moved to the path by a rename or an exchange."""
    try:
        st = os.stat(paths.root)
    except OSError:
        return None
    return (str(paths.root), st.st_dev, st.st_ino)


def open_index(
    root: Path | IndexPaths, opener: Callable[[IndexPaths], _T], *, wait: float = SWAP_WAIT_SECONDS
) -> _T:
    """`opener(IndexPaths(root))`, run again when a build swapped the index at `root` meanwhile,
    so that a reader gets the previous or the new index, whole, and never an error.

    A swap moves a complete index to the path in one rename, but opening is many file opens
    (a RocksDB store reads CURRENT, its MANIFEST, then every SST file): one that straddles the
    swap mixes the two indexes and fails (`Corruption: Sst file size mismatch`), or, where the
    fallback's two renames are used, finds a file of the previous index already deleted. So the
    folder at the path (`generation`) is noted before and after each try: a try during which it
    changed is repeated, failed or not (for at most `wait` seconds while builds go on swapping);
    a failure while it stayed the same is tried once more, then raised: that index is damaged
    or is no index. What `opener` opens must hold its files open (as the KG store does), since
    the previous index is deleted right after the swap."""
    requested = root.requested if isinstance(root, IndexPaths) else Path(root)
    deadline = time.monotonic() + wait
    unchanged_failures = 0
    while True:
        paths = IndexPaths(requested)
        before = generation(paths)
        try:
            opened = opener(paths)
        except (LocalkgError, OSError, RuntimeError, ValueError):
            swapped = generation(IndexPaths(requested)) != before
            if not swapped:
                unchanged_failures += 1
            if time.monotonic() >= deadline or unchanged_failures > 1:
                raise
            time.sleep(0.0 if swapped else 0.05)
            continue
        if generation(IndexPaths(requested)) == before or time.monotonic() >= deadline:
            return opened
