"""`BaseLLM`: the shared part of every backend (engine/llm/protocol.py's `LLM`): the response
cache, validation with one retry, and recording of calls around a backend's `_generate`."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from engine.llm.cache import CachedReply, ResponseCache, cache_key
from engine.llm.grammar_bounds import fit_schema
from engine.llm.protocol import (
    CallFailed,
    CallLog,
    CallRecord,
    ChatResult,
    Generation,
    Message,
    Usage,
    parse_reply,
    schema_validator,
)
from engine.llm.timings import CallTimings


def _check_messages(messages: list[Message]) -> None:
    if not messages:
        raise ValueError("chat() needs at least one message")
    for m in messages:
        if m.get("role") not in ("system", "user", "assistant") or not isinstance(
            m.get("content"), str
        ):
            raise ValueError(f"bad chat message {m!r}: needs role system|user|assistant and str content")


class BaseLLM:
    """Cache lookup, validation with one retry, and recording around a backend's `_generate`."""

    fingerprint: str = "base"

    def __init__(self, *, cache: ResponseCache | None = None) -> None:
        self.cache = cache
        self._local = threading.local()

    # -- backends implement this -----------------------------------------------------------
    def _generate(self, messages: list[Message], *, schema: dict[str, Any] | None,
                  temperature: float, max_tokens: int, seed: int, stage: str) -> Generation:
        raise NotImplementedError

    # -- public ------------------------------------------------------------------------------
    def chat(self, messages: list[Message], *, schema: dict[str, Any] | None = None,
             temperature: float = 0.0, max_tokens: int = 256, seed: int = 0,
             stage: str = "chat") -> ChatResult:
        """One chat completion; see engine/llm/protocol.py's docstring for the guarantees."""
        _check_messages(messages)
        if schema is not None:
            schema_validator(schema)
        start = time.perf_counter()
        key = None
        if self.cache is not None:
            key = cache_key(self.fingerprint, messages, schema, temperature, max_tokens, seed)
            hit = self.cache.get(key)
            if hit is not None:
                parsed = parse_reply(hit.text, schema)[0] if schema is not None else None
                usage = Usage(hit.prompt_tokens, hit.cached_tokens, hit.completion_tokens,
                              time.perf_counter() - start, cache_hit=True, compute_seconds=hit.seconds)
                return self._finish(stage, ChatResult(hit.text, parsed, usage), messages)
        try:
            result = self._generate_valid(messages, schema, temperature, max_tokens, seed, stage)
        except Exception as exc:
            usage = Usage(seconds=time.perf_counter() - start)
            self._finish(stage, ChatResult("", None, usage, f"{type(exc).__name__}: {exc}"), messages)
            raise
        result.usage.seconds = result.usage.compute_seconds = time.perf_counter() - start
        if key is not None and self.cache is not None and result.error is None:
            u = result.usage
            self.cache.put(key, self.fingerprint, CachedReply(
                result.text, u.prompt_tokens, u.cached_tokens, u.completion_tokens, u.seconds))
        return self._finish(stage, result, messages)

    @contextlib.contextmanager
    def recording(self) -> Iterator[CallLog]:
        """Collect a CallRecord for every chat() made by this thread inside the block."""
        logs = self._logs()
        log = CallLog()
        logs.append(log)
        try:
            yield log
        finally:
            logs.remove(log)

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()

    # -- internals ---------------------------------------------------------------------------
    def _logs(self) -> list[CallLog]:
        if not hasattr(self._local, "logs"):
            self._local.logs = []
        return self._local.logs  # type: ignore[no-any-return]

    def _finish(self, stage: str, result: ChatResult, messages: list[Message]) -> ChatResult:
        u = result.usage
        record = CallRecord(stage, u.prompt_tokens, u.cached_tokens, u.completion_tokens,
                            round(u.seconds, 6), u.cache_hit, result.error, round(u.compute_seconds, 6),
                            messages=list(messages), reply=result.text, timings=u.timings)
        for log in self._logs():
            log.append(record)
        return result

    def _generate_valid(self, messages: list[Message], schema: dict[str, Any] | None,
                        temperature: float, max_tokens: int, seed: int, stage: str) -> ChatResult:
        usage = Usage()
        request, tokens = list(messages), max_tokens
        text, parsed, error = "", None, None
        grammar_schema = schema  # what decoding is constrained by (replies validate against `schema`)
        for attempt in range(2):
            try:
                gen = self._generate(request, schema=grammar_schema, temperature=temperature,
                                     max_tokens=tokens, seed=seed, stage=stage)
            except CallFailed as exc:
                return ChatResult(text, None, usage, str(exc))
            usage.prompt_tokens += gen.prompt_tokens
            usage.cached_tokens += gen.cached_tokens
            usage.completion_tokens += gen.completion_tokens
            if gen.timings is not None:
                if usage.timings is None:
                    usage.timings = CallTimings()
                usage.timings.add(gen.timings)
            text = gen.text
            if schema is None:
                return ChatResult(text, None, usage)
            parsed, error = parse_reply(text, schema)
            if error is None:
                return ChatResult(text, parsed, usage)
            if gen.truncated:
                error = f"{error}; reply cut off at max_tokens={tokens}"
            if attempt == 0 and gen.truncated:
                tokens = max_tokens * 2  # most invalid replies were simply cut off
                # ... and the retry cannot be: its grammar's longest text fits in `tokens`
                # (engine/llm/grammar_bounds.py; a first reply that fits is never changed)
                grammar_schema = fit_schema(schema, tokens) or schema
            elif attempt == 0:
                request = [*messages, {"role": "assistant", "content": text},
                           {"role": "user", "content": f"That reply is invalid: {error}. "
                            "Answer again with only JSON that follows the schema."}]
        return ChatResult(text, None, usage, f"invalid reply after a retry: {error}")
