"""Prompts and raw replies of a real model (smollm2-135m) are kept: in the record, live with
`ask --trace`, and in a batch run's calls file, also when the replies come from the response
cache. On the demo index (built once per session by the `demo_index` fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from engine.llm.cache import ResponseCache
from engine.llm.open import open_llm
from engine.methods.shared import prompts
from engine.questions.record import Question
from engine.runs.answer import answer_question
from engine.runs.context import open_context
from engine.runs.transcripts import read_transcripts

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m"
QUESTIONS = Path(__file__).resolve().parents[1] / "data" / "demo" / "questions.jsonl"


def test_real_rag_and_tog_calls_keep_prompt_and_raw_reply(demo_index: Path, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite3")
    ctx = open_context(demo_index, open_llm(MODEL, cache=cache))
    try:
        question = Question("q", "Who founded Norvale Motors?", ["Oskar Thelling"])
        rag = answer_question("rag", question, ctx)
        (call,) = rag.llm_transcript
        assert call["messages"][0] == {"role": "system", "content": prompts.RAG_SYSTEM}
        titles = [p.titles[0] for p in rag.paths]
        assert titles and all(titles) and all(f"{t}: " in call["messages"][1]["content"] for t in titles)
        reply = json.loads(call["reply"])  # the raw reply, as the model wrote it
        assert " ".join(str(reply["answer"]).split()).strip(" .") == rag.prediction
        tog = answer_question("tog", Question("t", "Who is the chief executive of Norvale Motors?", []),
                              ctx, {"depth": 1})
        assert [c["stage"] for c in tog.llm_transcript] == [c["stage"] for c in tog.llm_calls]
        assert len(tog.llm_transcript) >= 1
        for c in tog.llm_transcript:
            assert c["messages"][-1]["content"] and c["reply"].strip().startswith("{"), c
        reasoning = [c for c in tog.llm_transcript if c["stage"] == "reasoning"]
        assert reasoning and "Triples:" in reasoning[0]["messages"][-1]["content"]
    finally:
        ctx.close()


def test_real_batch_keeps_calls_and_a_replay_keeps_the_same(demo_index: Path, tmp_path: Path) -> None:
    runner = CliRunner()

    def batch(out: Path) -> None:
        result = runner.invoke(main, ["batch", "--index", str(demo_index), "--questions", str(QUESTIONS),
                                      "--methods", "rag", "--llm", MODEL, "--limit", "2", "--out", str(out)])
        assert result.exit_code == 0, result.output

    batch(tmp_path / "run1")
    first = read_transcripts(tmp_path / "run1", "rag")
    assert len(first) == 2
    for line in first.values():
        (call,) = line["calls"]
        assert call["cache_hit"] is False and call["messages"][-1]["content"].startswith("Passages:")
        assert json.loads(call["reply"])["answer"] is not None
    batch(tmp_path / "run2")  # a replay from the response cache
    second = read_transcripts(tmp_path / "run2", "rag")
    assert {k: [c["reply"] for c in v["calls"]] for k, v in second.items()} == \
        {k: [c["reply"] for c in v["calls"]] for k, v in first.items()}
    assert all(c["cache_hit"] for v in second.values() for c in v["calls"])
    trace = runner.invoke(main, ["ask", "--index", str(demo_index), "--method", "rag", "--llm", MODEL, "--trace",
                                 "Who founded Norvale Motors?"])
    assert trace.exit_code == 0, trace.output
    assert "[raw reply]" in trace.stderr and prompts.RAG_SYSTEM.splitlines()[0][:40] in trace.stderr
