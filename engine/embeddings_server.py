"""An OpenAI-compatible embeddings server over a local embedder (`cli.py embed serve`).

One machine with the model (and its cores) embeds for many: index builds and query-time scoring
elsewhere point `--embed-server` at it. Endpoints:
  POST /v1/embeddings  {"model": NAME, "input": TEXT | [TEXT, ...], "encoding_format": "float" | "base64"}
                       -> {"object": "list", "data": [{"object": "embedding", "index": i,
                           "embedding": [...]}], "model": NAME, "usage": {...}}
  GET  /v1/models      the one model served
  GET  /health         {"status": "ok", ...} (answered at once, also while the model is busy)

A Starlette app served by uvicorn (h11) on a socket bound up front, with a backlog of 2048: under
load, connections and requests wait their turn instead of being reset. Limits, every one answered
with a status and a JSON error body:
  - a body over `max_body` bytes: 413, whatever its framing: a declared Content-Length is refused
    before reading, a chunked body is read as a stream and refused at the cap; a Content-Length
    that is not a number (negative, `abc`) is refused by the HTTP layer with 400;
  - a body that is not JSON, nests too deeply, or has the wrong shape: 400 naming the problem;
  - a `model` other than the served name: 404 (no `model`: the served one);
  - more than `max_inputs` texts: 413; each text is cut to the model's window (engine/embed_worker.py).
At most `max_active` requests read, parse and wait for vectors at once (the others wait before
their body is read, so memory stays bounded); one worker thread runs the model, several waiting
requests in one call (engine/embed_worker.py).
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from engine.embed_worker import CHARS_PER_TOKEN, EncodeWorker, clip, max_seq_length
from index.embedder import Embedder


@dataclass(frozen=True)
class Limits:
    max_body: int = 16 * 1024 * 1024  # bytes of one request body
    max_inputs: int = 4096  # texts in one request
    max_active: int = 8  # requests reading, parsing or waiting for vectors at once
    body_timeout_s: float = 60.0  # to receive a body once its turn has come
    backlog: int = 2048  # connections the kernel queues before accept
    batch_texts: int = 256  # texts of several waiting requests in one model call


class ApiError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


def error_body(message: str, code: str | None = None, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code}}


@dataclass
class _State:
    served_name: str
    dim: int
    limits: Limits
    max_chars: int
    worker: EncodeWorker
    log: Callable[[str], None] | None
    active: asyncio.Semaphore
    waiting: int = 0


@dataclass
class Parsed:
    texts: list[str]
    truncated: int
    encoding: str


def parse_body(raw: bytes, served_name: str, max_inputs: int, max_chars: int) -> Parsed:
    """The texts of a request body (each cut to `max_chars`), or an ApiError saying what is wrong."""
    try:
        body = json.loads(raw) if raw.strip() else None
    except RecursionError:
        raise ApiError(400, "the body nests too deeply to be an embeddings request", "invalid_json") from None
    except ValueError as exc:
        raise ApiError(400, f"the body is not JSON: {exc}", "invalid_json") from None
    if not isinstance(body, dict) or "input" not in body:
        raise ApiError(400, "the body must be a JSON object with an `input` field")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(400, "`model` must be a string")
    if model and model != served_name:
        raise ApiError(404, f"model {model!r} is not served here; this server serves {served_name!r}", "model_not_found")
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise ApiError(400, "`encoding_format` must be \"float\" or \"base64\"")
    given = body["input"]
    texts = [given] if isinstance(given, str) else given
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ApiError(400, "`input` must be a string or a list of strings (token ids are not supported)")
    if not texts:
        raise ApiError(400, "`input` is empty")
    if len(texts) > max_inputs:
        raise ApiError(413, f"`input` has more than {max_inputs} texts; send smaller batches", "too_many_inputs")
    clipped, truncated = [], 0
    for i, text in enumerate(texts):
        kept, cut = clip(text, max_chars)
        try:
            kept.encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(400, f"`input[{i}]` is not valid Unicode (a lone surrogate)") from None
        clipped.append(kept)
        truncated += cut
    return Parsed(clipped, truncated, encoding)


def render(vectors: np.ndarray, served_name: str, texts: list[str], encoding: str) -> bytes:
    if encoding == "base64":
        rows: list[Any] = [base64.b64encode(row.astype("<f4").tobytes()).decode("ascii") for row in vectors]
    else:
        rows = vectors.astype(np.float64).tolist()
    data = [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)]
    tokens = sum(len(t) for t in texts) // 4
    return json.dumps({"object": "list", "data": data, "model": served_name,
                       "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}).encode("utf-8")


async def _read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The body, streamed and refused once it passes `limit` bytes."""
    body = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise ApiError(413, f"the request body is over {limit} bytes", "body_too_large")
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {timeout_s:.0f} s", "body_timeout") from None
    except ClientDisconnect:
        raise ApiError(400, "the client closed the connection before the body was complete") from None
    return bytes(body)


