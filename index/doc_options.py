"""The inputs of the documents and vectors stages: a document source (`DocSource`: a file or
folder, its format, its collection), the stages' options (`DocOptions`) and their checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from index.bm25_index import SPARSE_ENGINES
from index.vectors import FAISS_KINDS
from ingest.base.errors import InputError
from ingest.documents import DOC_FORMATS
from ingest.documents import detect_doc_format as _detect

COLLECTIONS = ("wiki", "web", "domain")
VECTOR_CHUNKS = ("all", "linked")


@dataclass(frozen=True)
class DocSource:
    """One document source: a file or folder, its format, and the collection it goes into."""

    path: Path
    format: str
    collection: str


@dataclass(frozen=True)
class DocOptions:
    """Options of the documents and vectors stages."""

    chunk_size: int = 1000  # characters
    chunk_overlap: int = 150
    embed_model: str | None = None  # None: the packaged default (all-MiniLM-L6-v2); with embed_server: the served name
    embed_backend: str = "torch"  # torch | onnx | onnx-int8 | server (index/embedder.py)
    embed_server: str | None = None  # an OpenAI-compatible /v1/embeddings base URL (backend server)
    faiss_kind: str = "auto"  # auto | flat | hnsw | ivfpq
    batch_size: int = 64  # texts per encode batch
    shard_size: int = 4096  # vectors per resumable shard
    entity_vectors: bool = True  # also embed entity labels (label-similarity linking)
    docs_map: tuple[str, ...] = ()  # CSV files mapping document files to entities (ingest/docs_map.py)
    vectors: bool = True  # False (--vectors none / --no-vectors): no vectors stage, chunks and BM25 only
    # which chunks the vectors stage embeds: all, or linked (only chunks of documents linked to an
    # entity: those ToG-2 and hydra read by entity); entity labels are embedded either way
    vector_chunks: str = "all"
    sparse: str = "bm25s"  # bm25s (in memory) | tantivy (on disk, for Wikipedia-sized corpora)
    kg_from_docs: str = "none"  # none | mentions | mentions-ignore-case (index/mentions_kg.py)


def detect_doc_format(path: Path) -> str:
    """The document format of `path` (one of jsonl, wikipedia-xml, wikiextractor, files, hotpot)."""
    return _detect(path)


def _check_options(sources: list[DocSource], options: DocOptions) -> None:
    if options.chunk_size <= 0 or not 0 <= options.chunk_overlap < options.chunk_size:
        raise InputError(
            f"--chunk-size must be positive and --chunk-overlap between 0 and the chunk size "
            f"(got {options.chunk_size} and {options.chunk_overlap})"
        )
    if options.faiss_kind not in FAISS_KINDS:
        raise InputError(f"--faiss must be one of {', '.join(FAISS_KINDS)} (got {options.faiss_kind!r})")
    if options.vector_chunks not in VECTOR_CHUNKS:
        raise InputError(f"--vectors must be one of none, {', '.join(VECTOR_CHUNKS)} (got {options.vector_chunks!r})")
    if options.sparse not in SPARSE_ENGINES:
        raise InputError(f"--sparse must be one of {', '.join(SPARSE_ENGINES)} (got {options.sparse!r})")
    for source in sources:
        if source.collection not in COLLECTIONS:
            raise InputError(f"{source.path}: collection must be one of {', '.join(COLLECTIONS)} (got {source.collection!r})")
        if source.format not in DOC_FORMATS:
            raise InputError(f"{source.path}: unknown document format {source.format!r} (expected one of {', '.join(DOC_FORMATS)})")
