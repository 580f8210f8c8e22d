"""Building an index from the API: `IndexOptions` (the `index` command's options, typed) and
`build_index`, which turns them into sources and stage options for `index.build`.

    report = build_index(IndexOptions(out=Path("data/indexes/demo"), kg=[Path("data/demo/kg.ttl")]))

An option left at None is not given: the build takes it from the index's previous build (its
manifest), else the default. A recipe (`index --config FILE`) fills the same options:
`index/recipe.py` reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingest.base.errors import InputError
from ingest.freebase import FREEBASE_DROP_PREFIXES

if TYPE_CHECKING:
    from index.build import BuildReport
    from index.recipe import Recipe

__all__ = ["FREEBASE_DROP_PREFIXES", "IndexOptions", "build_index", "read_index_recipe"]


def _pair(values: Sequence[str], sources: Sequence[Any], option: str, default: str) -> list[str]:
    """One value per source: a single value applies to all, otherwise one each, in order."""
    if not values:
        return [default] * len(sources)
    if len(values) == 1:
        return list(values) * len(sources)
    if len(values) != len(sources):
        raise InputError(f"{option} given {len(values)} times for {len(sources)} sources; give it once or once per source")
    return list(values)


@dataclass
class IndexOptions:
    """What to build where: sources, their formats, and the build options (long option names)."""

    out: Path
    kg: Sequence[Path] = ()
    kg_format: Sequence[str] = ()  # once for all, or once per kg source; default auto
    docs: Sequence[Path] = ()
    docs_format: Sequence[str] = ()
    collection: Sequence[str] = ()  # wiki | web | domain, once or once per docs source
    docs_map: Sequence[Path] = ()
    languages: str | Sequence[str] | None = None  # "en,de" or ["en", "de"]
    kg_keep: float | None = None
    seed: int | None = None
    dropped_as_docs: bool | None = None
    kg_as_docs: bool | None = None
    freebase_drop: Sequence[str] = ()  # ("none",): drop none
    keep_external_ids: bool | None = None
    tsv_header: bool | None = None
    tsv_delimiter: str | None = None
    allow_empty: bool | None = None
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    embed_model: Path | None = None
    embed_backend: str | None = None
    embed_server: str | None = None
    faiss_kind: str | None = None
    vectors: str | None = None  # none | linked | all
    no_vectors: bool = False
    sparse: str | None = None
    kg_from_docs: str | None = None
    replace_sources: bool = False
    rebuild: bool = False
    recipe: Mapping[str, Any] | None = None  # what the manifest keeps of a recipe file

    def kg_sources(self) -> list[Any]:
        from index.kg_stage import KgSource

        formats = _pair(self.kg_format, self.kg, "--kg-format", "auto")
        return [KgSource(Path(p), f) for p, f in zip(self.kg, formats, strict=True)]

    def doc_sources(self) -> list[Any]:
        if not self.docs:
            return []
        from index.doc_options import DocSource

        formats = _pair(self.docs_format, self.docs, "--docs-format", "auto")
        collections = _pair(self.collection, self.docs, "--collection", "wiki")
        return [DocSource(Path(p), f, c) for p, f, c in zip(self.docs, formats, collections, strict=True)]

    def _vectors(self) -> str | None:
        if self.no_vectors and self.vectors not in (None, "none"):
            raise InputError(f"--no-vectors contradicts --vectors {self.vectors}")
        return "none" if self.no_vectors else self.vectors

    def kg_options(self) -> dict[str, Any]:
        """The KG stage's options that were given (the others come from the previous build)."""
        drop = tuple(self.freebase_drop)
        if "none" in drop and len(drop) > 1:
            raise InputError("--freebase-drop none cannot be combined with prefixes")
        languages = self.languages.split(",") if isinstance(self.languages, str) else self.languages
        options = {
            "languages": tuple(x.strip() for x in languages if x.strip()) if languages is not None else None,
            "keep_fraction": self.kg_keep,
            "seed": self.seed,
            "dropped_as_docs": self.dropped_as_docs,
            "kg_as_docs": self.kg_as_docs,
            "freebase_drop": (() if drop == ("none",) else drop) if drop else None,
            "keep_external_ids": self.keep_external_ids,
            "tsv_header": None if self.tsv_header is None else ("yes" if self.tsv_header else "no"),
            "tsv_delimiter": self.tsv_delimiter,
            "allow_empty": self.allow_empty,
        }
        return {k: v for k, v in options.items() if v is not None}

    def doc_options(self) -> dict[str, Any]:
        """The documents stage's options that were given."""
        vectors = self._vectors()
        backend, server = self.embed_backend, self.embed_server
        options = {
            "chunk_size": self.chunk_size,
            "chunk_overlap": self.chunk_overlap,
            "embed_model": str(self.embed_model) if self.embed_model else None,  # made absolute by build_index
            "embed_backend": "server" if server and not backend else backend,
            # a local backend given now forgets a server recorded by an earlier build
            "embed_server": "" if backend and backend != "server" else server,
            "faiss_kind": self.faiss_kind,
            "docs_map": tuple(str(Path(p).resolve()) for p in self.docs_map) if self.docs_map else None,
            "vectors": None if vectors is None else vectors != "none",
            "vector_chunks": vectors if vectors in ("linked", "all") else None,  # none keeps the recorded scope
            "sparse": self.sparse,
            "kg_from_docs": self.kg_from_docs,
        }
        return {k: v for k, v in options.items() if v is not None}


def build_index(options: IndexOptions) -> BuildReport:
    """Create or update the index at `options.out` (atomic and incremental, see index/build.py).
    InputError for options that contradict each other or do not pair with their sources."""
    from index.build import build_index as build

    kg_sources, doc_sources = options.kg_sources(), options.doc_sources()
    kg_options, doc_options = options.kg_options(), options.doc_options()
    return build(Path(options.out), kg_sources, doc_sources, kg_options, doc_options,
                 replace_sources=options.replace_sources, rebuild=options.rebuild,
                 recipe=options.recipe)


def read_index_recipe(path: str | Path, options: Iterable[tuple[str, Sequence[str], bool, bool]]) -> Recipe:
    """Read an `index --config` recipe (index/recipe.py) against the command's options: per
    option (parameter name, its flags such as `--chunk-size`, repeatable?, a path?). A recipe
    key is an option's long flag without `--`, or its parameter name."""
    from index.recipe import OptionShape, read_recipe

    shapes: dict[str, OptionShape] = {}
    for name, flags, multiple, is_path in options:
        shape = OptionShape(name, multiple, is_path)
        shapes.update({flag[2:]: shape for flag in flags if flag.startswith("--")} | {shape.name: shape})
    return read_recipe(Path(path), shapes)
