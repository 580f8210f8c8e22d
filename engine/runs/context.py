"""`open_context`: a method `Context` over one index folder (or a SPARQL endpoint) and one LLM.

    ctx = open_context(Path("data/indexes/metaqa"), "qwen2.5-coder-0.5b")
    record = answer_question("tog", question, ctx, {"depth": 2})
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from functools import partial
from pathlib import Path

from engine.access.absent_kg import AbsentKG
from engine.access.documents import ParquetDocumentStore, docs_build_options
from engine.access.linking import EntityLinker
from engine.access.name_search import LabelIndex
from engine.access.open_kg import open_kg
from engine.access.protocols import DocumentStore, Embedder
from engine.llm.open import open_llm
from engine.llm.protocol import LLM
from engine.methods.context import Context
from index.entities import EntityTable
from index.paths import IndexPaths


def open_context(index: Path, llm: str | LLM | None, *, cache: bool = True,
                 kg_endpoint: str | None = None) -> Context:
    """A context over the index folder and the LLM named by `llm` (a registry name, .gguf path,
    server URL or `scripted:FILE`; None: the default model). An already open LLM is used as it is.

    `kg_endpoint`: a SPARQL 1.1 endpoint URL that serves the KG instead of the index's own
    store (checked once here); entities, relations, documents and vectors still come from the
    index folder, so the endpoint must hold the KG the index was built from."""
    paths = IndexPaths(Path(index))
    entities = EntityTable.open(paths)  # first: a clear error when the folder is no index
    # an index of documents only: document methods run, KG methods fail saying why
    kg = open_kg(Path(index), kg_endpoint) if kg_endpoint or paths.kg.exists() else AbsentKG(paths.root)
    model = open_llm(llm, cache=cache) if llm is None or isinstance(llm, str) else llm
    # one store for the context and for the embedder it carries
    open_docs: Callable[[], DocumentStore] = functools.cache(partial(ParquetDocumentStore, paths))

    def open_embedder() -> Embedder:
        """The index's embedding model (its --embed-model when built with --no-vectors), or the
        packaged default when it has no documents."""
        if paths.vector_meta.exists() or docs_build_options(paths).get("vectors") is False:
            return open_docs().embedder
        from index.embed_backends import open_embedder

        return open_embedder(None)

    def open_linker() -> EntityLinker:
        """Linking over the entity table (label vectors when the index has them)."""
        has_labels = paths.vector_ids("entities").exists()
        return EntityLinker(entities, LabelIndex(paths) if has_labels else None, paths=paths)

    return Context(kg, model, open_docs=open_docs, open_linker=open_linker, open_embedder=open_embedder)
