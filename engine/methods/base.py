"""What the batch runner, `ask` and the evaluation code use: a context over one index and one
LLM, the method registry, default configs, and `run_question`.

    ctx = open_context(Path("data/indexes/metaqa"), "qwen2.5-coder-0.5b")
    record = run_question("tog", Question("q1", "what movies did [Temuera Morrison] act in"), ctx,
                          {"width": 3, "depth": 2})

`run_question` never raises for a question-level failure (a KG error, a reply that stays
invalid, a bug in a method): it returns a record with `error` set. It raises `ValueError` for
an unknown method or config key (a caller's mistake) and lets `ModelError` through (the model
cannot be used at all, so the next question would fail the same way).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.entities import EntityTable
from engine.kg import KnowledgeGraph, open_kg
from engine.llm import LLM, open_llm
from engine.methods.common import new_record
from engine.methods.io_cot import COT_DEFAULTS, IO_DEFAULTS, run_cot, run_io
from engine.methods.prune import PRUNE_TOOLS
from engine.methods.rag import RAG_DEFAULTS, run_rag
from engine.methods.sc import SC_DEFAULTS, run_sc
from engine.methods.tog import TOG_DEFAULTS, run_tog, run_tog_r
from engine.record import AnswerRecord, Question
from index.paths import IndexPaths
from ingest.errors import ModelError

if TYPE_CHECKING:
    from engine.docs import DocumentStore
    from engine.embedder import Embedder
    from engine.linking import EntityLinker


@dataclass
class Context:
    """One index and one LLM, shared by the questions of a run (documents, the embedder and
    the linker are opened on first use: io/cot/sc never pay for them)."""

    index: Path
    kg: KnowledgeGraph
    entities: EntityTable
    llm: LLM
    _docs: DocumentStore | None = field(default=None, repr=False)
    _embedder: Embedder | None = field(default=None, repr=False)
    _linker: EntityLinker | None = field(default=None, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @property
    def paths(self) -> IndexPaths:
        return IndexPaths(self.index)

    @property
    def docs(self) -> DocumentStore:
        """The index's documents (IndexError_ when it has none)."""
        with self._lock:
            if self._docs is None:
                from engine.docs import DocumentStore

                self._docs = DocumentStore(self.paths)
            return self._docs

    @property
    def embedder(self) -> Embedder:
        """The index's embedding model, or the packaged default when it has no vectors."""
        with self._lock:
            if self._embedder is None:
                if (self.paths.vectors / "meta.json").exists():
                    self._embedder = self.docs.embedder
                else:
                    from engine.embedder import SentenceTransformerEmbedder

                    self._embedder = SentenceTransformerEmbedder(None)
            return self._embedder

    @property
    def linker(self) -> EntityLinker:
        """Entity linking over this index's entity table (label vectors when it has them)."""
        with self._lock:
            if self._linker is None:
                from engine.linking import EntityLinker, LabelIndex

                has_labels = (self.paths.vectors / "entities.ids.parquet").exists()
                self._linker = EntityLinker(
                    self.entities, LabelIndex(self.paths.vectors) if has_labels else None,
                    paths=self.paths)
            return self._linker

    def close(self) -> None:
        close = getattr(self.llm, "close", None)
        if callable(close):
            close()


def open_context(index: Path, llm: str | LLM | None, *, cache: bool = True,
                 kg_endpoint: str | None = None) -> Context:
    """A context over the index folder and the LLM named by `llm` (a registry name, .gguf
    path or server URL; None: the default model). An already open LLM is used as it is.

    `kg_endpoint`: a SPARQL 1.1 endpoint URL that serves the KG instead of the index's own
    store (checked once here); entities, relations, documents and vectors still come from the
    index folder, so the endpoint must hold the KG the index was built from."""
    paths = IndexPaths(Path(index))
    entities = EntityTable.open(paths)  # first: a clear error when the folder is no index
    kg = open_kg(Path(index), kg_endpoint)
    model = open_llm(llm, cache=cache) if llm is None or isinstance(llm, str) else llm
    return Context(Path(index), kg, entities, model)


MethodFn = Callable[[Question, Context, dict[str, Any]], AnswerRecord]

METHODS: dict[str, MethodFn] = {
    "io": run_io,
    "cot": run_cot,
    "sc": run_sc,
    "rag": run_rag,
    "tog": run_tog,
    "tog-r": run_tog_r,
}

_DEFAULTS: dict[str, dict[str, Any]] = {
    "io": IO_DEFAULTS, "cot": COT_DEFAULTS, "sc": SC_DEFAULTS, "rag": RAG_DEFAULTS,
    "tog": TOG_DEFAULTS, "tog-r": TOG_DEFAULTS,
}


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r} (one of {', '.join(METHODS)})")


def default_config(method: str) -> dict[str, Any]:
    """A fresh copy of the method's defaults (the papers' values)."""
    _check_method(method)
    return dict(_DEFAULTS[method])


def resolve_config(method: str, config: dict[str, Any] | None) -> dict[str, Any]:
    """Defaults overridden by `config`; ValueError for an unknown key or a bad value."""
    resolved = default_config(method)
    unknown = sorted(set(config or {}) - set(resolved))
    if unknown:
        raise ValueError(f"unknown config key(s) for {method}: {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(resolved))})")
    resolved.update(config or {})
    if "prune_tool" in resolved and resolved["prune_tool"] not in PRUNE_TOOLS:
        raise ValueError(f"prune_tool must be one of {', '.join(PRUNE_TOOLS)}, not {resolved['prune_tool']!r}")
    if "prune_order" in resolved and resolved["prune_order"] not in ("similarity", "kg"):
        raise ValueError(f"prune_order must be similarity or kg, not {resolved['prune_order']!r}")
    for key in ("width", "depth", "samples", "top_k", "num_retain_entity", "max_relations",
                "max_entities", "max_topic_entities"):
        if key in resolved and (not isinstance(resolved[key], int) or resolved[key] < 1):
            raise ValueError(f"{key} must be a positive integer, not {resolved[key]!r}")
    return resolved


def config_hash(method: str, config: dict[str, Any]) -> str:
    """A stable short hash of the method and its full (resolved) config."""
    blob = json.dumps({"method": method, "config": config}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_question(method: str, question: Question, ctx: Context,
                 config: dict[str, Any] | None = None) -> AnswerRecord:
    """Answer one question with one method; fills seconds, stage_seconds, llm_calls and
    config_hash. Question-level failures come back as `record.error`, never as exceptions."""
    _check_method(method)
    resolved = resolve_config(method, config)
    start = time.perf_counter()
    with ctx.llm.recording() as calls:
        try:
            record = METHODS[method](question, ctx, resolved)
        except ModelError:
            raise
        except Exception as exc:  # a question-level failure: recorded, the run goes on
            record = new_record(question, method)
            record.error = f"{type(exc).__name__}: {exc}"
            record.extra["traceback"] = traceback.format_exc(limit=6)
    record.method = method
    record.seconds = round(time.perf_counter() - start, 6)
    record.llm_calls = calls.to_dicts()
    record.config_hash = config_hash(method, resolved)
    record.extra["config"] = resolved
    record.extra["llm_summary"] = calls.summary()
    return record
