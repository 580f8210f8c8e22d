"""The embeddings server's limits (engine/embeddings_server.py): every malformed or oversized request
gets a status and a JSON error, load is queued instead of reset, a huge text is cut to the model's
window, memory stays bounded. Against `cli.py embed serve` (onnx-int8, the packaged
all-MiniLM-L6-v2) as a real process on localhost; the request parsing and the worker also alone."""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest
from embed_serve_process import embed_serve

from engine.embed_worker import CHARS_PER_TOKEN, EncodeWorker, max_seq_length
from engine.embeddings_server import ApiError, parse_body
from index.embed_onnx import OnnxEmbedder

REPO = Path(__file__).resolve().parents[1]
MAX_BODY = 16 * 1024 * 1024


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`cli.py embed serve` on a free port, onnx-int8; yields the process and its URL."""
    with embed_serve() as started:
        yield started


@pytest.fixture(scope="module")
def server(served: tuple[subprocess.Popen[str], str]) -> str:
    return served[1]


def raw(url: str, head: str, body: bytes | Iterable[bytes] = b"", timeout: float = 30) -> tuple[int, Any]:
    """Send `head` (the request line and headers, without the blank line) and `body` as they are;
    the status and the JSON reply."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(f"{head}\r\nHost: {parts.netloc}\r\n\r\n".encode())
        for chunk in [body] if isinstance(body, bytes) else body:
            sock.sendall(chunk)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, json.loads(response.read())


def post(url: str, body: Any, timeout: float = 60) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url + "/embeddings", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


def chunked(total: int, size: int = 1 << 20) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        n = min(size, total - sent)
        yield f"{n:x}\r\n".encode() + b"a" * n + b"\r\n"
        sent += n
    yield b"0\r\n\r\n"


def test_negative_content_length_is_refused(server: str) -> None:
    body = json.dumps({"input": "x"}).encode()
    status, reply = raw(server, "POST /v1/embeddings HTTP/1.1\r\nContent-Length: -1", body + b"a" * 100_000, timeout=20)
    assert status == 400 and reply["error"]["code"] == "bad_http_request"


def test_non_numeric_content_length_is_refused(server: str) -> None:
    status, reply = raw(server, "POST /v1/embeddings HTTP/1.1\r\nContent-Length: abc", b'{"input": "x"}', timeout=20)
    assert status == 400 and "Content-Length" in reply["error"]["message"]


def test_bodies_over_the_cap_get_413_whatever_their_framing(server: str) -> None:
    started = time.monotonic()
    status, reply = raw(server, "POST /v1/embeddings HTTP/1.1\r\nTransfer-Encoding: chunked", chunked(MAX_BODY + (1 << 20)))
    assert status == 413 and f"over {MAX_BODY} bytes" in reply["error"]["message"]
    assert time.monotonic() - started < 30
    status, reply = raw(server, f"POST /v1/embeddings HTTP/1.1\r\nContent-Length: {300 * 1024 * 1024}")
    assert status == 413 and reply["error"]["code"] == "body_too_large"  # refused before a byte is read
    status, reply = raw(server, "POST /v1/embeddings HTTP/1.1\r\nTransfer-Encoding: chunked",
                        [b'e\r\n{"input": "x"}\r\n', b"0\r\n\r\n"])  # a small chunked body is fine
    assert status == 200 and len(reply["data"][0]["embedding"]) == 384


def test_deep_nesting_and_malformed_json_get_400(server: str) -> None:
    status, reply = post(server, b"[" * 100_000)
    assert status == 400 and "nests too deeply" in reply["error"]["message"]
    status, reply = post(server, b'{"input": ["a", ')
    assert status == 400 and "not JSON" in reply["error"]["message"]
    status, reply = post(server, b'{"input": "\xff\xfe"}')
    assert status == 400 and "not JSON" in reply["error"]["message"]
    status, reply = post(server, b'{"input": "\\ud800"}')
    assert status == 400 and "`input[0]`" in reply["error"]["message"]
    assert post(server, b"")[0] == 400
    status, reply = post(server, {"input": "x", "encoding_format": "int8"})
    assert status == 400 and "encoding_format" in reply["error"]["message"]


def test_wrong_model_gets_404_and_the_served_name_200(server: str) -> None:
    status, reply = post(server, {"model": "text-embedding-3-large", "input": "x"})
    assert status == 404 and reply["error"]["code"] == "model_not_found"
    assert "all-MiniLM-L6-v2-onnx-int8" in reply["error"]["message"]
    assert post(server, {"model": "all-MiniLM-L6-v2-onnx-int8", "input": "x"})[0] == 200
    assert post(server, {"input": "x"})[0] == 200  # no model: the served one


def test_unknown_endpoints_and_methods_get_json_errors(server: str) -> None:
    base = server.removesuffix("/v1")
    status, reply = raw(server, "GET /v1/embeddings HTTP/1.1")
    assert status == 405 and "GET /v1/embeddings" in reply["error"]["message"]
    assert raw(server, "GET /nothing HTTP/1.1")[0] == 404
    with urllib.request.urlopen(base + "/health", timeout=10) as response:
        assert json.loads(response.read())["status"] == "ok"
    with urllib.request.urlopen(server + "/models", timeout=10) as response:
        assert json.loads(response.read())["data"][0]["dim"] == 384


