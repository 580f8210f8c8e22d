"""The OpenAI-compatible backend: `OpenAICompatLLM`, a llama.cpp / vLLM style `/v1` HTTP server."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from typing import Any

from engine.llm.base import BaseLLM
from engine.llm.cache import ResponseCache
from engine.llm.protocol import CallFailed, Generation, Message
from ingest.base.errors import ModelError


class OpenAICompatLLM(BaseLLM):
    """The same protocol over HTTP to a llama.cpp / vLLM style `/v1` server.

    Every request has bounded timeouts (connect, and each read); connection errors, 5xx/429
    answers and bodies that are not a chat completion are retried `retries` times with
    exponential backoff, then raise ModelError. Schemas go out as OpenAI `json_schema`
    response formats; a server that rejects that form (llama-cpp-python's own server) gets the
    `json_object` + `schema` form instead. Replies are validated locally either way.
    """

    def __init__(self, base_url: str, *, model: str | None = None, timeout_s: float = 120.0,
                 connect_timeout_s: float = 5.0, retries: int = 3, backoff_s: float = 0.5,
                 cache: ResponseCache | None = None) -> None:
        super().__init__(cache=cache)
        url = base_url.rstrip("/")
        self.base_url = url if url.endswith("/v1") else url + "/v1"
        parts = urllib.parse.urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ModelError(f"not an http(s)://host:port/v1 URL: {base_url}")
        self._parts = parts
        self.timeout_s, self.connect_timeout_s = timeout_s, connect_timeout_s
        self.retries, self.backoff_s = max(1, retries), backoff_s
        self._schema_style = "json_schema"
        self.model = model or self._first_model()
        self.fingerprint = f"openai:{self.base_url}:{self.model}"

    def _first_model(self) -> str:
        body = self._request("GET", "/models", None)
        try:
            return str(body["data"][0]["id"])
        except (KeyError, IndexError, TypeError):
            raise ModelError(f"server at {self.base_url} lists no models at /models") from None

    def _once(self, method: str, path: str, payload: dict[str, Any] | None) -> tuple[int, bytes]:
        cls = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(self._parts.hostname or "", self._parts.port, timeout=self.connect_timeout_s)
        try:
            conn.connect()
            if conn.sock is not None:
                conn.sock.settimeout(self.timeout_s)
            body = json.dumps(payload).encode() if payload is not None else None
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            conn.request(method, self._parts.path + path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def _request(self, method: str, path: str, payload: dict[str, Any] | None) -> Any:
        problem = ""
        for attempt in range(self.retries):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                status, raw = self._once(method, path, payload)
            except (OSError, http.client.HTTPException) as exc:
                problem = f"cannot reach it ({type(exc).__name__}: {exc})"
                continue
            if status >= 400 and b"response_format" in raw:
                # a server that does not take this form of JSON schema (llama-cpp-python's
                # answers 500 with a validation error): no use retrying the same request
                raise _HTTPRejected(status, raw.decode("utf-8", "replace")[:500])
            if status == 429 or status >= 500:
                problem = f"it answered HTTP {status}: {raw[:200]!r}"
                continue
            if status >= 400:
                raise _HTTPRejected(status, raw.decode("utf-8", "replace")[:500])
            try:
                return json.loads(raw)
            except ValueError:
                problem = f"it answered something that is not JSON: {raw[:80]!r}"
        raise ModelError(f"LLM server {self.base_url}{path}: {problem} "
                         f"(tried {self.retries} times); is the server running?")

    def _response_format(self, schema: dict[str, Any]) -> dict[str, Any]:
        if self._schema_style == "json_schema":
            return {"type": "json_schema",
                    "json_schema": {"name": "reply", "schema": schema, "strict": True}}
        return {"type": "json_object", "schema": schema}

    def _generate(self, messages: list[Message], *, schema: dict[str, Any] | None,
                  temperature: float, max_tokens: int, seed: int, stage: str) -> Generation:
        payload: dict[str, Any] = {"model": self.model, "messages": messages,
                                   "temperature": temperature, "max_tokens": max_tokens,
                                   "seed": seed}
        for _ in range(2):
            if schema is not None:
                payload["response_format"] = self._response_format(schema)
            try:
                body = self._request("POST", "/chat/completions", payload)
                break
            except _HTTPRejected as exc:
                if schema is not None and self._schema_style == "json_schema":
                    self._schema_style = "json_object"  # remember: this server wants the other form
                    continue
                raise CallFailed(f"server rejected the request: HTTP {exc.status} {exc.body}") from None
        else:
            raise CallFailed("server rejected both JSON-schema request forms")
        try:
            choice = body["choices"][0]
            text = choice["message"]["content"] or ""
            usage = body.get("usage") or {}
        except (KeyError, IndexError, TypeError):
            raise ModelError(f"LLM server {self.base_url} answered JSON that is not a chat "
                             f"completion: {json.dumps(body)[:200]}") from None
        details = usage.get("prompt_tokens_details") or {}
        return Generation(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            cached_tokens=int(details.get("cached_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            truncated=choice.get("finish_reason") == "length",
        )


class _HTTPRejected(ModelError):
    """A 4xx answer (or a rejected response_format): not worth retrying as is."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"LLM server rejected the request: HTTP {status} {body[:300]}")
        self.status, self.body = status, body
