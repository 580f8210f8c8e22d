"""The llama.cpp backend: `LlamaCppLLM`, llama-cpp-python on a local GGUF file."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.llm.base import BaseLLM
from engine.llm.cache import ResponseCache
from engine.llm.gbnf import gbnf_for_schema
from engine.llm.protocol import CallFailed, Generation, Message
from engine.llm.threads import ThreadPolicy, thread_override
from engine.llm.threads import default_threads as policy_threads
from engine.llm.timings import CallTimings
from ingest.base.errors import ModelError

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
                gbnf = gbnf_for_schema(schema)
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
        _eval_prompt_rest(llm, tokens, timings)
        sampler = GrammarSampler(llm, grammar.clone() if grammar is not None else None,
                                 temperature=temperature)
        vocab = llm._model.vocab
        try:
            completion, truncated = _sample_tokens(
                llm, sampler, lambda token: llama_cpp.llama_vocab_is_eog(vocab, token), max_tokens, timings)
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


def _eval_prompt_rest(llm: Any, tokens: list[int], timings: CallTimings) -> None:
    """Evaluate the prompt tokens past those already in the context (the reused prefix)."""
    start = time.perf_counter()
    rest = tokens[llm.n_tokens:]
    llm.eval(rest)
    timings.prompt_eval += time.perf_counter() - start
    timings.prompt_eval_tokens += len(rest)


def _sample_tokens(llm: Any, sampler: Any, is_eog: Callable[[int], bool], max_tokens: int,
                   timings: CallTimings) -> tuple[list[int], bool]:
    """Sample, then evaluate, one token at a time until an end-of-generation token (not kept)
    or `max_tokens`: (the tokens, cut off at max_tokens)."""
    completion: list[int] = []
    text = b""
    multibyte_fix = 0
    while True:
        start = time.perf_counter()
        token = sampler.sample()
        middle = time.perf_counter()
        timings.sampling += middle - start
        timings.sampled_tokens += 1
        if is_eog(token):
            return completion, False
        completion.append(token)
        text += llm.detokenize([token])
        timings.detokenize += time.perf_counter() - middle
        # create_completion holds back a token that ends inside a UTF-8 character (and
        # then does not count it against max_tokens): the same test, as it is written
        multibyte_fix = _multibyte_fix(text, multibyte_fix)
        if multibyte_fix > 0:
            multibyte_fix -= 1
        elif len(completion) >= max_tokens:
            return completion, True
        start = time.perf_counter()
        llm.eval([token])
        timings.generation += time.perf_counter() - start
        timings.generated_tokens += 1


def _multibyte_fix(text: bytes, multibyte_fix: int) -> int:
    """create_completion's test on the last 3 bytes of `text`: how many more tokens to take
    before the UTF-8 character they start is whole (`multibyte_fix` where none starts there)."""
    for k, char in enumerate(text[-3:]):
        k = 3 - k
        for num, pattern in [(2, 192), (3, 224), (4, 240)]:
            if num > k and pattern & char == pattern:
                multibyte_fix = num - k
    return multibyte_fix
