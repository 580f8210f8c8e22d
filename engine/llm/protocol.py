"""The LLM layer's protocol and value types: what a method needs, what a backend returns.

Public API (all a method needs):

    llm = open_llm("qwen2.5-coder-0.5b")        # a registry name, a path to a .gguf file,
                                                 # an http(s)://host:port/v1 URL, or None (default)
    with llm.recording() as calls:               # collects a CallRecord per chat() in this thread
        result = llm.chat(messages, schema=SCHEMA, temperature=0.0, max_tokens=256,
                          seed=0, stage="relation_prune")
    result.text, result.parsed, result.usage, result.error
    calls.summary()                              # {"calls", "prompt_tokens", ..., "seconds"}

- `chat` never raises for a bad reply: a reply that does not parse or does not validate
  against `schema` is retried once (with a correcting message, or more tokens when it was cut
  off), then returned with `parsed=None` and `error` set. It raises `ModelError` only when the
  model cannot be used at all (missing file, server down or answering garbage), and
  ValueError for a programming error (malformed messages, an invalid or unsupported schema).
  A prompt longer than the context window is an `error` of that call.
- Structured calls are decoded under a grammar built from `schema` (llama.cpp backend, and
  servers that support it); schemas should bound arrays (`maxItems`) and list the real
  candidates as `enum`s, so that a small model cannot invent names or loop (`enum_array`).
- Temperature 0 is deterministic on the llama.cpp backend, also with other calls in between
  (and so is a fixed seed at temperature > 0). Threads: `$LOCALKG_LLM_THREADS` when set, else
  the CPUs divided among the models computing at once (`batch --workers N`), less the CPUs
  other processes keep busy, measured when the model opens and again between calls
  (engine/llm/threads.py: more threads than free cores make llama.cpp's threads wait for each
  other, many times slower than one thread).
- Cost: each CallRecord of `llm.recording()` carries `timings` (engine/llm/timings.py): the
  model's prompt evaluation and generation, and what surrounds them (sampling under the
  grammar, grammar building, chat template, tokenization, prefix KV states).
- Prompt layout: put the fixed part (instructions, examples) in the leading messages (usually
  one system message) and the per-question part in the last message. Everything before the
  last message is a reusable prefix: its KV state is saved once and loaded for later calls
  (reported as `usage.cached_tokens`).
- Replies are cached in sqlite (engine/llm/cache.py) under the model fingerprint, messages,
  schema and sampling parameters; `open_llm(..., cache=False)` (`--no-cache`) bypasses it.
  Self-consistency style sampling must vary `seed` to get different samples from the cache.
  On a cache hit, usage carries the original token counts, the original call's seconds as
  `compute_seconds`, `cache_hit=True` and the seconds of
  the lookup.

Backends: `LlamaCppLLM` (engine/llm/llama_cpp_backend.py: llama-cpp-python on a local GGUF),
`OpenAICompatLLM` (engine/llm/openai_backend.py: llama.cpp / vLLM style HTTP server),
`ScriptedLLM` (engine/llm/scripted.py: canned replies, for control-flow tests only). Their shared
part, `BaseLLM` (engine/llm/base.py), does the cache, validation with one retry and recording;
this module imports no backend.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

import jsonschema

from engine.llm.timings import CallTimings

Message = dict[str, str]


# ------------------------------------------------------------------------------------------
# records
# ------------------------------------------------------------------------------------------


@dataclass
class Usage:
    """Cost of one chat() call. `cached_tokens` of `prompt_tokens` were reused, not evaluated.

    Token counts add up both attempts when a reply was retried.
    """

    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cache_hit: bool = False
    # What producing the reply took the model: `seconds` for a fresh call, the original call's
    # seconds for a cache hit. Costs compare across runs with this, however much was replayed.
    compute_seconds: float = 0.0
    # where the seconds went (llama.cpp backend, fresh calls); not part of `to_dict`
    timings: CallTimings | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "timings"}


@dataclass
class CallRecord:
    """One chat() call as a trace shows it."""

    stage: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    seconds: float
    cache_hit: bool
    error: str | None = None
    compute_seconds: float = 0.0
    # What was asked and the raw reply text (of the last attempt): kept for traces and the
    # run's calls file, not in `to_dict` (the cost line a record keeps per call).
    messages: list[Message] = field(default_factory=list, repr=False)
    reply: str = field(default="", repr=False)
    timings: CallTimings | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in ("messages", "reply", "timings")}

    def transcript(self) -> dict[str, Any]:
        """The call as a person reads it: stage, the messages sent and the raw reply."""
        return {"stage": self.stage, "messages": [dict(m) for m in self.messages], "reply": self.reply,
                "error": self.error, "cache_hit": self.cache_hit}


@dataclass
class ChatResult:
    """The reply: `text` always; `parsed` when a schema was given and the reply is valid."""

    text: str
    parsed: Any | None
    usage: Usage
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "parsed": self.parsed, "usage": self.usage.to_dict(),
                "error": self.error}


class CallLog(list[CallRecord]):
    """The calls recorded inside one `llm.recording()` block. `on_call`, when set, sees each
    call as it is recorded (a live trace)."""

    on_call: Callable[[CallRecord], None] | None = None

    def append(self, record: CallRecord) -> None:
        super().append(record)
        if self.on_call is not None:
            self.on_call(record)

    def transcripts(self) -> list[dict[str, Any]]:
        return [r.transcript() for r in self]

    def summary(self) -> dict[str, Any]:
        return {
            "calls": len(self),
            "prompt_tokens": sum(r.prompt_tokens for r in self),
            "cached_tokens": sum(r.cached_tokens for r in self),
            "completion_tokens": sum(r.completion_tokens for r in self),
            "seconds": round(sum(r.seconds for r in self), 4),
            "compute_seconds": round(sum(r.compute_seconds for r in self), 4),
            "cache_hits": sum(r.cache_hit for r in self),
            "errors": sum(r.error is not None for r in self),
        }

    def to_dicts(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self]


@runtime_checkable
class LLM(Protocol):
    """What every backend offers. `fingerprint` names the model file (sha256) and backend."""

    fingerprint: str

    def chat(self, messages: list[Message], *, schema: dict[str, Any] | None = None,
             temperature: float = 0.0, max_tokens: int = 256, seed: int = 0,
             stage: str = "chat") -> ChatResult: ...

    def recording(self) -> contextlib.AbstractContextManager[CallLog]: ...

    def close(self) -> None:
        """Free the model (and the response cache connection); the LLM is unusable after."""
        ...


def enum_array(values: list[str], *, max_items: int, min_items: int = 0) -> dict[str, Any]:
    """Schema of a bounded list drawn from `values` (e.g. candidate relations or entities)."""
    unique = list(dict.fromkeys(values))
    return {"type": "array", "items": {"type": "string", "enum": unique},
            "minItems": min_items, "maxItems": max(min_items, min(max_items, len(unique)))}


# ------------------------------------------------------------------------------------------
# between BaseLLM and a backend; the schema helpers
# ------------------------------------------------------------------------------------------


@dataclass
class Generation:
    """What a backend returns for one request."""

    text: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    truncated: bool = False  # stopped by max_tokens
    timings: CallTimings | None = None


class CallFailed(Exception):
    """A problem with one call (e.g. a prompt longer than the context): recorded, not raised."""


# Schemas with per-question candidate enums are new for every call: the caches are bounded.
_validators: OrderedDict[str, jsonschema.protocols.Validator] = OrderedDict()
_validators_lock = threading.Lock()
MAX_CACHED_SCHEMAS = 256


def schema_validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """A cached validator; ValueError for a schema that is itself invalid (a programming error)."""
    key = json.dumps(schema, sort_keys=True)
    with _validators_lock:
        if key in _validators:
            _validators.move_to_end(key)
            return _validators[key]
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"invalid JSON schema: {exc.message}") from None
        _validators[key] = validator = cls(schema)
        while len(_validators) > MAX_CACHED_SCHEMAS:
            _validators.popitem(last=False)
        return validator


def parse_reply(text: str, schema: dict[str, Any]) -> tuple[Any | None, str | None]:
    """(parsed, None) for a reply that is JSON and valid against `schema`, else (None, why)."""
    body = text.strip()
    if body.startswith("```"):  # servers without grammar support sometimes fence JSON
        body = body.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(body, strict=False)  # a raw newline inside a string is forgiven
    except json.JSONDecodeError as exc:
        return None, f"reply is not JSON ({exc.msg} at char {exc.pos})"
    error = jsonschema.exceptions.best_match(schema_validator(schema).iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "top level"
        return None, f"reply does not match the schema at {where}: {error.message[:200]}"
    return value, None
