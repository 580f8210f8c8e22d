"""An OpenAI-compatible embeddings server over a local embedder (`cli.py embed serve`).

One machine with the model (and its cores) embeds for many: index builds and query-time scoring
elsewhere point `--embed-server` at it. Endpoints:
  POST /v1/embeddings  {"model": NAME, "input": TEXT | [TEXT, ...]}
                       -> {"object": "list", "data": [{"object": "embedding", "index": i,
                           "embedding": [...]}], "model": NAME, "usage": {...}}
  GET  /v1/models      the one model served
  GET  /health         {"status": "ok"}
Requests are answered one at a time (the model uses every core it is given); the standard
library's threading server accepts connections meanwhile. Bodies over MAX_BODY bytes or more
than MAX_INPUTS texts are refused with 413, malformed ones with 400 naming the field.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from index.embedder import Embedder

MAX_BODY = 64 * 1024 * 1024
MAX_INPUTS = 4096


class EmbeddingsServer(ThreadingHTTPServer):
    """The HTTP server; `embedder` does the work, `served_name` is the model name it reports."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], embedder: Embedder, served_name: str | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        super().__init__(address, _Handler)
        self.embedder = embedder
        self.served_name = served_name or embedder.name
        self.lock = threading.Lock()
        self.log = log
        self.texts_embedded = 0

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: EmbeddingsServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path = self.path.rstrip("/")
        if path == "/health":
            self._reply(200, {"status": "ok"})
        elif path == "/v1/models":
            self._reply(200, {"object": "list", "data": [{"id": self.server.served_name, "object": "model",
                                                          "owned_by": "localkg", "dim": self.server.embedder.dim}]})
        else:
            self._reply(404, _error(f"no such endpoint: GET {self.path}"))

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/embeddings":
            self._reply(404, _error(f"no such endpoint: POST {self.path}"))
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._reply(413, _error(f"request body of {length} bytes is over {MAX_BODY}"))
            return
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError as exc:
            self._reply(400, _error(f"the body is not JSON: {exc}"))
            return
        texts, problem = _inputs(body)
        if problem:
            self._reply(413 if "more than" in problem else 400, _error(problem))
            return
        started = time.monotonic()
        with self.server.lock:
            vectors = self.server.embedder.encode(texts)
            self.server.texts_embedded += len(texts)
        data = [{"object": "embedding", "index": i, "embedding": [float(x) for x in row]} for i, row in enumerate(vectors)]
        chars = sum(len(t) for t in texts)
        self._reply(200, {"object": "list", "data": data, "model": self.server.served_name,
                          "usage": {"prompt_tokens": chars // 4, "total_tokens": chars // 4}})
        if self.server.log:
            self.server.log(f"embedded {len(texts)} texts in {time.monotonic() - started:.2f} s")

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the server's own log line per request replaces the access log."""


def _inputs(body: Any) -> tuple[list[str], str | None]:
    """The texts of a request body, or what is wrong with it."""
    if not isinstance(body, dict) or "input" not in body:
        return [], "the body must be a JSON object with an `input` field"
    given = body["input"]
    texts = [given] if isinstance(given, str) else given
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return [], "`input` must be a string or a list of strings (token ids are not supported)"
    if not texts:
        return [], "`input` is empty"
    if len(texts) > MAX_INPUTS:
        return [], f"`input` has more than {MAX_INPUTS} texts; send smaller batches"
    return texts, None


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error"}}
