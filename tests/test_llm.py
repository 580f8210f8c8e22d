"""The LLM layer on a real GGUF model (smollm2-135m, used in place from its PyPI package).

Covers: schema-constrained output always parses, determinism at temperature 0 (also with other
calls in between), prefix-state reuse visible in usage, the persistent response cache
(repeat hits, bypass, several processes writing at once), accounting, the retry-then-error
path, and the `chat` command.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

import cli
from engine.llm.cache import CachedReply, ResponseCache, cache_key
from engine.llm.gbnf import gbnf_for_schema
from engine.llm.llama_cpp_backend import LlamaCppLLM
from engine.llm.model_registry import REGISTRY
from engine.llm.models import model_path
from engine.llm.open import open_llm
from engine.llm.openai_backend import OpenAICompatLLM
from engine.llm.protocol import LLM, enum_array, parse_reply
from engine.llm.scripted import ScriptedLLM
from ingest.base.errors import ModelError

TINY = REGISTRY["smollm2-135m"]

SYSTEM = {
    "role": "system",
    "content": (
        "You help explore a knowledge graph. Given a question and a list of candidate "
        "relations, you choose the relations most likely to lead to the answer. Reply with "
        "JSON only, following the requested format exactly."
    ),
}
RELATIONS = [
    "people.person.place_of_birth",
    "people.person.spouse",
    "film.film.directed_by",
    "location.location.containedby",
    "music.artist.genre",
]
PICK = {
    "type": "object",
    "properties": {
        "relations": enum_array(RELATIONS, max_items=3, min_items=1),
        "reason": {"type": "string", "maxLength": 40},
    },
    "required": ["relations", "reason"],
    "additionalProperties": False,
}

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


def ask(question: str) -> list[dict[str, str]]:
    return [SYSTEM, {"role": "user", "content": f"Question: {question}\nRelations: "
                     + ", ".join(RELATIONS)}]


@pytest.fixture(scope="module")
def tiny() -> Iterator[LlamaCppLLM]:
    """One loaded tiny model for the module, without a response cache."""
    llm = LlamaCppLLM(model_path(TINY), sha256=TINY.sha256 or "", name=TINY.name, n_ctx=2048,
                      n_threads=int(os.environ.get("LOCALKG_LLM_THREADS", TEST_THREADS)))
    yield llm
    llm.close()


@pytest.fixture
def cached_tiny(tiny: LlamaCppLLM, tmp_path: Path) -> Iterator[LlamaCppLLM]:
    tiny.cache = ResponseCache(tmp_path / "cache.sqlite3")
    yield tiny
    tiny.cache.close()
    tiny.cache = None


def test_protocol() -> None:
    assert isinstance(ScriptedLLM([]), LLM)


def test_constrained_output_always_parses(tiny: LlamaCppLLM) -> None:
    schemas: list[dict[str, Any]] = [
        PICK,
        {"type": "object",
         "properties": {"answer": {"type": "string", "maxLength": 40},
                        "confident": {"type": "boolean"},
                        "score": {"type": "integer", "minimum": 0, "maximum": 10}},
         "required": ["answer", "confident", "score"], "additionalProperties": False},
        {"type": "object",
         "properties": {"entity": {"enum": ['Douglas "Doug" Adams', "C:\\Temp", "Zoë Ω"]}},
         "required": ["entity"], "additionalProperties": False},
        enum_array(["yes", "no", "unknown"], max_items=1, min_items=1),
    ]
    questions = ["Where was Ada Lovelace born?", "Who directed Alien?", "Is Lyon in France?"]
    for schema in schemas:
        for q in questions:
            r = tiny.chat(ask(q), schema=schema, max_tokens=96)
            assert r.error is None, (q, r.text, r.error)
            jsonschema.validate(r.parsed, schema)


def test_deterministic_with_calls_in_between(tiny: LlamaCppLLM) -> None:
    first = tiny.chat(ask("Who was the wife of Pierre Curie?"), schema=PICK, max_tokens=80)
    tiny.chat(ask("Where is Kyoto?"), schema=PICK, max_tokens=80)
    tiny.chat([{"role": "user", "content": "Write a haiku about graphs."}], max_tokens=20)
    again = tiny.chat(ask("Who was the wife of Pierre Curie?"), schema=PICK, max_tokens=80)
    assert again.text == first.text
    free = [tiny.chat([{"role": "user", "content": "Name three rivers."}], max_tokens=20)
            for _ in range(2)]
    assert free[0].text == free[1].text
    sampled = [tiny.chat(ask("Where is Kyoto?"), schema=PICK, temperature=0.8, seed=7,
                         max_tokens=80).text for _ in range(2)]
    assert sampled[0] == sampled[1]  # same seed, same sample


def test_prefix_reuse_visible_in_usage(tiny: LlamaCppLLM) -> None:
    system = {"role": "system", "content": "You answer geography questions in one word. " * 6}
    a = tiny.chat([system, {"role": "user", "content": "Capital of Peru?"}], max_tokens=8)
    b = tiny.chat([system, {"role": "user", "content": "Capital of Chile?"}], max_tokens=8)
    assert a.usage.cached_tokens == 0 and a.usage.prompt_tokens > 60
    assert 50 < b.usage.cached_tokens < b.usage.prompt_tokens
    solo = tiny.chat([{"role": "user", "content": "Capital of Peru?"}], max_tokens=8)
    assert solo.usage.cached_tokens == 0  # no prefix: evaluated from scratch


def test_cache_hit_on_repeat(cached_tiny: LlamaCppLLM, tmp_path: Path) -> None:
    first = cached_tiny.chat(ask("Who directed Vertigo?"), schema=PICK, max_tokens=80)
    again = cached_tiny.chat(ask("Who directed Vertigo?"), schema=PICK, max_tokens=80)
    assert not first.usage.cache_hit and again.usage.cache_hit
    assert (again.text, again.parsed) == (first.text, first.parsed)
    assert again.usage.prompt_tokens == first.usage.prompt_tokens
    assert again.usage.seconds < first.usage.seconds
    # the replay reports what the reply cost when it was computed
    assert again.usage.compute_seconds == pytest.approx(first.usage.seconds, abs=1e-6)
    other = cached_tiny.chat(ask("Who directed Vertigo?"), schema=PICK, max_tokens=80, seed=1)
    assert not other.usage.cache_hit  # sampling parameters are part of the key
    # a new process (here: a new LLM object on the same file) replays without loading the model
    replay = LlamaCppLLM(model_path(TINY), sha256=TINY.sha256 or "",
                         cache=ResponseCache(tmp_path / "cache.sqlite3"))
    hit = replay.chat(ask("Who directed Vertigo?"), schema=PICK, max_tokens=80)
    assert hit.usage.cache_hit and hit.text == first.text and replay._model is None


def test_no_cache_bypasses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALKG_HOME", str(tmp_path))
    llm = open_llm(str(model_path(TINY)), cache=False)
    assert llm.cache is None
    r = [llm.chat([{"role": "user", "content": "Hi"}], max_tokens=4) for _ in range(2)]
    assert not r[1].usage.cache_hit


def test_cache_key_covers_every_input() -> None:
    msgs = [{"role": "user", "content": "x"}]
    base = cache_key("fp", msgs, None, 0.0, 16, 0)
    variants = [
        cache_key("fp2", msgs, None, 0.0, 16, 0),
        cache_key("fp", [{"role": "user", "content": "y"}], None, 0.0, 16, 0),
        cache_key("fp", msgs, {"type": "string"}, 0.0, 16, 0),
        cache_key("fp", msgs, None, 0.5, 16, 0),
        cache_key("fp", msgs, None, 0.0, 17, 0),
        cache_key("fp", msgs, None, 0.0, 16, 1),
    ]
    assert len({base, *variants}) == 7
    assert cache_key("fp", msgs, {"b": 1, "a": 2}, 0, 16, 0) == cache_key(
        "fp", msgs, {"a": 2, "b": 1}, 0.0, 16, 0)


def _write_many(path: str, worker: int) -> None:
    cache = ResponseCache(Path(path))
    for i in range(60):
        cache.put(f"{worker}-{i}", "fp", CachedReply(f"reply {worker} {i}", 1, 0, 1, 0.1))
        cache.get(f"{worker}-{i // 2}")
    cache.close()


def test_cache_several_processes_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(str(path), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = ResponseCache(path)
    assert len(cache) == 240
    assert cache.get("3-59") == CachedReply("reply 3 59", 1, 0, 1, 0.1)


def test_recording_per_thread_and_nested(tiny: LlamaCppLLM) -> None:
    seen_elsewhere: list[int] = []

    def other_thread() -> None:
        with tiny.recording() as calls:
            tiny.chat([{"role": "user", "content": "Say one word."}], max_tokens=3, stage="t2")
        seen_elsewhere.append(len(calls))

    with tiny.recording() as question:
        tiny.chat(ask("Who directed Heat?"), schema=PICK, max_tokens=80, stage="relation_prune")
        with tiny.recording() as inner:
            tiny.chat([{"role": "user", "content": "Say one word."}], max_tokens=3, stage="answer")
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
    assert [c.stage for c in question] == ["relation_prune", "answer"]
    assert [c.stage for c in inner] == ["answer"] and seen_elsewhere == [1]
    s = question.summary()
    assert s["calls"] == 2 and s["prompt_tokens"] > 0 and s["completion_tokens"] > 0
    assert s["seconds"] > 0 and s["errors"] == 0 and s["compute_seconds"] == pytest.approx(s["seconds"], abs=1e-3)
    assert set(question.to_dicts()[0]) == {"stage", "prompt_tokens", "cached_tokens", "completion_tokens",
                                           "seconds", "cache_hit", "error", "compute_seconds"}


def test_cut_off_reply_is_retried_then_recorded(tiny: LlamaCppLLM) -> None:
    schema = {"type": "object", "properties": {"story": {"type": "string"}},
              "required": ["story"]}
    with tiny.recording() as calls:
        r = tiny.chat([{"role": "user", "content": "Tell a long story about a dragon."}],
                      schema=schema, max_tokens=6)
    assert r.parsed is None and r.error is not None and "cut off" in r.error
    assert r.usage.completion_tokens > 6  # both attempts are counted (6 + 12)
    assert calls[0].error == r.error


def test_prompt_longer_than_context_is_an_error_not_a_crash() -> None:
    small = LlamaCppLLM(model_path(TINY), sha256="x", n_ctx=128)
    r = small.chat([{"role": "user", "content": "word " * 400}], max_tokens=4)
    assert r.error is not None and "context window" in r.error


def test_invalid_reply_retried_once_then_error() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    llm = ScriptedLLM(["not json", {"n": 3}])
    r = llm.chat([{"role": "user", "content": "count"}], schema=schema)
    assert r.parsed == {"n": 3} and r.error is None
    assert "invalid" in llm.requests[1].messages[-1]["content"]
    llm = ScriptedLLM([{"n": "three"}, {"m": 1}, {"n": 9}])
    with llm.recording() as calls:
        bad = llm.chat([{"role": "user", "content": "count"}], schema=schema, stage="s")
    assert bad.parsed is None and "schema" in (bad.error or "") and calls[0].error
    assert llm.remaining == 1


def test_scripted_llm_callable_and_exhaustion() -> None:
    llm = ScriptedLLM(lambda req: {"stage": req.stage} if req.schema else "plain")
    assert llm.chat([{"role": "user", "content": "x"}]).text == "plain"
    schema = {"type": "object", "properties": {"stage": {"enum": ["prune"]}}}
    assert llm.chat([{"role": "user", "content": "x"}], schema=schema,
                    stage="prune").parsed == {"stage": "prune"}
    with pytest.raises(ModelError, match="ran out"):
        ScriptedLLM([]).chat([{"role": "user", "content": "x"}])
    with pytest.raises(ValueError, match="invalid JSON schema"):
        llm.chat([{"role": "user", "content": "x"}], schema={"type": "nonsense"})
    with pytest.raises(ValueError, match="role"):
        llm.chat([{"role": "robot", "content": "x"}])


def test_grammar_escapes_quotes_and_backslashes() -> None:
    gbnf = gbnf_for_schema({"enum": ['a "b"', "c\\d"]})
    assert '\\"a \\\\\\"b\\\\\\"\\"' in gbnf and "c\\\\\\\\d" in gbnf
    assert parse_reply('"c\\\\d"', {"enum": ['a "b"', "c\\d"]}) == ("c\\d", None)
    assert parse_reply("```json\n[1]\n```", {"type": "array"}) == ([1], None)


def test_open_llm_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALKG_HOME", str(tmp_path))
    by_name = open_llm("smollm2-135m", cache=False)
    by_path = open_llm(str(model_path(TINY)), cache=False)
    assert isinstance(by_name, LlamaCppLLM) and by_name.fingerprint == by_path.fingerprint
    assert TINY.sha256 and TINY.sha256 in by_name.fingerprint
    with pytest.raises(ModelError, match="unknown model"):
        open_llm("no-such-model")
    with pytest.raises(ModelError, match="not an http"):
        OpenAICompatLLM("http:///v1")


def test_cli_chat_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALKG_HOME", str(tmp_path))
    schema_file = tmp_path / "pick.json"
    schema_file.write_text(json.dumps(PICK))
    args = ["chat", "--llm", "smollm2-135m", "--schema", str(schema_file), "--max-tokens", "80",
            "--system", SYSTEM["content"], "--json", "Who directed Alien? " + ", ".join(RELATIONS)]
    runner = CliRunner()
    out = runner.invoke(cli.main, args)
    assert out.exit_code == 0, out.output
    reply = json.loads(out.output)
    assert {"text", "parsed", "usage"} <= set(reply)
    jsonschema.validate(reply["parsed"], PICK)
    again = json.loads(runner.invoke(cli.main, args).output)
    assert again["usage"]["cache_hit"] and again["parsed"] == reply["parsed"]
    fresh = json.loads(runner.invoke(cli.main, [*args[:-2], "--no-cache", *args[-2:]]).output)
    assert not fresh["usage"]["cache_hit"] and fresh["text"] == reply["text"]
    (tmp_path / "bad.json").write_text("{nope")
    bad = runner.invoke(cli.main, ["chat", "--llm", "smollm2-135m", "--schema",
                                   str(tmp_path / "bad.json"), "hi"])
    assert bad.exit_code == 2 and "bad.json" in bad.output


def test_grammar_strings_exclude_raw_control_characters() -> None:
    """JSON forbids a raw newline inside a string: the grammar must not let a model write one
    (seen with qwen2.5-coder-0.5b on RAG prompts), and a reply that has one still parses."""
    grammar = gbnf_for_schema({"type": "object", "properties": {"answer": {"type": "string"}},
                                "required": ["answer"]})
    char_rule = next(line for line in grammar.splitlines() if line.startswith("char ::="))
    assert char_rule.startswith('char ::= [^"\\\\\\x00-\\x1F\\x7F]')
    from llama_cpp import LlamaGrammar

    LlamaGrammar.from_string(grammar, verbose=False)  # llama.cpp accepts the rule
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    assert parse_reply('{"answer": "two\nlines"}', schema) == ({"answer": "two\nlines"}, None)
