"""Which embedder an index uses: a backend name (torch, onnx, onnx-int8, server) and a model,
opened here, and what the vectors' meta.json records to open the same one at query time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from index import embedder as _embedder
from index.embedder import Embedder
from ingest.base.errors import ModelError

# torch: sentence-transformers (fp32); onnx / onnx-int8: ONNX Runtime (index/embed_onnx.py);
# server: an OpenAI-compatible /v1/embeddings endpoint (index/embed_http.py).
EMBED_BACKENDS = ("torch", "onnx", "onnx-int8", "server")
# The backend a new index is built with. Existing indexes keep the one they were built with
# (their vectors' meta.json records it; one without a record was built with torch).
DEFAULT_BACKEND = "torch"


def open_embedder(model: str | Path | None = None, backend: str | None = None, server: str | None = None,
                  batch_size: int | None = None) -> Embedder:
    """The embedder for a model folder (None: the packaged default) on a backend; with `server`
    (an OpenAI-compatible base URL) the backend is the server and `model` is the name sent to it."""
    backend = backend or ("server" if server else DEFAULT_BACKEND)
    if backend not in EMBED_BACKENDS:
        raise ModelError(f"unknown embedding backend {backend!r}; choose from {', '.join(EMBED_BACKENDS)}")
    if backend == "server":
        if not server:
            raise ModelError("the server embedding backend needs the server's URL (--embed-server URL)")
        from index.embed_http import ServerEmbedder

        return ServerEmbedder(server, None if model is None else str(model), **_batch(batch_size))
    if backend == "torch":
        # through the module, so that tests can stand a fake in for sentence-transformers
        return _embedder.SentenceTransformerEmbedder(model, **_batch(batch_size))
    from index.embed_onnx import OnnxEmbedder

    return OnnxEmbedder(model, backend)  # its own small batches (fastest on a CPU)


def embedder_record(embedder: Embedder) -> dict[str, Any]:
    """What a vectors meta.json records to open the same embedder at query time."""
    server = getattr(embedder, "url", None)
    return {
        "backend": "server" if server else getattr(embedder, "backend", "torch"),
        "server": server,
        "model_path": None if server else str(getattr(embedder, "path", "")),
    }


def _batch(batch_size: int | None) -> dict[str, int]:
    return {} if batch_size is None else {"batch_size": batch_size}
