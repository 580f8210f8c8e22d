"""ToG / ToG-R control flow on the real PathQuestion and MetaQA KBs, with a scripted LLM.

A scripted LLM proves only the control flow (beam width, early stop, fallback, schemas,
error handling); tests/test_methods_real.py runs every method with a real model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from engine.access.oxigraph_kg import OxigraphKG
from engine.access.relations import RelationTable
from engine.llm.scripted import ScriptedLLM, ScriptedRequest
from engine.methods.context import Context
from engine.methods.registry import default_config
from engine.methods.shared.labels import entity_text, relation_text
from engine.questions.record import AnswerRecord, Question
from engine.runs.answer import answer_question as run_question
from engine.runs.context import open_context
from index.build import build_index
from index.entities import EntityTable
from index.kg_stage import KgSource
from index.paths import IndexPaths
from ingest.base.errors import ModelError

PQ_QUESTION = Question("pq1", "the place of birth of sylvia_brett 's other half 's father ?",
                       ["burnham-on-sea"], ["sylvia_brett"])


@pytest.fixture(scope="module")
def pq_index(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pq") / "pq3"
    build_index(out, [KgSource(shared_data / "pathquestion" / "3H-kb.txt", "tsv")], [])
    return out


def _context(index: Path, llm: Any) -> Context:
    return open_context(index, llm)


def _entity(index: Path, name: str) -> str:
    found = EntityTable.open(IndexPaths(index)).resolve(name)
    assert found is not None, name
    return found


def _enum(req: ScriptedRequest, key: str) -> list[str]:
    assert req.schema is not None
    return list(req.schema["properties"][key]["items"]["enum"])


def script(sufficient: Callable[[ScriptedRequest], bool] | bool = True,
           answer: str = "burnham-on-sea", prefer: tuple[str, ...] = ()) -> Callable[[ScriptedRequest], Any]:
    """Prune: the preferred candidates first, then the enum's order; reasoning as told."""

    def reply(req: ScriptedRequest) -> Any:
        if req.stage in ("relation_prune", "entity_prune"):
            key = "relations" if req.stage == "relation_prune" else "entities"
            enum = _enum(req, key)
            n = req.schema["properties"][key]["minItems"]  # type: ignore[index]
            ordered = [c for c in prefer if c in enum] + [c for c in enum if c not in prefer]
            return {key: ordered[:n]}
        if req.stage == "reasoning":
            ok = sufficient(req) if callable(sufficient) else sufficient
            return {"sufficient": ok, "answer": answer if ok else ""}
        if req.stage == "answer_llm":
            return {"answer": "somewhere"}
        raise AssertionError(f"unexpected stage {req.stage}")

    return reply


def _assert_paths_in_kg(record: AnswerRecord, kg: OxigraphKG) -> None:
    for path in record.paths:
        assert path.source == "kg" and len(path.triple_ids) == len(path.triples) >= 1
        for (head, relation, tail), labels in zip(path.triple_ids, path.triples, strict=True):
            assert tail in kg.tails(head, relation, "out"), (head, relation, tail)
            assert labels == [kg.label(head), kg.relation_label(relation), kg.label(tail)]


# ------------------------------------------------------------------------------------------


def test_tog_stops_when_sufficient_with_paths_from_the_kg(pq_index: Path) -> None:
    llm = ScriptedLLM(script(prefer=("spouse",)))
    ctx = _context(pq_index, llm)
    # the paper's rule: the model's "sufficient" is taken as it is, grounded or not
    record = run_question("tog", PQ_QUESTION, ctx, {"require_grounded_answer": False})
    assert record.error is None and record.answer_source == "kg"
    assert record.extra["stopped"] == "sufficient" and record.extra["depth"] == 1
    assert [r.stage for r in llm.requests] == ["relation_prune", "reasoning"]
    assert record.prediction == "burnham-on-sea"  # the model's answer (not among the paths)
    assert record.topic_entities[0]["label"] == "sylvia_brett"
    assert 1 <= len(record.paths) <= 3
    _assert_paths_in_kg(record, ctx.kg)  # type: ignore[arg-type]
    assert [c["stage"] for c in record.llm_calls] == ["relation_prune", "reasoning"]
    assert record.extra["llm_summary"]["calls"] == 2 and record.seconds > 0
    assert record.config_hash and "relation_prune" in record.stage_seconds


def test_relation_enum_is_exactly_the_entity_relations(pq_index: Path) -> None:
    llm = ScriptedLLM(script())
    ctx = _context(pq_index, llm)
    run_question("tog", PQ_QUESTION, ctx)
    topic = _entity(pq_index, "sylvia_brett")
    assert topic is not None
    expected = {relation_text(ctx.kg, r) for r in ctx.kg.relations_of(topic)}
    first = llm.requests[0]
    assert first.stage == "relation_prune" and set(_enum(first, "relations")) == expected
    assert "sylvia_brett" in first.messages[-1]["content"]
    assert not any("://" in m["content"] for r in llm.requests for m in r.messages)  # no IRIs


