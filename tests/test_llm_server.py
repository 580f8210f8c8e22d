"""OpenAICompatLLM against real HTTP servers on 127.0.0.1.

- llama-cpp-python's own server with the tiny model (started here, always killed);
- a port nobody listens on, a server answering garbage, one answering 500, and one that
  accepts and never answers: each gives a clear ModelError quickly (bounded retries/timeouts).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

import cli
from engine.llm.cache import ResponseCache
from engine.llm.model_registry import REGISTRY
from engine.llm.models import model_path
from engine.llm.open import open_llm
from engine.llm.openai_backend import OpenAICompatLLM
from ingest.base.errors import ModelError

SCHEMA = {
    "type": "object",
    "properties": {
        "country": {"enum": ["France", "Japan", "Brazil", "Canada"]},
        "cities": {"type": "array", "items": {"type": "string", "maxLength": 20},
                   "minItems": 1, "maxItems": 2},
    },
    "required": ["country", "cities"],
    "additionalProperties": False,
}
MESSAGES = [
    {"role": "system", "content": "You answer geography questions with JSON only."},
    {"role": "user", "content": "Which country is Osaka in, and name one more city there."},
]

# One thread less than the CPUs: llama.cpp's threads spin-wait for each other, and a test run
# shares the machine (pytest itself, other jobs); all threads on a busy machine is ~4x slower.
TEST_THREADS = str(max(1, len(os.sched_getaffinity(0)) - 1))


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the response cache and verification records out of the user's home."""
    monkeypatch.setenv("LOCALKG_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LOCALKG_MODELS_DIR", raising=False)
    monkeypatch.delenv("LOCALKG_LLM_CACHE", raising=False)
    monkeypatch.setenv("LOCALKG_LLM_THREADS", os.environ.get("LOCALKG_LLM_THREADS", TEST_THREADS))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m llama_cpp.server` with smollm2-135m; waits at most 90 s; always killed."""
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model",
           str(model_path(REGISTRY["smollm2-135m"])), "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", "2048", "--n_threads", os.environ.get("LOCALKG_LLM_THREADS", TEST_THREADS)]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "HF_HUB_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start in 90 s: {log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_server_end_to_end(server_url: str, tmp_path: Path) -> None:
    llm = OpenAICompatLLM(server_url, cache=ResponseCache(tmp_path / "c.sqlite3"))
    assert llm.fingerprint.startswith(f"openai:{server_url}:")
    with llm.recording() as calls:
        first = llm.chat(MESSAGES, schema=SCHEMA, max_tokens=60, stage="geo")
        again = llm.chat(MESSAGES, schema=SCHEMA, max_tokens=60, stage="geo")
        text = llm.chat([{"role": "user", "content": "Say hello."}], max_tokens=8)
    assert first.error is None, first.text
    jsonschema.validate(first.parsed, SCHEMA)
    assert first.usage.prompt_tokens > 10 and first.usage.completion_tokens > 0
    assert again.usage.cache_hit and again.parsed == first.parsed
    assert text.text and text.parsed is None
    assert [c.stage for c in calls] == ["geo", "geo", "chat"]


def test_server_through_open_llm_and_cli(server_url: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALKG_HOME", str(tmp_path))
    assert isinstance(open_llm(server_url, cache=False), OpenAICompatLLM)
    schema_file = tmp_path / "s.json"
    schema_file.write_text(json.dumps(SCHEMA))
    out = CliRunner().invoke(cli.main, ["chat", "--llm", server_url, "--schema", str(schema_file),
                                        "--max-tokens", "60", "--json", MESSAGES[1]["content"]])
    assert out.exit_code == 0, out.output
    jsonschema.validate(json.loads(out.output)["parsed"], SCHEMA)


def test_nobody_listening_fails_fast() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    start = time.monotonic()
    with pytest.raises(ModelError, match=r"cannot reach it.*tried 3 times.*server running"):
        OpenAICompatLLM(url, retries=3, backoff_s=0.1)
    assert time.monotonic() - start < 5
    out = CliRunner().invoke(cli.main, ["chat", "--llm", url, "hi"])
    assert out.exit_code == 2 and "is the server running?" in out.output


class _Fake:
    """A tiny HTTP server in a thread whose answers a test chooses."""

    def __init__(self, status: int, body: bytes, *, delay_s: float = 0.0) -> None:
        self.hits = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                fake.hits += 1
                if delay_s:
                    time.sleep(delay_s)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up first (the timeout test)

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (200, b"<html>hello, not json</html>", "not JSON"),
        (500, b'{"error": "boom"}', "HTTP 500"),
    ],
)
def test_garbage_answers_are_retried_then_clear(status: int, body: bytes, message: str) -> None:
    fake = _Fake(status, body)
    try:
        start = time.monotonic()
        with pytest.raises(ModelError, match=message):
            OpenAICompatLLM(fake.url, retries=3, backoff_s=0.05)
        assert fake.hits == 3 and time.monotonic() - start < 5
    finally:
        fake.close()


def test_json_that_is_not_a_completion() -> None:
    fake = _Fake(200, b'{"data": [{"id": "m"}], "note": "no choices here"}')
    try:
        llm = OpenAICompatLLM(fake.url, retries=2, backoff_s=0.05)
        with pytest.raises(ModelError, match="not a chat completion"):
            llm.chat(MESSAGES, max_tokens=5)
    finally:
        fake.close()


def test_silent_server_times_out() -> None:
    fake = _Fake(200, b"{}", delay_s=3.0)
    try:
        start = time.monotonic()
        with pytest.raises(ModelError, match="timed out"):
            OpenAICompatLLM(fake.url, model="m", timeout_s=0.3, retries=2, backoff_s=0.05)._request(
                "GET", "/models", None)
        assert time.monotonic() - start < 2.5
    finally:
        fake.close()


def test_client_error_is_not_retried() -> None:
    fake = _Fake(404, b'{"error": "no such route"}')
    try:
        with pytest.raises(ModelError, match="HTTP 404"):
            OpenAICompatLLM(fake.url, retries=3, backoff_s=0.05)
        assert fake.hits == 1
    finally:
        fake.close()
