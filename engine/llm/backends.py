"""The LLM layer: one small protocol, three backends, a response cache and per-call accounting.

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

Backends: `LlamaCppLLM` (llama-cpp-python on a local GGUF), `OpenAICompatLLM` (llama.cpp /
vLLM style HTTP server), `ScriptedLLM` (engine/llm/scripted.py: canned replies, for control-flow
tests only).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import jsonschema

from engine.llm.cache import CachedReply, ResponseCache, cache_key
from engine.llm.grammar_bounds import fit_schema
from engine.llm.threads import ThreadPolicy, thread_override
from engine.llm.threads import default_threads as policy_threads
from engine.llm.timings import CallTimings
from ingest.errors import ModelError

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
# the shared part of every backend: cache, validation + one retry, accounting
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
        """One chat completion; see the module docstring for the guarantees."""
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


# ------------------------------------------------------------------------------------------
# llama.cpp backend
# ------------------------------------------------------------------------------------------


def _bounded_number_rule(schema: dict[str, Any]) -> str | None:
    """GBNF for bounded numbers, which llama-cpp-python 0.3's converter leaves unbounded.

    Integers with a small closed range become alternatives; numbers in [0, 1] (scores) get
    at most three decimals. Anything else is left to the converter (and to validation).
    """
    kind = schema.get("type")
    if kind not in ("integer", "number") or "enum" in schema or "const" in schema:
        return None
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if low is None or high is None:
        return None
    if kind == "integer":
        lo = math.ceil(low) + (1 if "exclusiveMinimum" in schema and low == math.ceil(low) else 0)
        hi = math.floor(high) - (1 if "exclusiveMaximum" in schema and high == math.floor(high) else 0)
        if hi < lo or hi - lo > 1000:
            return None
        return "(" + " | ".join(f'"{i}"' for i in range(lo, hi + 1)) + ") space"
    if low == 0 and high == 1:
        return '("0" ("." [0-9] ([0-9] [0-9]?)?)? | "1" ("." "0" ("0" "0"?)?)?) space'
    return None


_JSON_CHAR = r'[^"\\\x00-\x1F\x7F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])'


def _gbnf_for_schema(schema: dict[str, Any]) -> str:
    """GBNF for a JSON schema; fixes llama-cpp-python 0.3's escaping of `\\` in literals."""
    import re

    from llama_cpp import llama_grammar as lg

    class Converter(lg.SchemaConverter):  # type: ignore[misc]
        _escape = re.compile(r'[\r\n"\\]')
        _escapes: ClassVar[dict[str, str]] = {"\r": "\\r", "\n": "\\n", '"': '\\"', "\\": "\\\\"}

        def _format_literal(self, literal: str) -> str:
            return '"' + self._escape.sub(lambda m: self._escapes[m.group(0)], literal) + '"'

        def _add_primitive(self, name: str, rule: Any) -> Any:
            # The stock string character admits raw control characters (a newline inside a
            # string), which JSON forbids: the reply would not parse. Escapes stay allowed.
            if name == "char":
                rule = lg.BuiltinRule(_JSON_CHAR, [])
            return super()._add_primitive(name, rule)

        def visit(self, schema: dict[str, Any], name: str) -> str:
            rule = _bounded_number_rule(schema)
            if rule is None:
                return str(super().visit(schema, name))
            rule_name = name + "-" if name in lg.RESERVED_NAMES else name or "root"
            return str(self._add_rule(rule_name, rule))

    converter = Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    resolved = converter.resolve_refs(json.loads(json.dumps(schema)), "schema")
    converter.visit(resolved, "")
    return str(converter.format_grammar())


_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass
class _PrefixState:
    n_tokens: int
    data: bytes


@dataclass
class _Prompt:
    tokens: list[int]
    prefix: list[int] = field(default_factory=list)


