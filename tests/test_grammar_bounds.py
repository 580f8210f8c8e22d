"""Grammar bounds within max_tokens (issue 10): a reply cut off at max_tokens is retried with
twice the tokens under a grammar whose longest text fits in them, so it ends as valid JSON.
Before, the retry's grammar still allowed a 240-character answer (up to 1,458 bytes with
escapes): io at 48 -> 96 tokens and tog at 128 -> 256 ended as unterminated JSON.

The cache key and the validation keep the caller's schema; a first reply that fits is decoded
exactly as before (its grammar is unchanged)."""

from __future__ import annotations

import json
import os
from typing import Any

import jsonschema
import pytest

from engine.llm.base import BaseLLM
from engine.llm.cache import cache_key
from engine.llm.gbnf import gbnf_for_schema
from engine.llm.grammar_bounds import fit_schema, max_json_bytes
from engine.llm.protocol import Generation
from engine.methods.shared import prompts

SCHEMAS = {
    "answer": prompts.ANSWER_SCHEMA,
    "cot": prompts.COT_SCHEMA,
    "reasoning": prompts.REASONING_SCHEMA,
    "choice": prompts.choice_schema("relations", ["people.person.place_of_birth", "film.film.directed_by",
                                                  "Zoë Kravitz", "a", "b"], 2),
    "list": {"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string", "maxLength": 50},
                                                        "minItems": 1, "maxItems": 8}},
             "required": ["names"]},
}


def longest_text(schema: dict[str, Any]) -> str:
    """The longest JSON text the fitted grammar admits, written independently of the module:
    every property, every item, every string full, a space wherever the grammar allows one."""
    if "enum" in schema:
        return max((json.dumps(v) for v in schema["enum"]), key=len) + " "
    kind = schema["type"]
    if kind == "boolean":
        return "false "
    if kind == "string":
        pattern = schema["pattern"]
        length = int(pattern[pattern.rindex(",") + 1 : pattern.rindex("}")])
        return '"' + "~" * length + '" '
    if kind == "array":
        return "[ " + ", ".join(longest_text(schema["items"]) for _ in range(schema["maxItems"])) + "] "
    parts = [f"{json.dumps(k)} : {longest_text(v)}" for k, v in schema["properties"].items()]
    return "{ " + ", ".join(parts) + "} "


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("budget", [48, 64, 96, 128, 256, 320])
def test_fitted_schema_fits_the_budget_and_stays_valid(name: str, budget: int) -> None:
    schema = SCHEMAS[name]
    fitted = fit_schema(schema, budget)
    if fitted is None:  # nothing fits: only when even empty strings and minItems are too long
        assert name == "choice" or budget < 64
        return
    if fitted is schema:
        size = max_json_bytes(schema)
        assert size is not None and size <= budget
        return
    text = longest_text(fitted)
    assert len(text.encode()) <= budget
    size = max_json_bytes(fitted)
    assert size is not None and len(text.encode()) <= size <= budget
    jsonschema.validate(json.loads(text), schema)  # what the grammar writes validates as before
    assert gbnf_for_schema(fitted)  # and llama.cpp's converter takes it


def test_unbounded_or_unknown_schemas_are_left_alone() -> None:
    assert max_json_bytes({"type": "string"}) is None
    assert max_json_bytes({"type": "array", "items": {"type": "integer"}}) is None
    assert fit_schema({"type": "object", "properties": {"x": {"type": "number"}}}, 64) is None
    small = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    assert fit_schema(small, 64) is small


class CutOff(BaseLLM):
    """A backend that answers like a rambling model: as long as the grammar lets it."""

    fingerprint = "cut-off-test"

    def __init__(self) -> None:
        super().__init__(cache=None)
        self.schemas: list[dict[str, Any] | None] = []

    def _generate(self, messages: list[dict[str, str]], *, schema: dict[str, Any] | None,
                  temperature: float, max_tokens: int, seed: int, stage: str) -> Generation:
        self.schemas.append(schema)
        size = max_json_bytes(schema) if schema is not None else None
        if size is not None and size <= max_tokens:  # a bounded grammar: the text ends
            text = json.dumps({"answer": "word " * 2})
            return Generation(text, 10, 0, len(text), truncated=False)
        text = '{"answer": "' + "word " * max_tokens  # one token per word, never closed
        return Generation(text[: max_tokens * 5], 10, 0, max_tokens, truncated=True)


def test_the_retry_of_a_cut_off_reply_is_decoded_under_fitted_bounds() -> None:
    llm = CutOff()
    messages = [{"role": "user", "content": "Question: when was Inception released"}]
    result = llm.chat(messages, schema=prompts.ANSWER_SCHEMA, max_tokens=48)
    assert result.error is None and result.parsed == {"answer": "word word "}
    first, retry = llm.schemas
    assert first is prompts.ANSWER_SCHEMA  # the first attempt is decoded exactly as before
    assert retry is not None and max_json_bytes(retry) == 96  # 2 x 48 tokens
    # the cache key is made of the caller's schema and max_tokens, not the fitted one
    assert cache_key("m", messages, prompts.ANSWER_SCHEMA, 0.0, 48, 0) != cache_key("m", messages, retry, 0.0, 48, 0)


@pytest.mark.slow
def test_a_rambling_tiny_model_now_ends_with_valid_json(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.llm.open import open_llm

    monkeypatch.setenv("LOCALKG_LLM_THREADS", os.environ.get("LOCALKG_LLM_THREADS", "1"))
    llm = open_llm("smollm2-135m", cache=False)
    try:
        result = llm.chat([{"role": "system", "content": "You write very long answers. The answer is always "
                            "at least 300 words long, a full essay."},
                           {"role": "user", "content": "Describe the history of the Roman Empire."}],
                          schema=prompts.ANSWER_SCHEMA, max_tokens=24, temperature=0.0)
    finally:
        llm.close()
    # before: "invalid reply after a retry: ... Unterminated string ...; reply cut off at max_tokens=48"
    assert result.error is None, result.error
    assert result.parsed is not None and result.parsed["answer"].startswith("The Roman Empire")
    assert result.usage.completion_tokens <= 24 + 48