def test_base64_encoding_equals_the_floats(server: str) -> None:
    floats = post(server, {"input": ["a cat", "a dog"]})[1]["data"]
    packed = post(server, {"input": ["a cat", "a dog"], "encoding_format": "base64"})[1]["data"]
    for f, p in zip(floats, packed, strict=True):
        assert np.array_equal(np.frombuffer(base64.b64decode(p["embedding"]), dtype="<f4"),
                              np.array(f["embedding"], dtype=np.float32))


def test_a_10_mb_text_is_cut_to_the_window_quickly(served: tuple[subprocess.Popen[str], str]) -> None:
    process, server = served
    text = "word " * 2_000_000  # 10 MB; "word" is one token, so the window holds its first 254 words
    started = time.monotonic()
    status, reply = post(server, {"input": [text, "short"]})
    assert status == 200 and time.monotonic() - started < 5
    assert peak_rss_mb(process.pid) < 700  # tokenising it whole takes over 1 GB
    local = OnnxEmbedder(backend="onnx-int8").encode(["word " * 300, "short"])
    assert float(np.dot(reply["data"][0]["embedding"], local[0])) > 0.9999
    assert float(np.dot(reply["data"][1]["embedding"], local[1])) > 0.9999


def test_200_concurrent_clients_are_queued_not_reset(server: str) -> None:
    clients = 200
    barrier = threading.Barrier(clients)
    outcomes: list[Any] = [None] * clients

    def client(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = post(server, {"input": [f"question number {i}"]}, timeout=120)[0]
        except Exception as exc:
            outcomes[i] = repr(exc)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    failed = [o for o in outcomes if o != 200]
    assert not failed, f"{len(failed)} of {clients} failed, e.g. {failed[:3]}"


def test_memory_stays_bounded_under_large_concurrent_bodies(served: tuple[subprocess.Popen[str], str]) -> None:
    process, server = served
    body = json.dumps({"input": ["lorem ipsum " * 700_000]}).encode()  # 8.4 MB each, 16 at once
    statuses: list[Any] = []

    def client() -> None:
        try:
            statuses.append(post(server, body, timeout=120)[0])
        except Exception as exc:
            statuses.append(repr(exc))

    threads = [threading.Thread(target=client) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert statuses == [200] * 16
    assert peak_rss_mb(process.pid) < 700  # the old server tokenised each text whole: ~1.5 GB per 8 MB text


# ---- alone, without a server ---------------------------------------------------------------------

def _parse(raw: bytes, max_inputs: int = 10) -> Any:
    return parse_body(raw, "m", max_inputs, 20)


def test_parse_body_errors() -> None:
    cases = {b"[" * 5000: (400, "nests too deeply"), b"nope": (400, "not JSON"), b"[1]": (400, "`input` field"),
             b'{"input": []}': (400, "is empty"), b'{"input": [1]}': (400, "token ids"),
             b'{"input": "x", "model": "other"}': (404, "'other' is not served"),
             b'{"input": "x", "model": 3}': (400, "`model`"),
             json.dumps({"input": ["x"] * 11}).encode(): (413, "smaller batches")}
    for body, (status, words) in cases.items():
        with pytest.raises(ApiError, match=re.escape(words)) as caught:
            _parse(body)
        assert caught.value.status == status
    parsed = _parse(json.dumps({"input": ["a" * 50, "b"], "model": "m"}).encode())
    assert parsed.texts == ["a" * 20, "b"] and parsed.truncated == 1 and parsed.encoding == "float"


def test_the_window_is_the_models_max_seq_length() -> None:
    assert max_seq_length(OnnxEmbedder(backend="onnx-int8")) == 256
    assert CHARS_PER_TOKEN * 256 == 8192


class _Fake:
    """Vectors [len(text), 0]; fails on a text "bad"; records each call's texts."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.gate = threading.Event()

    def encode(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        self.gate.wait(10)
        self.calls.append(list(texts))
        if "bad" in texts:
            raise ValueError("bad text")
        return np.array([[len(t), 0.0] for t in texts], dtype=np.float32)


def test_worker_batches_waiting_requests_and_isolates_a_failure() -> None:
    fake = _Fake()
    worker = EncodeWorker(fake, max_texts=100)  # type: ignore[arg-type]

    async def scenario() -> list[Any]:
        first = asyncio.ensure_future(worker.encode(["x"]))  # taken alone, held at the gate
        await asyncio.sleep(0.2)
        rest = [asyncio.ensure_future(worker.encode(t)) for t in (["aa", "bbb"], ["bad"], ["cccc"])]
        await asyncio.sleep(0.1)
        fake.gate.set()
        return await asyncio.gather(first, *rest, return_exceptions=True)

    try:
        first, two, bad, four = asyncio.run(scenario())
    finally:
        worker.close()
    assert first.tolist() == [[1, 0]] and two.tolist() == [[2, 0], [3, 0]] and four.tolist() == [[4, 0]]
    assert isinstance(bad, ValueError)
    assert fake.calls[1] == ["aa", "bbb", "bad", "cccc"]  # the three waiting requests in one call, then alone
    assert fake.calls[2:] == [["aa", "bbb"], ["bad"], ["cccc"]]
