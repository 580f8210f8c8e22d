"""Evidence a person can read, traces and abstentions (issue 10, item 6), with a scripted LLM on
a tiny real index (an Oxigraph KG of three entities, one without a label, and two documents).

The scripted LLM proves control flow only: what reaches the record, the prompts, the trace and
the run's calls file. tests/test_evidence_real.py keeps the prompts and replies of a real model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from cli import main
from engine.llm.cache import ResponseCache
from engine.llm.scripted import ScriptedLLM, ScriptedRequest
from engine.methods.registry import config_hash, default_config
from engine.methods.shared import prompts
from engine.methods.shared.labels import UNNAMED, display_text, entity_text
from engine.questions.record import AnswerRecord, Question
from engine.questions.render import call_printer, render_record
from engine.runs.answer import answer_question
from engine.runs.batch import BatchOptions, run_batch
from engine.runs.context import open_context
from engine.runs.transcripts import read_transcripts, transcript_path
from index.build import build_index
from index.doc_options import DocSource
from index.kg_stage import KgSource

KG = """@prefix e: <https://t.example/entity/> .
@prefix r: <https://t.example/relation/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
e:lqg rdfs:label "Loop quantum gravity"@en .
e:rovelli rdfs:label "Carlo Rovelli"@en .
e:lqg r:developed_by e:rovelli .
e:lqg r:related_to e:Q350 .
"""
DOCS = [
    {"id": "307", "title": "Loop quantum gravity",
     "text": "Loop quantum gravity is a theory of quantum gravity. It was developed by Carlo Rovelli "
             "and Lee Smolin in the late 1980s."},
    {"id": "12", "title": "Sochi",
     "text": "Sochi is a city on the Black Sea coast of Russia. It hosted the 2014 Winter Olympics."},
]
RAG_Q = Question("q1", "Who developed loop quantum gravity?", ["Carlo Rovelli"])
TOG_Q = Question("t1", "What is loop quantum gravity related to?", ["Q350"], ["Loop quantum gravity"])


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("tiny-src")
    (src / "kg.ttl").write_text(KG, encoding="utf-8")
    (src / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    out = tmp_path_factory.mktemp("tiny") / "ix"
    build_index(out, [KgSource(src / "kg.ttl", "turtle")], [DocSource(src / "docs.jsonl", "jsonl", "wiki")])
    return out


def _shown(record: AnswerRecord) -> str:
    console = Console(record=True, width=200)
    render_record(record, console)
    return console.export_text()


# ---- rag: titles, explained scores, honest grounding, abstention -----------------------------


def test_rag_evidence_names_the_page_and_explains_the_score(tiny_index: Path) -> None:
    llm = ScriptedLLM([{"answer": "Carlo Rovelli"}])
    record = answer_question("rag", RAG_Q, open_context(tiny_index, llm))
    top = record.paths[0]
    assert top.titles == ["Loop quantum gravity"] and top.chunk_ids and top.score_kind == "cosine to the question"
    assert record.answer_source == "doc" and record.extra["grounding"] == "in evidence"
    shown = _shown(record)
    assert f'"Loop quantum gravity" (wiki {top.chunk_ids[0]})' in shown
    assert f"cosine {top.score:.3f} to the question" in shown
    again = AnswerRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again.paths[0].titles == ["Loop quantum gravity"] and again.paths[0].score_kind == top.score_kind


def test_rag_guess_from_elsewhere_is_not_marked_from_doc(tiny_index: Path) -> None:
    llm = ScriptedLLM([{"answer": "Albert Einstein"}])
    record = answer_question("rag", RAG_Q, open_context(tiny_index, llm))
    assert record.prediction == "Albert Einstein"
    assert record.answer_source == "llm" and record.extra["grounding"] == "not in evidence"
    assert "from llm (not in evidence)" in _shown(record)
    # the default prompt and schema are the ones the response cache was filled with
    request = llm.requests[0]
    assert request.messages[0]["content"] == prompts.RAG_SYSTEM and request.schema == prompts.ANSWER_SCHEMA


def test_rag_abstains_only_when_asked(tiny_index: Path) -> None:
    llm = ScriptedLLM([{"found": False, "answer": ""}, {"found": True, "answer": "Carlo Rovelli"}])
    ctx = open_context(tiny_index, llm)
    record = answer_question("rag", RAG_Q, ctx, {"abstain": True})
    assert record.abstained and record.prediction == "" and record.predictions == []
    assert record.answer_source == "none" and record.error is None
    assert llm.requests[0].messages[0]["content"] == prompts.RAG_ABSTAIN_SYSTEM
    assert llm.requests[0].schema == prompts.FOUND_ANSWER_SCHEMA
    assert "not found" in _shown(record) and "abstained" in _shown(record)
    answered = answer_question("rag", RAG_Q, ctx, {"abstain": True})
    assert not answered.abstained and answered.prediction == "Carlo Rovelli" and answered.answer_source == "doc"
    assert answered.correct["hits1"] is True


def test_abstain_at_its_default_keeps_every_config_hash() -> None:
    """Runs made before the option existed keep their hash (and resume); setting it changes it."""
    import hashlib

    for method in ("rag", "tog", "tog-r"):
        config = default_config(method)
        before = {k: v for k, v in config.items() if k != "abstain"}
        blob = json.dumps({"method": method, "config": before}, sort_keys=True, default=str)
        assert config_hash(method, config) == hashlib.sha256(blob.encode()).hexdigest()[:16]
        assert config_hash(method, {**config, "abstain": True}) != config_hash(method, config)


# ---- one name for an entity, prompts unchanged ---------------------------------------------


def test_an_unlabeled_entity_has_one_name_for_people_and_none_for_the_model(tiny_index: Path) -> None:
    def reply(req: ScriptedRequest) -> Any:
        if req.stage == "reasoning":
            return {"sufficient": False, "answer": ""}
        return {"answer": "a guess"}

    llm = ScriptedLLM(reply)
    ctx = open_context(tiny_index, llm)
    q350 = "https://t.example/entity/Q350"
    assert display_text(ctx.kg, q350) == "Q350" == ctx.kg.label(q350)  # what `kg tails` prints
    assert entity_text(ctx.kg, q350) == UNNAMED
    record = answer_question("tog", TOG_Q, ctx)
    prompt_text = json.dumps([r.messages for r in llm.requests])
    assert UNNAMED in prompt_text and "Q350" not in prompt_text  # no id reaches the model
    assert ["Loop quantum gravity", "related to", "Q350"] in [t for p in record.paths for t in p.triples]
    assert "Q350" in record.extra["trace"][0]["entities"]
    shown = record.to_dict()
    shown.pop("llm_transcript")
    assert UNNAMED not in json.dumps(shown)
    assert [r.stage for r in llm.requests] == ["reasoning", "answer_llm"]  # the paper's fallback
    assert record.paths[0].score_kind and record.paths[0].score_kind.startswith("path score")
    assert "path score" in _shown(record)


@pytest.mark.parametrize("method", ["tog", "tog-r"])
def test_tog_abstains_instead_of_answering_from_memory(tiny_index: Path, method: str) -> None:
    llm = ScriptedLLM(lambda req: {"sufficient": False, "answer": ""})
    record = answer_question(method, TOG_Q, open_context(tiny_index, llm), {"abstain": True})
    assert [r.stage for r in llm.requests] == ["reasoning"]  # no answer_llm call
    assert record.abstained and record.prediction == "" and record.answer_source == "none"
    assert record.extra["stopped"] == "dead_end" and "nothing left to follow" in record.extra["abstained_because"]
    assert record.paths  # the evidence explored is still shown


# ---- prompts and raw replies: in the record, live with --trace, in the run's calls file -------


def test_every_call_keeps_its_messages_and_raw_reply(tiny_index: Path, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite3")
    seen: list[Any] = []
    llm = ScriptedLLM(['{"answer":  "Carlo Rovelli"}'], cache=cache)
    first = answer_question("rag", RAG_Q, open_context(tiny_index, llm), on_call=seen.append)
    (call,) = first.llm_transcript
    assert call["stage"] == "answer" and call["reply"] == '{"answer":  "Carlo Rovelli"}'  # raw, not re-serialised
    assert call["messages"] == llm.requests[0].messages and call["cache_hit"] is False
    assert len(seen) == 1 and seen[0].reply == call["reply"]
    assert "messages" not in first.llm_calls[0] and "reply" not in first.llm_calls[0]  # the cost line stays small
    # a replay from the response cache keeps the same transcript
    replay = answer_question("rag", RAG_Q, open_context(tiny_index, ScriptedLLM([], cache=cache)))
    assert replay.llm_transcript[0]["cache_hit"] is True
    assert replay.llm_transcript[0]["reply"] == call["reply"]
    assert replay.llm_transcript[0]["messages"] == call["messages"]
    cache.close()


def test_call_printer_shows_prompt_and_raw_reply(tiny_index: Path) -> None:
    console = Console(record=True, width=200)
    llm = ScriptedLLM(["{\"answer\": \"Carlo Rovelli\"}"])
    answer_question("rag", RAG_Q, open_context(tiny_index, llm), on_call=call_printer(console))
    text = console.export_text()
    assert "LLM call 1: answer" in text and "[system]" in text and "[raw reply]" in text
    assert prompts.RAG_SYSTEM.splitlines()[0] in text and "Question: Who developed loop quantum gravity?" in text
    assert '{"answer": "Carlo Rovelli"}' in text


def test_ask_trace_and_set_on_the_command_line(tiny_index: Path, tmp_path: Path) -> None:
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(['{"found": false, "answer": ""}']), encoding="utf-8")
    result = CliRunner().invoke(main, ["ask", "--index", str(tiny_index), "--method", "rag", "--llm",
                                       f"scripted:{replies}", "--set", "abstain=true", "--trace", RAG_Q.question])
    assert result.exit_code == 0, result.output
    assert "LLM call 1: answer" in result.stderr and '{"found": false, "answer": ""}' in result.stderr
    assert "not found" in result.stdout and "LLM call 1" not in result.stdout  # the trace goes to stderr
    as_json = CliRunner().invoke(main, ["ask", "--index", str(tiny_index), "--method", "rag", "--llm",
                                        f"scripted:{replies}", "--set", "abstain=true", "--json", RAG_Q.question])
    record = json.loads(as_json.stdout)
    assert record["abstained"] is True and record["llm_transcript"][0]["reply"] == '{"found": false, "answer": ""}'
    bad = CliRunner().invoke(main, ["ask", "--index", str(tiny_index), "--method", "io", "--set", "abstain=true", "x"])
    assert bad.exit_code == 2 and "abstain" in bad.output  # io has no such option


def test_batch_keeps_calls_beside_the_records_and_resumes(tiny_index: Path, tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"id": f"q{i}", "question": q, "answers": ["Carlo Rovelli"]}) + "\n"
                                 for i, q in enumerate([RAG_Q.question, "Where is Sochi?"])), encoding="utf-8")
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([{"answer": "Carlo Rovelli"}, {"answer": "Russia"}]), encoding="utf-8")
    out = tmp_path / "run"
    options = BatchOptions(index=tiny_index, questions=questions, methods=["rag"], out=out,
                           llm=f"scripted:{replies}")
    run_batch(options)
    records = [json.loads(line) for line in (out / "rag.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ["q0", "q1"] and all("llm_transcript" not in r for r in records)
    calls = read_transcripts(out, "rag")
    assert set(calls) == {"q0", "q1"}
    assert calls["q1"]["calls"][0]["reply"] == '{"answer": "Russia"}'
    assert "Where is Sochi?" in calls["q1"]["calls"][0]["messages"][-1]["content"]
    assert calls["q0"]["config_hash"] == records[0]["config_hash"]
    # a kill mid-write leaves a torn line: it is cut, a resumed run adds nothing twice
    path = transcript_path(out, "rag")
    before = path.read_bytes()
    path.write_bytes(before + b'{"id": "q9", "calls": [')
    report = run_batch(options)
    assert report.ran == 0 and path.read_bytes() == before + b'{"id": "q9", "calls": ['
    assert set(read_transcripts(out, "rag")) == {"q0", "q1"}
    (out / "rag.jsonl").write_text(json.dumps(records[0]) + "\n", encoding="utf-8")  # q1 lost its record
    assert run_batch(options).ran == 1  # (the scripted model answers with its first reply again)
    assert path.read_bytes().startswith(before) and path.read_bytes().count(b"\n") == 3
    assert read_transcripts(out, "rag")["q1"]["calls"][0]["reply"] == '{"answer": "Carlo Rovelli"}'