@dataclass
class _Grammar:
    """A schema's grammar, built once: the GBNF (for llama-cpp-python's own sampling, the
    reference path) and a parsed llama.cpp grammar sampler, never sampled with itself, that
    every call clones instead of parsing the GBNF again."""

    gbnf: Any  # llama_cpp.LlamaGrammar
    pristine: Any  # llama_sampler_p

    def clone(self) -> Any:
        import llama_cpp

        return llama_cpp.llama_sampler_clone(self.pristine)

    def free(self) -> None:
        import llama_cpp

        if self.pristine:
            llama_cpp.llama_sampler_free(self.pristine)
            self.pristine = None


def default_threads() -> int:
    """`$LOCALKG_LLM_THREADS`, else engine/llm/threads.py's policy on this machine now: the
    CPUs divided among the models computing at once, less the CPUs other processes keep busy."""
    return policy_threads()


class LlamaCppLLM(BaseLLM):
    """llama-cpp-python on a local GGUF file, with the model's own chat template.

    Determinism: llama.cpp's output depends on how a prompt was split into batches, and
    llama-cpp-python silently reuses the KV cache of the previous prompt. So every call takes
    the same path: evaluate the prefix (all messages but the last) from an empty context, or
    load the saved state of exactly that prefix, then evaluate the rest. A prompt without a
    usable prefix starts from a reset context.

    Decoding: this class runs the token loop itself (`_complete`) and samples under a grammar
    with engine/llm/sampling.py, which checks a few candidate tokens instead of the whole
    vocabulary and picks the token llama-cpp-python's `create_completion` would pick with the
    same settings. `fast_sampling=False` calls `create_completion` itself: the reference that
    tests and `bench/bench_llm_profile.py --reference` compare against.

    Threads: `n_threads`, else `$LOCALKG_LLM_THREADS`, else engine/llm/threads.py's policy,
    decided when the model loads and looked at again between calls.
    """

    MIN_PREFIX_TOKENS = 16
    MAX_GRAMMARS = 64  # parsed grammars kept (schemas with per-question enums rarely repeat)
    MAX_HEADS = 32  # rendered and tokenized prompt prefixes kept

    def __init__(self, model_path: Path, *, sha256: str, name: str | None = None,
                 n_ctx: int = 4096, n_threads: int | None = None, seed: int = 0,
                 prefix_states: int = 8, cache: ResponseCache | None = None,
                 fast_sampling: bool = True) -> None:
        super().__init__(cache=cache)
        import llama_cpp

        self.model_path = Path(model_path)
        self.name = name or self.model_path.name
        self.n_ctx = n_ctx
        self._fixed_threads = n_threads or thread_override()
        self.n_threads = self._fixed_threads or 0  # 0: decided by the policy when the model loads
        self._policy: ThreadPolicy | None = None
        self.seed = seed
        self.fast_sampling = fast_sampling
        self.fingerprint = f"llama.cpp-{llama_cpp.__version__}:{sha256}"
        self._lock = threading.RLock()
        self._model: Any = None  # loaded on first use: a cache replay never pays for it
        self._states: OrderedDict[tuple[int, ...], _PrefixState] = OrderedDict()
        self._max_states = prefix_states
        self._grammars: OrderedDict[str, _Grammar] = OrderedDict()
        self._heads: OrderedDict[tuple[tuple[str, str], ...], tuple[str, list[int]]] = OrderedDict()
        self._template: Any = None

    @property
    def _llm(self) -> Any:
        return self._ensure_loaded()

    def _ensure_loaded(self) -> Any:
        """The llama_cpp.Llama (and its chat template), loaded once."""
        with self._lock:
            if self._model is None:
                import llama_cpp

                if self._fixed_threads is None:
                    self._policy = ThreadPolicy()
                    self.n_threads = self._policy.start()
                try:
                    self._model = llama_cpp.Llama(
                        model_path=str(self.model_path), n_ctx=self.n_ctx,
                        n_threads=self.n_threads, n_threads_batch=self.n_threads,
                        seed=self.seed, verbose=False)
                except (ValueError, RuntimeError) as exc:
                    raise ModelError(f"llama.cpp could not load {self.model_path}: {exc}") from None
                self._template = self._load_template()
                if self._policy is not None:
                    self._set_threads(self._policy.loaded())
            return self._model

    def _adapt_threads(self) -> None:
        """Follow the policy when the active models or the machine's load changed."""
        if self._policy is None:
            return
        self._set_threads(self._policy.before_call())

    def _set_threads(self, wanted: int) -> None:
        if wanted != self.n_threads:
            import llama_cpp

            llama_cpp.llama_set_n_threads(self._model.ctx, wanted, wanted)
            self.n_threads = wanted

    def close(self) -> None:
        with self._lock:
            for grammar in self._grammars.values():
                grammar.free()
            self._grammars.clear()
            if self._policy is not None:
                self._policy.stop()
        super().close()

    # -- prompt -----------------------------------------------------------------------------
    def _load_template(self) -> Any:
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        model = self._llm._model
        bos, eos = self._llm.token_bos(), self._llm.token_eos()
        self._bos = model.token_get_text(bos) if bos != -1 else ""
        self._eos = model.token_get_text(eos) if eos != -1 else ""
        source = self._llm.metadata.get("tokenizer.chat_template") or _CHATML
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[loopcontrols])
        env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
        return env.from_string(source)

    def render(self, messages: list[Message], *, add_generation_prompt: bool = True) -> str:
        """The prompt text exactly as the model's chat template lays it out."""

        def raise_exception(message: str) -> None:
            raise ValueError(message)

        self._ensure_loaded()
        return str(self._template.render(
            messages=messages, add_generation_prompt=add_generation_prompt,
            bos_token=self._bos, eos_token=self._eos, raise_exception=raise_exception,
            strftime_now=lambda f: time.strftime(f)))

    def _tokenize(self, text: str) -> list[int]:
        add_bos = not (self._bos and text.startswith(self._bos))
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True))

    def _head(self, messages: list[Message], timings: CallTimings) -> tuple[str, list[int]]:
        """The fixed prefix (all messages but the last) as text and tokens, kept for reuse."""
        key = tuple((m["role"], m["content"]) for m in messages[:-1])
        with self._lock:
            if key in self._heads:
                self._heads.move_to_end(key)
                return self._heads[key]
        start = time.perf_counter()
        head = self.render(messages[:-1], add_generation_prompt=False)
        middle = time.perf_counter()
        tokens = self._tokenize(head) if head else []
        timings.prompt_build += middle - start
        timings.tokenize += time.perf_counter() - middle
        with self._lock:
            self._heads[key] = (head, tokens)
            while len(self._heads) > self.MAX_HEADS:
                self._heads.popitem(last=False)
        return head, tokens

    def _prompt(self, messages: list[Message], timings: CallTimings | None = None) -> _Prompt:
        timings = timings if timings is not None else CallTimings()
        start = time.perf_counter()
        text = self.render(messages)
        middle = time.perf_counter()
        tokens = self._tokenize(text)
        timings.prompt_build += middle - start
        timings.tokenize += time.perf_counter() - middle
        if len(messages) < 2:
            return _Prompt(tokens)
        head, prefix = self._head(messages, timings)
        if not head or not text.startswith(head):
            return _Prompt(tokens)
        ok = len(prefix) >= self.MIN_PREFIX_TOKENS and tokens[: len(prefix)] == prefix
        return _Prompt(tokens, prefix if ok and len(prefix) < len(tokens) else [])

    # -- KV state of prefixes ----------------------------------------------------------------
    def _save_state(self) -> _PrefixState:
        import ctypes

        import llama_cpp

        ctx = self._llm.ctx
        size = llama_cpp.llama_state_get_size(ctx)
        buf = (ctypes.c_uint8 * size)()
        n = llama_cpp.llama_state_get_data(ctx, buf, size)
        return _PrefixState(self._llm.n_tokens, bytes(buf[:n]))

    def _load_state(self, prefix: list[int], state: _PrefixState) -> None:
        import ctypes

        import llama_cpp

        buf = (ctypes.c_uint8 * len(state.data)).from_buffer_copy(state.data)
        if llama_cpp.llama_state_set_data(self._llm.ctx, buf, len(state.data)) != len(state.data):
            raise ModelError("llama.cpp could not restore a saved prompt state")
        self._llm.input_ids[: state.n_tokens] = prefix
        self._llm.n_tokens = state.n_tokens
        self._llm._requires_eval = True

    def _start_from_prefix(self, prefix: list[int], timings: CallTimings | None = None) -> int:
        """Put the context at the end of `prefix`; returns how many tokens were reused."""
        timings = timings if timings is not None else CallTimings()
        start = time.perf_counter()
        self._llm.reset()
        key = tuple(prefix)
        state = self._states.get(key) if prefix else None
        if not prefix or state is not None:
            if state is not None:
                self._states.move_to_end(key)
                self._load_state(prefix, state)
            timings.kv_state += time.perf_counter() - start
            return state.n_tokens if state is not None else 0
        timings.kv_state += time.perf_counter() - start
        start = time.perf_counter()
        self._llm.eval(prefix)
        middle = time.perf_counter()
        self._states[key] = self._save_state()
        while len(self._states) > self._max_states:
            self._states.popitem(last=False)
        timings.prompt_eval += middle - start
        timings.prompt_eval_tokens += len(prefix)
        timings.kv_state += time.perf_counter() - middle
        return 0

    def _grammar(self, schema: dict[str, Any], timings: CallTimings | None = None) -> _Grammar:
        """The schema's grammar, built once per schema text (and checked: llama.cpp answers NULL
        for a grammar it cannot parse)."""
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        with self._lock:
            if key in self._grammars:
                self._grammars.move_to_end(key)
                return self._grammars[key]
            start = time.perf_counter()
            import llama_cpp

            try:
                gbnf = _gbnf_for_schema(schema)
            except (AssertionError, ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"schema cannot be turned into a grammar: {exc}") from None
            pristine = llama_cpp.llama_sampler_init_grammar(
                self._llm._model.vocab, gbnf.encode("utf-8"), b"root")
            if not pristine:
                raise ValueError(f"llama.cpp rejected the grammar of schema {key[:200]}")
            grammar = self._grammars[key] = _Grammar(LlamaGrammar.from_string(gbnf, verbose=False), pristine)
            while len(self._grammars) > self.MAX_GRAMMARS:
                self._grammars.popitem(last=False)[1].free()
            if timings is not None:
                timings.grammar_build += time.perf_counter() - start
            return grammar

    # -- decoding ----------------------------------------------------------------------------
    def _generate(self, messages: list[Message], *, schema: dict[str, Any] | None,
                  temperature: float, max_tokens: int, seed: int, stage: str) -> Generation:
        self._ensure_loaded()  # a first call's model load is not part of its timings
        timings = CallTimings()
        prompt = self._prompt(messages, timings)
        if len(prompt.tokens) + 1 >= self.n_ctx:
            raise CallFailed(f"prompt has {len(prompt.tokens)} tokens, more than the context "
                             f"window of {self.n_ctx} allows (raise n_ctx or shorten it)")
        with self._lock:
            grammar = self._grammar(schema, timings) if schema is not None else None
            self._adapt_threads()
            timings.threads = self.n_threads
            reused = self._start_from_prefix(prompt.prefix, timings)
            complete = self._complete if self.fast_sampling else self._complete_reference
            text, completion_tokens, truncated = complete(
                prompt.tokens, grammar, temperature=temperature, max_tokens=max_tokens, seed=seed,
                timings=timings)
        return Generation(text=text, prompt_tokens=len(prompt.tokens), cached_tokens=reused,
                          completion_tokens=completion_tokens, truncated=truncated, timings=timings)

    def _complete(self, tokens: list[int], grammar: _Grammar | None, *, temperature: float,
                  max_tokens: int, seed: int, timings: CallTimings) -> tuple[str, int, bool]:
        """(text, completion tokens, cut off at max_tokens): the rest of the prompt evaluated
        from where `_start_from_prefix` left the context, then tokens until an end-of-generation
        token or `max_tokens`, as llama-cpp-python's `create_completion` would produce them."""
        import llama_cpp

        from engine.llm.sampling import GrammarSampler

        llm = self._llm
        n_ctx = llm.n_ctx()
        if max_tokens <= 0 or max_tokens + len(tokens) >= n_ctx:
            max_tokens = n_ctx - len(tokens)
        llm.set_seed(seed)
        start = time.perf_counter()
        rest = tokens[llm.n_tokens:]
        llm.eval(rest)
        timings.prompt_eval += time.perf_counter() - start
        timings.prompt_eval_tokens += len(rest)
        sampler = GrammarSampler(llm, grammar.clone() if grammar is not None else None,
                                 temperature=temperature)
        vocab = llm._model.vocab
        completion: list[int] = []
        text = b""
        multibyte_fix = 0
        truncated = True
        try:
            while True:
                start = time.perf_counter()
                token = sampler.sample()
                middle = time.perf_counter()
                timings.sampling += middle - start
                timings.sampled_tokens += 1
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    truncated = False
                    break
                completion.append(token)
                text += llm.detokenize([token])
                timings.detokenize += time.perf_counter() - middle
                # create_completion holds back a token that ends inside a UTF-8 character (and
                # then does not count it against max_tokens): the same test, as it is written
                for k, char in enumerate(text[-3:]):
                    k = 3 - k
                    for num, pattern in [(2, 192), (3, 224), (4, 240)]:
                        if num > k and pattern & char == pattern:
                            multibyte_fix = num - k
                if multibyte_fix > 0:
                    multibyte_fix -= 1
                elif len(completion) >= max_tokens:
                    break
                start = time.perf_counter()
                llm.eval([token])
                timings.generation += time.perf_counter() - start
                timings.generated_tokens += 1
        finally:
            timings.full_grammar_scans += sampler.full_scans
            sampler.close()
        start = time.perf_counter()
        reply = llm.detokenize(completion).decode("utf-8", errors="ignore")
        timings.detokenize += time.perf_counter() - start
        return reply, len(completion), truncated

    def _complete_reference(self, tokens: list[int], grammar: _Grammar | None, *, temperature: float,
                            max_tokens: int, seed: int, timings: CallTimings) -> tuple[str, int, bool]:
        """`_complete` by llama-cpp-python's `create_completion` (its prefix matching reuses
        the state `_start_from_prefix` left); llama.cpp's own counters split its time."""
        import llama_cpp

        ctx = self._llm.ctx
        llama_cpp.llama_perf_context_reset(ctx)
        start = time.perf_counter()
        out = self._llm.create_completion(
            prompt=tokens, max_tokens=max_tokens, temperature=temperature,
            top_p=0.95, top_k=40, min_p=0.05, repeat_penalty=1.0, seed=seed,
            grammar=grammar.gbnf if grammar is not None else None)
        wall = time.perf_counter() - start
        perf = llama_cpp.llama_perf_context(ctx)
        timings.prompt_eval += perf.t_p_eval_ms / 1000
        timings.prompt_eval_tokens += perf.n_p_eval
        timings.generation += perf.t_eval_ms / 1000
        timings.generated_tokens += perf.n_eval
        # the rest is llama-cpp-python's token loop: sampling under the grammar, mostly
        timings.sampling += max(0.0, wall - (perf.t_p_eval_ms + perf.t_eval_ms) / 1000)
        choice = out["choices"][0]
        completion = int(out["usage"]["completion_tokens"])
        timings.sampled_tokens += completion + (choice.get("finish_reason") == "stop")
        return choice["text"], completion, choice.get("finish_reason") == "length"


# ------------------------------------------------------------------------------------------
# OpenAI-compatible server backend
# ------------------------------------------------------------------------------------------


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
