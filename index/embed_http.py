"""Sentence embeddings from an OpenAI-compatible `/v1/embeddings` server (text-embeddings-inference,
vLLM, llama.cpp's server, or `cli.py embed serve`), for an index build or query-time scoring on
a machine without the model.

Texts go in batches; a connection error, a timeout, a 429 or a 5xx is retried with backoff, other
errors stop at once with the server's message. The server's model name and dimension make the
embedder's fingerprint (`server:<model>:<dim>`), and the vectors store a probe vector as well, so
an index built with one model is never queried with another, also when a server swaps the model
behind the same name (see `DocumentStore._check_embedder`).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import numpy as np

from ingest.base.errors import ModelError

RETRIES = 4
BACKOFF_S = 0.5
TIMEOUT_S = 120.0
DEFAULT_BATCH = 64


def normalise_url(url: str) -> str:
    """`http://host:port` or `.../v1` -> the `.../v1` base the endpoints hang off."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ModelError(f"{url!r}: an embedding server URL starts with http:// or https://")
    if url.endswith("/embeddings"):
        url = url[: -len("/embeddings")]
    return url if url.endswith("/v1") else url + "/v1"


class ServerEmbedder:
    """An `Embedder` calling `POST {url}/embeddings` with `{"model", "input": [texts]}`."""

    def __init__(self, url: str, model: str | None = None, batch_size: int = DEFAULT_BATCH,
                 retries: int = RETRIES, timeout: float = TIMEOUT_S) -> None:
        self.url = normalise_url(url)
        self.requested_model = model
        self.batch_size = batch_size
        self.retries = retries
        self.timeout = timeout
        self._model: str | None = None
        self._dim: int | None = None
        self.requests = 0  # HTTP requests sent, retries included (benchmarks report it)

    @property
    def name(self) -> str:
        if self._model is None:
            self._model = self.requested_model or self._served_model()
        return self._model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.encode(["dimension probe"]).shape[1])
        return self._dim

    @property
    def fingerprint(self) -> str:
        return f"server:{self.name}:{self.dim}"

    def encode(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Normalised float32 vectors, one row per text, in the order given."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        size = max(1, batch_size or self.batch_size)
        parts = [self._embed_batch(list(texts[i:i + size])) for i in range(0, len(texts), size)]
        vectors = np.concatenate(parts).astype(np.float32)
        if self._dim is None:
            self._dim = vectors.shape[1]
        norms = np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return np.ascontiguousarray(vectors / norms, dtype=np.float32)

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        reply = self._request("/embeddings", {"model": self.name, "input": texts})
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list) or len(data) != len(texts):
            got = len(data) if isinstance(data, list) else "no"
            raise ModelError(f"{self.url}/embeddings: asked for {len(texts)} embeddings, got {got} (reply: {str(reply)[:200]})")
        rows = sorted(data, key=lambda item: int(item.get("index", 0)))
        try:
            vectors = np.array([row["embedding"] for row in rows], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"{self.url}/embeddings: malformed embedding in the reply ({exc})") from exc
        if vectors.ndim != 2 or (self._dim is not None and vectors.shape[1] != self._dim):
            raise ModelError(f"{self.url}/embeddings: the dimension changed between requests ({vectors.shape})")
        return vectors

    def _served_model(self) -> str:
        """The first model `GET /models` lists (servers that host one model accept any name)."""
        reply = self._request("/models", None)
        try:
            return str(reply["data"][0]["id"])
        except (KeyError, IndexError, TypeError) as exc:
            raise ModelError(f"{self.url}/models: lists no model; pass the model name (--embed-model)") from exc

    def _request(self, endpoint: str, body: dict[str, Any] | None) -> Any:
        url = self.url + endpoint
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"} if data is not None else {}
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(BACKOFF_S * 2 ** (attempt - 1))
            self.requests += 1
            request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode("utf-8", "replace")[:300]
                if exc.code == 429 or exc.code >= 500:
                    last = f"HTTP {exc.code}: {detail}"
                    continue
                raise ModelError(f"{url}: HTTP {exc.code}: {detail}") from exc
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                last = str(getattr(exc, "reason", exc))
                continue
            except ValueError as exc:
                raise ModelError(f"{url}: the reply is not JSON ({exc})") from exc
        raise ModelError(f"{url}: no answer after {self.retries + 1} tries ({last})")
