"""`Context`: what a method receives besides the question and its config.

Typed with protocols only (`KnowledgeGraph`, `DocumentStore`, `EntityLinker`, `Embedder`,
`LLM`): a method never knows which store, endpoint or model backend it talks to. Documents, the
linker and the embedder are opened on first use (io/cot/sc never pay for them); `open_context`
in `engine/runs/context.py` builds one over an index folder.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.access.protocols import DocumentStore, Embedder, EntityLinker, KnowledgeGraph
from engine.llm.protocol import LLM


def _missing(what: str) -> Callable[[], Any]:
    def fail() -> Any:
        raise RuntimeError(f"this context has no {what}")
    return fail


@dataclass
class Context:
    """One KG, one LLM and (lazily) documents, linker and embedder, shared by a run's questions."""

    kg: KnowledgeGraph
    llm: LLM
    open_docs: Callable[[], DocumentStore] = field(default=_missing("documents"), repr=False)
    open_linker: Callable[[], EntityLinker] = field(default=_missing("entity linker"), repr=False)
    open_embedder: Callable[[], Embedder] = field(default=_missing("embedder"), repr=False)
    _opened: dict[str, Any] = field(default_factory=dict, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def _once(self, name: str, opener: Callable[[], Any]) -> Any:
        with self._lock:
            if name not in self._opened:
                self._opened[name] = opener()
            return self._opened[name]

    @property
    def docs(self) -> DocumentStore:
        """The documents (an IndexError_ when the index has none)."""
        return self._once("docs", self.open_docs)  # type: ignore[no-any-return]

    @property
    def linker(self) -> EntityLinker:
        return self._once("linker", self.open_linker)  # type: ignore[no-any-return]

    @property
    def embedder(self) -> Embedder:
        return self._once("embedder", self.open_embedder)  # type: ignore[no-any-return]

    def close(self) -> None:
        self.llm.close()
