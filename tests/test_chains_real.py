"""`chains` with the real default model (qwen2.5-coder-0.5b) on real data: a 3-hop MetaQA question
over the full MetaQA KB, and a demo question whose answer is only in a document of an entity the
chain reaches (`kg+doc`). Either breaks if the chain enumeration, the scorer, the choice, the
graph's execution, the windows or the constrained answer stops working."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.llm.open import open_llm
from engine.questions.record import Question
from engine.runs.answer import answer_question
from engine.runs.context import open_context

pytestmark = pytest.mark.slow

MODEL = "qwen2.5-coder-0.5b"


def _metaqa_question(shared_data: Path, hops: int, prefix: str) -> Question:
    path = shared_data / "metaqa" / "questions" / f"{hops}-hop" / "qa_dev.txt"
    line = next(x for x in path.read_text(encoding="utf-8").splitlines() if x.startswith(prefix))
    question, answers = line.split("\t")
    return Question(f"metaqa-{hops}hop", question, answers.split("|"))


def _answer(index: Path, question: Question) -> object:
    ctx = open_context(index, open_llm(MODEL))
    try:
        return answer_question("chains", question, ctx)
    finally:
        ctx.close()


def test_real_chains_answers_a_three_hop_metaqa_question(metaqa_index: Path, shared_data: Path) -> None:
    question = _metaqa_question(shared_data, 3, THREE_HOP)
    record = _answer(metaqa_index, question)
    assert record.error is None, record.extra.get("traceback")
    print(record.extra["chains_shown"], record.extra["choice"], record.prediction)
    assert [c["stage"] for c in record.llm_calls] in (["choose", "answer"], ["answer"])
    assert sum(c["prompt_tokens"] for c in record.llm_calls) <= 800 + 400  # + the cached system prompts
    chosen = record.paths[0]
    assert chosen.source == "kg" and len(chosen.relation_ids) == 3
    assert record.correct["hits1"], (record.prediction, question.answers)


def test_real_chains_answers_from_a_reached_entitys_document(demo_index: Path) -> None:
    question = Question("demo-047", "Who is the chief executive of the bank that Norvale Motors is a customer of?",
                        ["Philippa Crane"], topic_entities=["Norvale Motors"])
    record = _answer(demo_index, question)
    assert record.error is None, record.extra.get("traceback")
    print(record.extra["chains_shown"], record.extra["choice"], record.extra["candidates"], record.prediction)
    assert len(record.llm_calls) <= 3
    windows = [p for p in record.paths if p.source != "kg"]
    assert any("Philippa Crane" in s for p in windows for s in p.sentences)  # the bank's report, not Norvale's
    assert record.prediction == "Philippa Crane" and record.answer_source in ("doc", "both")


THREE_HOP = "who are the actors in the movies written by the writer of [The Station Agent]"
