"""`hydra` with a real small model (smollm2-135m) on the real MetaQA KB (built once per session
in a temp folder): a 2-hop question answered in the initial phase, from the KG paths, within
the token economy's call budget. The 135M model is weak; this question is one it answers when
the method works (analysis -> 2-hop path search -> pruning -> selection -> {Yes}), so a break
anywhere on that way fails the test."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.llm.open import open_llm
from engine.questions.record import Question
from engine.runs.answer import answer_question
from engine.runs.context import open_context

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m"


def two_hop_question(shared_data: Path) -> Question:
    lines = (shared_data / "metaqa" / "questions" / "2-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
    line = next(x for x in lines if x.startswith("the films directed by [José Alvarenga Jr.] were in which languages"))
    question, answers = line.split("\t")
    return Question("metaqa-2hop-alvarenga", question, answers.split("|"))


def test_real_hydra_answers_a_two_hop_question_in_the_initial_phase(metaqa_index: Path, shared_data: Path) -> None:
    question = two_hop_question(shared_data)
    ctx = open_context(metaqa_index, open_llm(MODEL))
    try:
        record = answer_question("hydra", question, ctx)
    finally:
        ctx.close()
    assert record.error is None, record.extra.get("traceback")
    extra = record.extra
    print(extra["skyline"], extra["d_predict"], [c["stage"] for c in record.llm_calls], record.prediction)
    assert extra["available_sources"] == ["kg"]  # a KG-only index: no documents
    step = extra["trace"][0]
    # the gold language is two hops away: in the subgraph, on the BFS paths, kept by both pruning steps
    assert extra["subgraph"]["gold"] == ["Portuguese"]
    assert step["bfs"][0]["depth"] == extra["d_predict"] == 2
    assert step["bfs"][0]["gold"] == step["relevance"]["gold"] == step["cross"]["gold"] == ["Portuguese"]
    assert extra["phase"] == "initial"
    assert [c["stage"] for c in record.llm_calls] == ["analysis", "selection", "answer"]
    assert sum(c["prompt_tokens"] for c in record.llm_calls) <= 2000
    assert record.prediction == "Portuguese" and record.answer_source == "kg" and extra["support"] == "KG"
    assert record.correct["hits1"]
    kg_paths = [p for p in record.paths if p.source == "kg"]
    assert any(t[2] == "Portuguese" for p in kg_paths for t in p.triples)