FAMILY = ("spouse", "parents", "children", "parents (reverse)", "children (reverse)")


def test_tog_beam_width_and_fallback_after_max_depth(pq_index: Path) -> None:
    llm = ScriptedLLM(script(sufficient=False, prefer=FAMILY))
    ctx = _context(pq_index, llm)
    record = run_question("tog", PQ_QUESTION, ctx, {"width": 2, "depth": 3})
    assert record.error is None
    assert record.answer_source == "llm" and record.extra["stopped"] == "max_depth"
    assert record.prediction == "somewhere"
    trace = record.extra["trace"]
    assert [t["depth"] for t in trace] == [1, 2, 3]
    for step in trace:
        assert len(step["relations"]) <= 2 and len(step["entities"]) <= 2
        assert step["sufficient"] is False
    stages = [r.stage for r in llm.requests]
    assert stages.count("reasoning") == 3 and stages[-1] == "answer_llm"
    for req in llm.requests:
        if req.stage in ("relation_prune", "entity_prune"):
            key = "relations" if req.stage == "relation_prune" else "entities"
            assert req.schema["properties"][key]["maxItems"] <= 2  # type: ignore[index]
            assert req.temperature == 0.4
        else:
            assert req.temperature == 0.0
    assert 1 <= len(record.paths) <= 2 and all(len(p.triples) == 3 for p in record.paths)
    _assert_paths_in_kg(record, ctx.kg)  # type: ignore[arg-type]


def test_entity_enum_holds_only_real_tails(pq_index: Path) -> None:
    llm = ScriptedLLM(script(sufficient=False, prefer=FAMILY))
    ctx = _context(pq_index, llm)
    question = Question("pq3", "which people of united_kingdom have a spouse ?", [], ["united_kingdom"])
    run_question("tog", question, ctx, {"width": 2, "depth": 3})
    relations = RelationTable.open(IndexPaths(pq_index))
    checked = 0
    for req in llm.requests:
        if req.stage != "entity_prune":
            continue
        fact = re.search(r"Fact: \((.*)\)", req.messages[-1]["content"])
        assert fact is not None
        left, relation, right = fact.group(1).split(", ")
        direction = "out" if right == "?" else "in"
        head = _entity(pq_index, left if direction == "out" else right)
        rel = relations.resolve(relation)
        assert head is not None and rel is not None
        tails = {entity_text(ctx.kg, t) for t in ctx.kg.tails(head, rel, direction)}  # type: ignore[arg-type]
        assert set(_enum(req, "entities")) <= tails
        checked += 1
    stages = [r.stage for r in llm.requests]
    assert checked == stages.count("entity_prune") > 0


def test_no_call_when_there_is_nothing_to_choose(metaqa_index: Path) -> None:
    # Temuera Morrison: one relation (starred actors, reverse) and three films: W=3 keeps all
    llm = ScriptedLLM(script(answer="Tracker"))
    ctx = _context(metaqa_index, llm)
    question = Question("m1", "what movies did [Temuera Morrison] act in",
                        ["Once Were Warriors", "Tracker", "River Queen"])
    record = run_question("tog", question, ctx)
    assert [r.stage for r in llm.requests] == ["reasoning"]
    assert "starred actors" in llm.requests[0].messages[-1]["content"]
    assert record.prediction == "Tracker" and record.answer_source == "kg"
    assert set(record.predictions) == {"Once Were Warriors", "Tracker", "River Queen"}
    assert len(record.paths) == 3
    _assert_paths_in_kg(record, ctx.kg)  # type: ignore[arg-type]


def test_answer_naming_the_topic_entity_ranks_kg_candidates_first(metaqa_index: Path) -> None:
    llm = ScriptedLLM(script(answer="Temuera Morrison"))
    ctx = _context(metaqa_index, llm)
    record = run_question("tog", Question("m1", "what movies did [Temuera Morrison] act in"), ctx,
                          {"require_grounded_answer": False})
    assert record.prediction in {"Once Were Warriors", "Tracker", "River Queen"}
    assert record.predictions[-1] == "Temuera Morrison"


def test_an_ungrounded_sufficient_goes_deeper(pq_index: Path) -> None:
    """By default a "sufficient" whose answer is no entity the paths reached is not believed."""
    llm = ScriptedLLM(script(prefer=("spouse",), answer="atlantis"))  # always "sufficient"
    record = run_question("tog", PQ_QUESTION, _context(pq_index, llm))
    trace = record.extra["trace"]
    assert record.extra["stopped"] in ("max_depth", "dead_end") and len(trace) >= 2
    assert all(step.get("ungrounded_answer") == "atlantis" for step in trace if "sufficient" in step)
    assert record.answer_source == "llm" and record.prediction == "somewhere"
    assert [c["stage"] for c in record.llm_calls][-1] == "answer_llm"


