"""Embeddings over HTTP: `cli.py embed serve` as a real server process on localhost, an index built
and queried through it, a server that fails for a while (retries) or for good (a clear error),
and malformed requests."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from embed_serve_process import embed_serve

import index.embed_http as embed_http
from cli import main
from engine.access.documents import ParquetDocumentStore
from index.embed_http import ServerEmbedder, normalise_url
from index.embed_onnx import OnnxEmbedder
from index.paths import IndexPaths
from ingest.base.errors import ModelError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """`cli.py embed serve` on a free port, onnx-int8; yields its URL."""
    with embed_serve() as (_, url):
        yield url


def post(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url + "/embeddings", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_server_vectors_equal_the_local_backend(server: str) -> None:
    texts = ["Who directed Kill Bill?", "Quentin Tarantino directed Kill Bill.", "a"] * 30
    remote = ServerEmbedder(server, batch_size=16)
    vectors = remote.encode(texts)
    local = OnnxEmbedder(backend="onnx-int8").encode(texts)
    assert vectors.shape == (90, 384) and remote.requests >= 90 // 16 + 1
    assert float((vectors * local).sum(1).min()) > 0.9999
    assert remote.name == "all-MiniLM-L6-v2-onnx-int8" and remote.fingerprint == "server:all-MiniLM-L6-v2-onnx-int8:384"


def test_malformed_requests_get_400_naming_the_field(server: str) -> None:
    assert post(server, {"input": [1, 2]})[0] == 400
    status, reply = post(server, {"model": "x"})
    assert status == 400 and "`input`" in reply["error"]["message"]
    status, reply = post(server, {"input": ["x"] * 5000})
    assert status == 413 and "smaller batches" in reply["error"]["message"]
    status, reply = post(server, {"input": "one text"})
    assert status == 200 and len(reply["data"]) == 1 and len(reply["data"][0]["embedding"]) == 384


def test_index_built_and_queried_through_the_server(server: str, tmp_path: Path, shared_data: Path) -> None:
    data = json.loads((shared_data / "paper_questions" / "tog2" / "hotpotadv_dev.json").read_text(encoding="utf-8"))
    source = tmp_path / "hotpot.json"
    source.write_text(json.dumps(data[:10]))
    out = tmp_path / "index"
    result = CliRunner().invoke(main, ["index", "--out", str(out), "--docs", str(source), "--docs-format", "hotpot",
                                       "--embed-server", server])
    assert result.exit_code == 0, result.output
    meta = json.loads((out / "vectors" / "meta.json").read_text())
    assert meta["backend"] == "server" and meta["server"] == server and meta["model"] == "all-MiniLM-L6-v2-onnx-int8"
    stats = CliRunner().invoke(main, ["docs", "stats", "--index", str(out)])
    assert f"at {server}" in stats.output, stats.output
    store = ParquetDocumentStore(IndexPaths(out))
    assert isinstance(store.embedder, ServerEmbedder)
    question = data[2]
    supporting = [p["context"][:60] for p in question["paragraphs"] if p.get("is_supp")]
    hits = store.dense_search(question["question"], k=10)
    assert any(s in hit.chunk.text for hit in hits for s in supporting)


class _Flaky(BaseHTTPRequestHandler):
    """Answers 503 to the first `failures` embedding requests, then vectors of ones."""

    failures = 2
    seen = 0

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen += 1
        if type(self).seen <= type(self).failures:
            payload, status = b'{"error": {"message": "warming up"}}', 503
        else:
            data = [{"index": i, "embedding": [1.0, 0.0, 0.0]} for i in range(len(body["input"]))][::-1]  # any order
            payload, status = json.dumps({"data": data, "model": body["model"]}).encode(), 200
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


def test_retries_then_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_http, "BACKOFF_S", 0.01)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        embedder = ServerEmbedder(url, model="flaky")
        vectors = embedder.encode(["a", "b"])
        assert embedder.requests == 3 and np.allclose(vectors, [[1, 0, 0], [1, 0, 0]])
        _Flaky.seen, _Flaky.failures = 0, 100
        with pytest.raises(ModelError, match=r"no answer after 3 tries \(HTTP 503: .*warming up"):
            ServerEmbedder(url, model="flaky", retries=2).encode(["a"])
    finally:
        httpd.shutdown()
        httpd.server_close()
    with pytest.raises(ModelError, match="no answer after 2 tries"):
        ServerEmbedder(url, model="gone", retries=1, timeout=5).encode(["a"])  # nothing listens there now


def test_server_urls() -> None:
    assert normalise_url("http://h:1") == "http://h:1/v1"
    assert normalise_url("http://h:1/v1/embeddings") == "http://h:1/v1"
    with pytest.raises(ModelError, match="starts with http"):
        normalise_url("h:1")
