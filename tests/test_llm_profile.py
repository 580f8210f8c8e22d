"""The llama.cpp backend's own decoding loop and its profile: replies equal to llama-cpp-python's
`create_completion` (the reference path) under grammars, greedy and sampled, on a real model;
the per-call timings; the grammar cache; and the pure top-p check the sampler relies on."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.bench_llm_profile import _summary
from engine.llm.llama_cpp_backend import LlamaCppLLM
from engine.llm.model_registry import REGISTRY
from engine.llm.models import model_path
from engine.llm.protocol import enum_array
from engine.llm.sampling import GAP, TOP_K, _top_p_settled
from engine.llm.timings import PARTS, CallTimings
from engine.methods.shared import prompts

TINY = REGISTRY["smollm2-135m"]
SYSTEM = {"role": "system", "content": (
    "You help explore a knowledge graph. Given a question and candidate relations, choose the "
    "relations most likely to lead to the answer. Reply with JSON only.")}
RELATIONS = ["people.person.place_of_birth", "people.person.spouse", "film.film.directed_by",
             "location.location.containedby", "music.artist.genre", "film.actor.film"]
PICK = {"type": "object", "properties": {"relations": enum_array(RELATIONS, max_items=3, min_items=1),
                                         "reason": {"type": "string", "maxLength": 40}},
        "required": ["relations", "reason"], "additionalProperties": False}
SCORE = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 30},
                                          "score": {"type": "number", "minimum": 0, "maximum": 1}},
         "required": ["answer", "score"], "additionalProperties": False}
QUESTIONS = ["Who directed the film that Tom Hanks starred in?", "Where was the spouse of Frida Kahlo born?",
             "Which genre does the band that recorded Abbey Road play?"]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALKG_HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def tiny() -> Iterator[LlamaCppLLM]:
    llm = LlamaCppLLM(model_path(TINY), sha256=TINY.sha256 or "", name=TINY.name, n_ctx=2048, n_threads=1)
    yield llm
    llm.close()


def _ask(question: str) -> list[dict[str, str]]:
    return [SYSTEM, {"role": "user", "content": f"Question: {question}\nRelations: {', '.join(RELATIONS)}"}]


def _both(llm: LlamaCppLLM, messages: list[dict[str, str]], **kwargs: Any) -> tuple[Any, Any]:
    results = []
    for fast in (True, False):
        llm.fast_sampling = fast
        results.append(llm.chat(messages, **kwargs))
    llm.fast_sampling = True
    return results[0], results[1]


@pytest.mark.slow
@pytest.mark.parametrize("schema", [PICK, SCORE, prompts.COT_SCHEMA, None], ids=["enum", "score", "cot", "free"])
def test_the_decoding_loop_gives_create_completions_replies(tiny: LlamaCppLLM, schema: dict[str, Any] | None) -> None:
    for question, (temperature, seed) in zip(QUESTIONS * 2, ((0.0, 0), (0.4, 0), (0.7, 3), (1.2, 5),
                                                             (0.0, 1), (0.4, 7)), strict=True):
            fast, reference = _both(tiny, _ask(question), schema=schema, temperature=temperature,
                                    seed=seed, max_tokens=64)
            assert (fast.text, fast.error) == (reference.text, reference.error), (question, temperature, seed)
            assert fast.usage.completion_tokens == reference.usage.completion_tokens


@pytest.mark.slow
def test_a_reply_cut_off_is_cut_off_and_retried_the_same_way(tiny: LlamaCppLLM) -> None:
    fast, reference = _both(tiny, _ask(QUESTIONS[0]), schema=PICK, max_tokens=6)
    assert fast.text == reference.text and fast.error == reference.error
    assert fast.usage.completion_tokens == reference.usage.completion_tokens > 6  # two attempts


@pytest.mark.slow
def test_timings_split_a_call(tiny: LlamaCppLLM) -> None:
    schema = {"type": "object", "properties": {"relations": enum_array(RELATIONS[:4], max_items=2)},
              "required": ["relations"]}
    with tiny.recording() as calls:
        tiny.chat(_ask(QUESTIONS[1]), schema=schema, max_tokens=48)
        tiny.chat(_ask(QUESTIONS[2]), schema=schema, max_tokens=48)
    first, second = calls
    assert first.timings is not None and second.timings is not None
    assert "timings" not in first.to_dict()  # a record's cost lines keep their keys
    for call in calls:
        t = call.timings
        assert t is not None and 0 < t.parts_seconds() <= call.seconds
        assert t.prompt_eval > 0 and t.sampling > 0 and t.threads == 1
        assert t.sampled_tokens == call.completion_tokens + 1  # the end-of-generation token
        assert t.generated_tokens == call.completion_tokens
        assert t.prompt_eval_tokens == call.prompt_tokens - call.cached_tokens
    assert second.cached_tokens > 0 and second.timings.kv_state > 0
    assert second.timings.grammar_build == 0.0  # built once per schema
    assert first.timings.full_grammar_scans <= first.timings.sampled_tokens


@pytest.mark.slow
def test_the_grammar_cache_is_bounded(tiny: LlamaCppLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LlamaCppLLM, "MAX_GRAMMARS", 3)
    for n in range(5):
        tiny._grammar({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": n}}})
    assert len(tiny._grammars) == 3
    assert all(g.pristine for g in tiny._grammars.values())


def test_top_p_is_settled_when_nothing_missing_could_move_its_cut() -> None:
    confident = np.array([10.0], dtype=np.float32)
    assert _top_p_settled(confident, floor=-GAP)  # the rest are 28 logits down: nothing
    assert not _top_p_settled(confident, floor=9.0)  # 39 tokens just below could hold most of it
    # min-p keeps only the first (the second is 5 logits down): top-p's cut cannot matter
    assert _top_p_settled(np.array([0.0, -5.0]), floor=-6.0)
    # two close tokens: top-p keeps both (0.5 + 0.5 >= 0.95) whatever is missing far below
    assert _top_p_settled(np.array([0.0, 0.0]), floor=-14.0)
    # the cut sits right at 0.95 (p = 0.95, 0.05): too close to call
    near = np.array([0.0, math.log(0.05 / 0.95)])
    assert not _top_p_settled(near, floor=-30.0)


def test_top_k_accepted_tokens_settle_it_alone() -> None:
    assert TOP_K == 40  # what create_completion passes, and what the sampler mirrors


def test_summary_prices_tokens_at_the_raw_rates() -> None:
    timings = CallTimings(prompt_eval=1.5, generation=1.0, sampling=0.2, prompt_eval_tokens=300,
                          generated_tokens=40, sampled_tokens=42, threads=2).to_dict()
    row = {"id": "q", "prediction": "", "predictions": [], "hits1": True, "error": None, "replies": [],
           "seconds": 3.0, "llm_s": 2.8, "calls": 2, "completion_tokens": 40, "timings": timings}
    s = _summary([row], {"prompt_tokens_per_s": 200.0, "generated_tokens_per_s": 40.0})
    assert s["tokens_cost_s"] == pytest.approx(300 / 200 + 40 / 40)
    assert s["llm_over_tokens_cost"] == pytest.approx(2.8 / 2.5, abs=0.01)
    assert s["retrieval_scoring_s"] == pytest.approx(0.2)
    assert s["split_s"]["other_llm_layer"] == pytest.approx(2.8 - 2.7, abs=1e-6)
    assert set(PARTS) < set(s["split_s"])