def test_a_grounded_sufficient_stops(pq_index: Path) -> None:
    def grounded(req: ScriptedRequest) -> Any:
        if req.stage == "reasoning":  # answer with the first entity the triples reached
            first = req.messages[-1]["content"].split("\n")[1]
            return {"sufficient": True, "answer": first.strip("()").split(", ")[-1]}
        return script(prefer=("spouse",))(req)

    record = run_question("tog", PQ_QUESTION, _context(pq_index, ScriptedLLM(grounded)))
    assert record.extra["stopped"] == "sufficient" and record.extra["depth"] == 1
    assert record.answer_source == "kg" and record.prediction == record.extra["answer_text"]
    assert "ungrounded_answer" not in record.extra["trace"][0]


def test_tog_r_reasons_over_chains_and_prunes_at_random_deterministically(pq_index: Path) -> None:
    def run() -> tuple[AnswerRecord, ScriptedLLM]:
        llm = ScriptedLLM(script(sufficient=lambda req: "->" in req.messages[-1]["content"]
                                 and req.messages[-1]["content"].count(" -> ") >= 3))
        return run_question("tog-r", PQ_QUESTION, _context(pq_index, llm)), llm

    first, llm = run()
    second, _ = run()
    assert first.to_dict()["paths"] == second.to_dict()["paths"]
    assert first.extra["trace"] == second.extra["trace"]
    stages = [r.stage for r in llm.requests]
    assert "entity_prune" not in stages  # ToG-R: random prune, no LLM
    reasoning = [r for r in llm.requests if r.stage == "reasoning"]
    assert "Chains:" in reasoning[0].messages[-1]["content"]
    assert first.answer_source in ("kg", "llm")
    for step in first.extra["trace"][:-1]:
        assert len(step["relations"]) <= 3


def test_tog_r_falls_back_after_max_depth(pq_index: Path) -> None:
    llm = ScriptedLLM(script(sufficient=False, prefer=FAMILY))
    record = run_question("tog-r", PQ_QUESTION, _context(pq_index, llm), {"depth": 2})
    assert record.answer_source == "llm" and record.extra["stopped"] == "max_depth"
    assert [r.stage for r in llm.requests].count("reasoning") == 2
    assert record.paths and all(len(p.triples) == 2 for p in record.paths)


@pytest.mark.parametrize("tool", ["bm25", "embedding"])
def test_small_model_prune_tools_make_no_prune_calls(pq_index: Path, tool: str) -> None:
    llm = ScriptedLLM(script(sufficient=False))
    record = run_question("tog", PQ_QUESTION, _context(pq_index, llm), {"prune_tool": tool, "depth": 2})
    assert record.error is None
    assert {r.stage for r in llm.requests} == {"reasoning", "answer_llm"}
    assert len(record.extra["trace"][0]["relations"]) == 3
    assert "relation_prune" in record.stage_seconds  # the tool's time is still accounted


def test_bm25_prune_prefers_the_relation_the_question_names(pq_index: Path) -> None:
    llm = ScriptedLLM(script())
    question = Question("pq2", "what is the profession of sylvia_brett ?", [], ["sylvia_brett"])
    record = run_question("tog", question, _context(pq_index, llm), {"prune_tool": "bm25", "width": 1})
    assert record.extra["trace"][0]["relations"] == [["sylvia_brett", "profession"]]


def test_invalid_replies_are_recorded_not_raised(pq_index: Path) -> None:
    llm = ScriptedLLM(lambda req: "this is not JSON")
    record = run_question("tog", PQ_QUESTION, _context(pq_index, llm), {"depth": 2})
    assert record.error is not None and "final answer" in record.error
    assert record.extra["call_errors"] and all(c["error"] for c in record.llm_calls)
    assert len(record.extra["trace"]) == 2
    # no answer text: the best entity the paths reach stands in, marked as coming from the KG
    assert record.answer_source == "kg" and record.prediction == record.predictions[0]


def test_kg_failure_is_a_question_level_error(pq_index: Path) -> None:
    class BrokenKG(OxigraphKG):
        def relations_of(self, entity: str, direction: Any = "both") -> Any:
            raise RuntimeError("store went away")

    ctx = _context(pq_index, ScriptedLLM(script()))
    ctx.kg = BrokenKG(ctx.kg.store)  # type: ignore[attr-defined]
    record = run_question("tog", PQ_QUESTION, ctx)
    assert record.error == "RuntimeError: store went away"
    assert record.config_hash and record.method == "tog"


