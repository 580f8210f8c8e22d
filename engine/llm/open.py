"""Opening an LLM by name: a registry model, a .gguf path, a server URL or scripted replies."""

from __future__ import annotations

import json
from pathlib import Path

from engine.llm.base import BaseLLM
from engine.llm.cache import ResponseCache
from engine.llm.llama_cpp_backend import LlamaCppLLM
from engine.llm.models import resolve_local
from engine.llm.openai_backend import OpenAICompatLLM
from engine.llm.protocol import ChatResult, Message, schema_validator
from engine.llm.scripted import ScriptedLLM
from ingest.base.errors import InputError


def open_llm(spec: str | None = None, *, cache: bool | ResponseCache = True,
             n_ctx: int = 4096) -> BaseLLM:
    """An LLM from a registry name, a .gguf path, an http(s) URL or `scripted:[FILE]` (canned
    replies for control-flow runs; see ScriptedLLM.from_spec). None: the default model.

    `cache=True` uses the shared response cache, False bypasses it (`--no-cache`), or pass
    a ResponseCache of your own.
    """
    llm: BaseLLM
    if spec and spec.startswith(("http://", "https://")):
        llm = OpenAICompatLLM(spec)
    elif spec and spec.startswith("scripted:"):
        return ScriptedLLM.from_spec(spec)  # canned replies: never cached
    else:
        local = resolve_local(spec)
        llm = LlamaCppLLM(local.path, sha256=local.sha256, name=local.name, n_ctx=n_ctx)
    if isinstance(cache, ResponseCache):
        llm.cache = cache
    elif cache:
        llm.cache = ResponseCache()
    return llm


def chat_once(prompt: str, *, llm: str | None = None, system: str | None = None,
              schema_file: Path | None = None, temperature: float = 0.0, max_tokens: int = 256,
              seed: int = 0, cache: bool = True, n_ctx: int = 4096) -> ChatResult:
    """One prompt (and optional system message and schema file) to one model: `cli.py chat`."""
    schema = None
    if schema_file is not None:
        try:
            schema = json.loads(Path(schema_file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"{schema_file}: not a readable JSON schema ({exc})") from None
        try:
            schema_validator(schema)
        except ValueError as exc:
            raise InputError(f"{schema_file}: {exc}") from None
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": prompt})
    model = open_llm(llm, cache=cache, n_ctx=n_ctx)
    try:
        return model.chat(messages, schema=schema, temperature=temperature,
                          max_tokens=max_tokens, seed=seed, stage="chat")
    finally:
        model.close()