async def _embeddings(request: Request) -> Response:
    state: _State = request.app.state.embed
    limit = state.limits.max_body
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"a request body of {declared} bytes is over {limit}", "body_too_large")
    started = time.monotonic()
    state.waiting += 1
    try:
        await state.active.acquire()
    finally:
        state.waiting -= 1
    try:
        raw = await _read_body(request, limit, state.limits.body_timeout_s)
        parsed = await asyncio.to_thread(parse_body, raw, state.served_name, state.limits.max_inputs, state.max_chars)
        del raw
        vectors = await state.worker.encode(parsed.texts)
        payload = await asyncio.to_thread(render, vectors, state.served_name, parsed.texts, parsed.encoding)
    finally:
        state.active.release()
    if state.log:
        cut = f", {parsed.truncated} truncated" if parsed.truncated else ""
        state.log(f"embedded {len(parsed.texts)} texts in {time.monotonic() - started:.2f} s{cut}")
    return Response(payload, media_type="application/json")


async def _health(request: Request) -> Response:
    state: _State = request.app.state.embed
    return JSONResponse({"status": "ok", "requests_waiting": state.waiting,
                         "texts_embedded": state.worker.texts_embedded})


async def _models(request: Request) -> Response:
    state: _State = request.app.state.embed
    return JSONResponse({"object": "list", "data": [{"id": state.served_name, "object": "model",
                                                     "owned_by": "localkg", "dim": state.dim}]})


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return JSONResponse(error_body(exc.message, exc.code), status_code=exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = f"no such endpoint: {request.method} {request.url.path}" if exc.status_code in (404, 405) else str(exc.detail)
    return JSONResponse(error_body(message), status_code=exc.status_code, headers=exc.headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    return JSONResponse(error_body(f"the server failed: {type(exc).__name__}: {exc}", kind="server_error"), status_code=500)


def create_app(embedder: Embedder, served_name: str, worker: EncodeWorker, limits: Limits | None = None,
               log: Callable[[str], None] | None = None) -> Starlette:
    limits = limits or Limits()
    routes = [Route(path, _embeddings, methods=["POST"]) for path in ("/v1/embeddings", "/v1/embeddings/")]
    routes += [Route(path, _models, methods=["GET"]) for path in ("/v1/models", "/v1/models/")]
    routes += [Route(path, _health, methods=["GET"]) for path in ("/health", "/health/")]
    app = Starlette(routes=routes, exception_handlers={ApiError: _api_error, HTTPException: _http_error,
                                                       Exception: _server_error})
    app.router.redirect_slashes = False
    app.state.embed = _State(served_name, embedder.dim, limits, max_seq_length(embedder) * CHARS_PER_TOKEN,
                             worker, log, asyncio.Semaphore(limits.max_active))
    return app


class _H11JsonErrors(H11Protocol):
    """uvicorn's h11 protocol, answering a request it cannot parse (a bad Content-Length, a
    malformed request line) with a JSON error body instead of plain text."""

    def send_400_response(self, msg: str) -> None:
        raw = json.dumps(error_body("malformed HTTP request: a bad Content-Length, Transfer-Encoding or request line",
                                    "bad_http_request")).encode("utf-8")
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        for event in (h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                      h11.Data(data=raw), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()


def _listen(address: tuple[str, int], backlog: int) -> socket.socket:
    host, port = address
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


class EmbeddingsServer:
    """The server: binds `address` at once (port 0: any free one, see `url`); `serve_forever`
    serves until SIGINT/SIGTERM (main thread) or `shutdown()`."""

    def __init__(self, address: tuple[str, int], embedder: Embedder, served_name: str | None = None,
                 log: Callable[[str], None] | None = None, limits: Limits | None = None) -> None:
        self.embedder = embedder
        self.served_name = served_name or embedder.name
        self.limits = limits or Limits()
        self.log = log
        self.socket = _listen(address, self.limits.backlog)
        self.worker = EncodeWorker(embedder, self.limits.batch_texts)
        self._server: uvicorn.Server | None = None

    @property
    def url(self) -> str:
        host, port = self.socket.getsockname()[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"

    def serve_forever(self) -> None:
        app = create_app(self.embedder, self.served_name, self.worker, self.limits, self.log)
        config = uvicorn.Config(app, http=_H11JsonErrors, lifespan="off", log_config=None, log_level="warning",
                                access_log=False, backlog=self.limits.backlog, timeout_graceful_shutdown=10,
                                server_header=False)
        self._server = uvicorn.Server(config)
        self._server.run(sockets=[self.socket])

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.should_exit = True

    def server_close(self) -> None:
        self.worker.close()
        self.socket.close()
