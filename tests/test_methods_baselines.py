"""io, cot, sc, rag control flow (scripted LLM), the run_question contract, and the helpers
that turn labels and answers into prompt text and predictions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.access.kg_protocol import Relation
from engine.llm.scripted import ScriptedLLM, ScriptedRequest
from engine.methods.context import Context
from engine.methods.registry import config_hash, default_config, names
from engine.methods.shared.common import majority, rank_answers
from engine.methods.shared.labels import UNNAMED, entity_text, relation_text, unique_texts
from engine.questions.record import AnswerRecord, Question
from engine.runs.answer import answer_question as run_question
from engine.runs.context import open_context

QUESTION = Question("q1", "what movies did [Temuera Morrison] act in", ["Tracker"])


@pytest.fixture()
def context(metaqa_index: Path) -> Any:
    def make(llm: Any) -> Context:
        return open_context(metaqa_index, llm)

    return make


def test_registry_holds_every_method() -> None:
    assert names()[:6] == ["io", "cot", "sc", "rag", "tog", "tog-r"]  # plugins may add more
    for name in names():
        assert isinstance(default_config(name), dict)


def test_io_answers_in_one_call(context: Any) -> None:
    llm = ScriptedLLM([{"answer": " Tracker. "}])
    record = run_question("io", QUESTION, context(llm))
    assert (record.prediction, record.predictions, record.answer_source) == ("Tracker", ["Tracker"], "llm")
    assert record.error is None and record.method == "io" and record.answers == ["Tracker"]
    request = llm.requests[0]
    assert request.messages[0]["role"] == "system" and "[" not in request.messages[-1]["content"]
    assert request.temperature == 0.0 and request.stage == "answer"
    assert len(record.llm_calls) == 1 and record.stage_seconds["answer"] >= 0


def test_io_invalid_reply_is_an_error_record(context: Any) -> None:
    record = run_question("io", QUESTION, context(ScriptedLLM(["no json", "still none"])))
    assert record.error is not None and record.error.startswith("the answer call failed")
    assert record.answer_source == "none" and record.prediction == ""
    assert len(record.llm_calls) == 1 and record.llm_calls[0]["error"]


def test_cot_keeps_its_reasoning(context: Any) -> None:
    llm = ScriptedLLM([{"reasoning": "He starred in Tracker.", "answer": "Tracker"}])
    record = run_question("cot", QUESTION, context(llm))
    assert record.prediction == "Tracker" and record.extra["reasoning"] == "He starred in Tracker."
    assert "reasoning" in llm.requests[0].schema["properties"]  # type: ignore[index]


def test_sc_samples_with_different_seeds_and_votes(context: Any) -> None:
    answers = {0: "Tracker", 1: "River Queen", 2: "tracker", 3: "Heat", 4: "River Queen"}

    def reply(req: ScriptedRequest) -> Any:
        return {"reasoning": "...", "answer": answers[req.seed]}

    llm = ScriptedLLM(reply)
    record = run_question("sc", QUESTION, context(llm))
    assert sorted(r.seed for r in llm.requests) == [0, 1, 2, 3, 4]
    assert all(r.temperature == 0.7 for r in llm.requests)
    assert record.prediction == "Tracker"  # 2 votes (Tracker, tracker) before River Queen's 2: first seen
    assert record.predictions == ["Tracker", "River Queen", "Heat"]
    assert record.extra["votes"][0] == {"answer": "Tracker", "votes": 2}
    assert len(record.llm_calls) == 5


def test_rag_without_documents_is_an_error_record(context: Any) -> None:
    record = run_question("rag", QUESTION, context(ScriptedLLM([])))
    assert record.error is not None and "no documents" in record.error


def test_config_is_checked_and_hashed() -> None:
    with pytest.raises(ValueError, match="unknown method"):
        default_config("nope")
    with pytest.raises(ValueError, match="has no config key widht"):
        run_question("tog", QUESTION, None, {"widht": 2})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prune_tool"):
        run_question("tog", QUESTION, None, {"prune_tool": "magic"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="width"):
        run_question("tog", QUESTION, None, {"width": 0})  # type: ignore[arg-type]
    base = default_config("tog")
    assert config_hash("tog", base) == config_hash("tog", dict(reversed(list(base.items()))))
    assert config_hash("tog", base) != config_hash("tog-r", base)
    assert config_hash("tog", base) != config_hash("tog", {**base, "width": 2})


def test_record_round_trips_through_a_dict(context: Any) -> None:
    record = run_question("io", QUESTION, context(ScriptedLLM([{"answer": "Tracker"}])))
    again = AnswerRecord.from_dict(record.to_dict())
    assert again == record


# -- helpers ----------------------------------------------------------------------------------


def test_rank_answers_prefers_kg_labels_named_in_the_answer() -> None:
    candidates = ["Once Were Warriors", "Tracker", "River Queen"]
    assert rank_answers("river queen", candidates) == ("River Queen", ["River Queen", "Once Were Warriors", "Tracker"])
    assert rank_answers("Tracker and Once Were Warriors", candidates)[1][:2] == ["Tracker", "Once Were Warriors"]
    assert rank_answers("Heat", candidates) == ("Heat", ["Heat", *candidates])
    assert rank_answers("", candidates)[0] == "Once Were Warriors"
    assert rank_answers("Temuera Morrison", candidates, ["Temuera Morrison"])[1][-1] == "Temuera Morrison"
    assert rank_answers("", []) == ("", [])


def test_majority_ties_keep_first_seen() -> None:
    assert majority(["b", "a", "A", "b", ""]) == [("b", 2), ("a", 2)]


def test_labels_hide_ids_and_mark_reverse_relations() -> None:
    class FakeKG:
        def label(self, node: str) -> str:
            return {"http://x/e1": "Heat"}.get(node, node.rsplit("/", 1)[-1])

        def relation_label(self, relation: str) -> str:
            return "directed by"

    kg: Any = FakeKG()
    assert entity_text(kg, "http://x/e1") == "Heat"
    assert entity_text(kg, "http://rdf.freebase.com/ns/m.0abc12") == UNNAMED
    assert entity_text(kg, "http://www.wikidata.org/entity/Q42") == UNNAMED
    assert relation_text(kg, Relation("r", "out")) == "directed by"
    assert relation_text(kg, Relation("r", "in")) == "directed by (reverse)"
    grouped = unique_texts(["a", "b", "c", "d"], ["Heat", "Heat", UNNAMED, UNNAMED])
    assert grouped == {"Heat": ["a", "b"], f"{UNNAMED} #1": ["c"], f"{UNNAMED} #2": ["d"]}