def test_a_model_that_cannot_answer_at_all_raises(pq_index: Path) -> None:
    with pytest.raises(ModelError):
        run_question("tog", PQ_QUESTION, _context(pq_index, ScriptedLLM([])))


def test_no_topic_entity_answers_from_the_model(pq_index: Path) -> None:
    llm = ScriptedLLM(script())
    record = run_question("tog", Question("x", "what is the meaning of it all ?", [], ["no_such_entity_xyz"]),
                          _context(pq_index, llm))
    assert record.extra["stopped"] == "no_topic_entity"
    assert record.answer_source == "llm" and [r.stage for r in llm.requests] == ["answer_llm"]


def test_defaults_follow_the_paper() -> None:
    config = default_config("tog")
    assert (config["width"], config["depth"], config["prune_tool"]) == (3, 3, "llm")
    assert (config["temperature_exploration"], config["temperature_reasoning"]) == (0.4, 0.0)
    assert default_config("tog-r") == config


def _shown_relations(req: ScriptedRequest) -> list[str]:
    return req.messages[-1]["content"].split("Relations:\n")[1].split("\nQuestion:")[0].splitlines()


def test_prune_order_kg_by_default_similarity_on_request(pq_index: Path) -> None:
    """The llm prune lists candidates in the KG's order (the paper's setting); with
    prune_order=similarity the most similar to the question come first (a small model tends to
    copy the top of a list); past the cap the most similar are kept either way."""
    import numpy as np

    from engine.methods.shared.common import question_text

    plain = ScriptedLLM(script())
    kg_ctx = _context(pq_index, plain)
    run_question("tog", PQ_QUESTION, kg_ctx, {"depth": 1})
    topic = _entity(pq_index, "sylvia_brett")
    assert topic is not None
    in_kg_order = list(dict.fromkeys(relation_text(kg_ctx.kg, r) for r in kg_ctx.kg.relations_of(topic)))
    assert _shown_relations(plain.requests[0]) == in_kg_order

    llm = ScriptedLLM(script())
    ctx = _context(pq_index, llm)
    run_question("tog", PQ_QUESTION, ctx, {"depth": 1, "prune_order": "similarity"})
    shown = _shown_relations(llm.requests[0])
    vectors = np.asarray(ctx.embedder.encode([question_text(PQ_QUESTION)] + [s.replace("_", " ") for s in shown]))
    sims = vectors[1:] @ vectors[0]
    assert all(a >= b - 1e-6 for a, b in pairwise(sims)), list(zip(shown, sims, strict=True))
    assert set(shown) == set(in_kg_order) and shown != in_kg_order

    capped = ScriptedLLM(script())
    run_question("tog", PQ_QUESTION, _context(pq_index, capped), {"depth": 1, "max_relations": 2})
    kept = _shown_relations(capped.requests[0])
    best_two = {shown[0], shown[1]}
    assert set(kept) == best_two and kept == [r for r in in_kg_order if r in best_two]
    with pytest.raises(ValueError, match="prune_order"):
        run_question("tog", PQ_QUESTION, kg_ctx, {"prune_order": "random"})


def test_follow_back_offers_the_way_back_when_it_leads_somewhere_new(metaqa_index: Path) -> None:
    """Film -> starred actors -> actor: with follow_back, "starred actors (reverse)" reaches the
    actor's other films (MetaQA's 3-hop chains); a relation that only leads back is not offered."""
    from engine.access.graph import GraphPath, Hop
    from engine.methods.tog.method import _Run

    ctx = _context(metaqa_index, ScriptedLLM(script()))
    film, actor = _entity(metaqa_index, "Once Were Warriors"), _entity(metaqa_index, "Temuera Morrison")
    assert film is not None and actor is not None
    starred = next(r for r in ctx.kg.relations_of(film, "out") if ctx.kg.relation_label(r.id) == "starred actors")
    question = Question("q", "what films share actors with [Once Were Warriors]")
    path = GraphPath(film, (Hop(film, starred.id, "out", actor),))
    paper = _Run(question, ctx, default_config("tog"), "tog")  # ToG's rule: never the way back
    assert not any(r.id == starred.id for r in paper.candidate_relations(path))
    run = _Run(question, ctx, {**default_config("tog"), "follow_back": True}, "tog")
    offered = run.candidate_relations(path)
    assert any(r.id == starred.id and r.direction == "in" for r in offered)
    other_films = ctx.kg.tails(actor, starred.id, "in")
    assert film in other_films and len(other_films) > 1

    # Rena Owen's only film is this one: the way back from her leads nowhere new
    lone = _entity(metaqa_index, "Rena Owen")
    assert lone is not None and ctx.kg.tails(lone, starred.id, "in") == [film]
    dead = GraphPath(film, (Hop(film, starred.id, "out", lone),))
    assert not any(r.id == starred.id and r.direction == "in" for r in run.candidate_relations(dead))
