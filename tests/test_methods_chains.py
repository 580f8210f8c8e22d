"""`chains` (ours: plan once, the graph executes, read once): chain enumeration and scoring on
hand-made graphs, and every branch of the method's control flow with a scripted LLM over the
real demo index (real KG, real documents, the index's real embedding model).

A scripted LLM proves only the control flow; tests/test_chains_real.py runs the method with a
real language model on MetaQA and on the demo.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from engine.access.graph import Subgraph, subgraph_within
from engine.llm.scripted import ScriptedLLM, ScriptedRequest
from engine.methods.chains.prompts import NOT_FOUND
from engine.methods.registry import resolve_config
from engine.methods.shared.answer_spans import (
    allowed_answers,
    alternatives,
    bare_count,
    date_asked,
    date_at_grain,
    is_yes_no,
    spans_of,
    stated_form,
)
from engine.methods.shared.chain_plans import Chain, distinct_best, enumerate_chains, joined_chains
from engine.methods.shared.chain_scoring import ChainScorer
from engine.questions.record import AnswerRecord, Question
from engine.runs.answer import answer_question
from engine.runs.context import open_context
from ingest.terms import mint_relation

# ---- hand-made graphs ---------------------------------------------------------------------------


def _sub(edges: list[tuple[str, str, str]], topics: list[str]) -> Subgraph:
    graph = nx.MultiDiGraph()
    for s, p, o in edges:
        graph.add_edge(s, o, key=p)
    return Subgraph(graph, topics, 3)


# Two films by one writer; the films' directors; an actor in one of them.
FILMS = [
    ("KillBill", "written_by", "Quentin"),
    ("PulpFiction", "written_by", "Quentin"),
    ("JackieBrown", "written_by", "Quentin"),
    ("PulpFiction", "directed_by", "Quentin"),
    ("JackieBrown", "directed_by", "Quentin"),
    ("KillBill", "directed_by", "Quentin"),
    ("TrueRomance", "written_by", "Quentin"),
    ("TrueRomance", "directed_by", "Tony"),
    ("KillBill", "starred", "Uma"),
    ("PulpFiction", "starred", "Uma"),
]


def _steps(chain: Chain) -> list[str]:
    return [f"{r}:{d}" for r, d in chain.steps]


def test_every_chain_up_to_the_depth_both_directions_with_its_entity_sets() -> None:
    sub = _sub(FILMS, ["KillBill"])
    chains = enumerate_chains(sub, "KillBill", 3)
    by_steps = {">".join(_steps(c)): c for c in chains}
    assert by_steps["written_by:out"].ends == ["Quentin"]
    films = by_steps["written_by:out>written_by:in"].ends
    assert sorted(films) == ["JackieBrown", "PulpFiction", "TrueRomance"]  # never the topic itself
    directors = by_steps["written_by:out>written_by:in>directed_by:out"].ends
    assert sorted(directors) == ["Quentin", "Tony"]
    assert by_steps["starred:out>starred:in"].ends == ["PulpFiction"]
    assert all(1 <= len(c.steps) <= 3 for c in chains)
    assert max(len(c.steps) for c in chains) == 3


def test_the_scorer_orders_chains_and_the_beam_bounds_each_level() -> None:
    sub = _sub(FILMS, ["KillBill"])

    def prefer_directed(chains: Any) -> list[float]:
        return [sum(1.0 for r, _ in c.steps if r == "directed_by") - 0.1 * len(c.steps) for c in chains]

    chains = enumerate_chains(sub, "KillBill", 3, scorer=prefer_directed, beam=1)
    assert _steps(chains[0])[0] == "directed_by:out"
    assert [c.score for c in chains] == sorted((c.score for c in chains), reverse=True)
    # beam=1: only the best chain of each level is extended
    level2 = [c for c in chains if len(c.steps) == 2]
    assert {c.steps[0] for c in level2} == {("directed_by", "out")}


def test_a_missing_topic_or_zero_depth_gives_no_chain() -> None:
    sub = _sub(FILMS, ["KillBill"])
    assert enumerate_chains(sub, "Nowhere", 3) == []
    assert enumerate_chains(sub, "KillBill", 0) == []


def test_joined_chains_end_where_two_topics_meet() -> None:
    sub = _sub(FILMS, ["Uma", "Tony"])
    from_uma = enumerate_chains(sub, "Uma", 2)
    from_quentin = enumerate_chains(_sub(FILMS, ["Quentin"]), "Quentin", 1)
    joined = joined_chains(from_uma, from_quentin)
    starred_and_written = [c for c in joined if _steps(c) == ["starred:in"] and c.also is not None
                           and [f"{r}:{d}" for r, d in c.also.steps] == ["written_by:in"]]
    assert starred_and_written and sorted(starred_and_written[0].ends) == ["KillBill", "PulpFiction"]
    text = starred_and_written[0].sentence(lambda x: x, lambda r: r.replace("_", " "))
    assert "both reach" in text and "Uma" in text and "Quentin" in text


def test_distinct_best_keeps_one_chain_per_end_set() -> None:
    sub = _sub(FILMS, ["KillBill"])
    chains = enumerate_chains(sub, "KillBill", 2, scorer=lambda cs: [1.0 / len(c.steps) for c in cs])
    shown = distinct_best(chains, 10)
    ends = [tuple(sorted(c.ends)) for c in shown]
    assert len(ends) == len(set(ends))
    assert ("Quentin",) in ends


def test_a_route_sentence_names_the_sets_and_reverse_steps() -> None:
    sub = _sub(FILMS, ["KillBill"])
    chain = next(c for c in enumerate_chains(sub, "KillBill", 2)
                 if _steps(c) == ["written_by:out", "written_by:in"])
    text = chain.sentence(lambda x: x, lambda r: r.replace("_", " "), max_shown=2)
    assert text.startswith("KillBill -written by-> Quentin -written by (reverse)-> ")
    assert "and 1 more" in text


# ---- answer spans -------------------------------------------------------------------------------


def test_answer_spans_are_names_dates_and_numbers_of_the_text() -> None:
    spans = spans_of("In March 2021 the board appointed Sabine Oduya as chief executive officer. "
                     "Group revenue was EUR 4.2 billion.")
    assert "Sabine Oduya" in spans and "March 2021" in spans and "2021" in spans
    assert any(s.startswith("4.2") for s in spans)
    assert "the" not in [s.lower() for s in spans]


@pytest.mark.parametrize(("sentence", "span"), [
    ("Lukas Verzbicas (born January 6, 1993 in Kaunas, Lithuania) is a triathlete.", "Kaunas, Lithuania"),
    ("The song was covered by Fredric March and Charles Laughton.", "Fredric March"),
    ("The song was covered by Fredric March and Charles Laughton.", "Charles Laughton"),
    ("The town lies about 700 km from Buenos Aires.", "about 700 km"),
    ("Its top speed is 65 mph.", "65 mph"),
    ("The publisher was in business from 1973 to 1996.", "from 1973 to 1996"),
    ("His father was a Canadian comedian.", "Canadian comedian"),
    ("The Park is a massively multiplayer online role-playing video game set in London.",
     "massively multiplayer online role-playing video game"),
    ("It was run by former CIA officer Duane \"Dewy\" Clarridge, who also led it.", 'Duane "Dewy" Clarridge'),
])
def test_spans_keep_the_whole_answer_as_sources_state_it(sentence: str, span: str) -> None:
    assert span in spans_of(sentence)


def test_yes_no_questions_get_yes_and_no() -> None:
    assert is_yes_no("Are Ferrari and Lancia both Italian?")
    assert not is_yes_no("Which company owns Lancia?")
    assert not is_yes_no("can you describe movie Enter the Dragon in a few words")
    allowed = allowed_answers("Were both founded in Turin?", ["Fiat"], ["Fiat was founded in 1899."])
    assert allowed[:3] == ["yes", "no", "Fiat"] and "1899" in allowed


# ---- the method's control flow on the demo (scripted LLM) -------------------------------------

FOUNDER = Question("demo-002", "Who founded Norvale Motors?", ["Oskar Thelling"],
                   topic_entities=["Norvale Motors"])


def _routes(req: ScriptedRequest) -> dict[str, str]:
    return dict(re.findall(r"^(R\d+): (.*)$", req.messages[-1]["content"], re.MULTILINE))


def _run(index: Path, question: Question, reply: Callable[[ScriptedRequest], Any],
         **overrides: Any) -> tuple[AnswerRecord, ScriptedLLM]:
    llm = ScriptedLLM(reply)
    ctx = open_context(index, llm)
    # these scripted runs walk the choice call's branches unless told otherwise (the default,
    # choose=top, makes no choice call: test_choose_top_makes_no_choice_call)
    config = resolve_config("chains", {"choose": "llm", **overrides})
    record = answer_question("chains", question, ctx, config)
    return record, llm


def _choose(word: str, answer: str) -> Callable[[ScriptedRequest], Any]:
    def reply(req: ScriptedRequest) -> Any:
        if req.stage == "choose":
            routes = _routes(req)
            return {"route": next((r for r, t in routes.items() if word in t), "R1")}
        allowed = req.schema["properties"]["answer"]["enum"] if req.schema else []
        return {"answer": answer if answer in allowed else NOT_FOUND}
    return reply


def test_one_choice_then_one_answer_from_the_chosen_chain(demo_index: Path) -> None:
    record, llm = _run(demo_index, FOUNDER, _choose("founded by", "Oskar Thelling"))
    assert record.error is None
    assert [r.stage for r in llm.requests] == ["choose", "answer"]
    assert record.prediction == "Oskar Thelling" and record.answer_source in ("kg", "both")
    shown = record.extra["chains_shown"]
    assert 2 <= len(shown) <= 5 and record.extra["choice"].startswith("R")
    assert any("founded by" in c["text"] for c in shown)
    kg_paths = [p for p in record.paths if p.source == "kg"]
    assert kg_paths and kg_paths[0].triples
    assert "Oskar Thelling" in record.extra["candidates"]
    assert len(llm.requests) <= 3


def test_not_found_is_offered_only_without_a_route(demo_index: Path) -> None:
    record, llm = _run(demo_index, FOUNDER, _choose("founded by", NOT_FOUND))
    assert NOT_FOUND not in llm.requests[-1].schema["properties"]["answer"]["enum"]
    assert not record.abstained and record.prediction  # the invalid reply: the route's best entity


def test_none_then_not_found_is_an_abstention(demo_index: Path) -> None:
    def reply(req: ScriptedRequest) -> Any:
        return {"route": "none"} if req.stage == "choose" else {"answer": NOT_FOUND}

    record, llm = _run(demo_index, FOUNDER, reply)
    assert NOT_FOUND in llm.requests[-1].schema["properties"]["answer"]["enum"]
    assert record.abstained and record.prediction == "" and record.answer_source == "none"
    _, strict = _run(demo_index, FOUNDER, reply, abstain=False)
    assert NOT_FOUND not in strict.requests[-1].schema["properties"]["answer"]["enum"]


def test_none_of_the_routes_leaves_documents_only(demo_index: Path) -> None:
    def reply(req: ScriptedRequest) -> Any:
        if req.stage == "choose":
            return {"route": "none"}
        return {"answer": "Oskar Thelling"}

    record, llm = _run(demo_index, FOUNDER, reply)
    assert record.extra["choice"] == "none"
    assert not [p for p in record.paths if p.source == "kg"]
    assert [r.stage for r in llm.requests] == ["choose", "answer"]
    answer_prompt = llm.requests[-1].messages[-1]["content"]
    assert "Passages:" in answer_prompt and "Facts:" not in answer_prompt


def test_choose_top_makes_no_choice_call(demo_index: Path) -> None:
    assert resolve_config("chains")["choose"] == "top"  # the default
    record, llm = _run(demo_index, FOUNDER, _choose("founded by", "Oskar Thelling"), choose="top")
    assert [r.stage for r in llm.requests] == ["answer"]
    assert record.extra["choice"] == "R1 (no call)"


def test_an_invalid_choice_falls_back_to_the_best_route(demo_index: Path) -> None:
    def reply(req: ScriptedRequest) -> Any:
        if req.stage == "choose":
            return "not json"
        return {"answer": NOT_FOUND}

    record, _ = _run(demo_index, FOUNDER, reply)
    assert record.extra["choice"] == "R1 (reply invalid)"
    assert record.extra.get("call_errors")


def test_no_topic_entity_and_no_document_abstains_without_a_call(demo_index: Path) -> None:
    question = Question("x", "Zzqx vvrn?", ["nothing"])
    record, llm = _run(demo_index, question, _choose("founded", NOT_FOUND), topic_search=0, windows=0)
    assert record.abstained and llm.requests == []


def test_windows_come_from_the_documents_of_the_routes_entities(demo_index: Path) -> None:
    question = Question("d", "Who is the chief executive of the company that supplies Norvale Motors?",
                        ["Severin Oduya"], topic_entities=["Norvale Motors"])
    record, llm = _run(demo_index, question, _choose("supplier of", NOT_FOUND))
    windows = [p for p in record.paths if p.source != "kg"]
    assert 1 <= len(windows) <= 4 and all(p.chunk_ids for p in windows)
    assert "Norvale Motors" not in {t for p in windows for t in p.titles}  # the suppliers' reports
    first_answer = next(r for r in llm.requests if r.stage == "answer")
    assert "Passages:" in first_answer.messages[1]["content"]


def test_choose_answer_reads_the_best_routes_in_one_call(demo_index: Path) -> None:
    record, llm = _run(demo_index, FOUNDER, _choose("founded by", "Oskar Thelling"), choose="answer")
    assert [r.stage for r in llm.requests] == ["answer"]
    facts = llm.requests[0].messages[-1]["content"].split("Facts:")[1]
    assert 2 <= facts.count("\n- ") <= 3  # one line per route read
    assert record.prediction == "Oskar Thelling"
    assert len([p for p in record.paths if p.source == "kg"]) == facts.count("\n- ")


# ---- stage recall (bench/trace_stats) ----------------------------------------------------------


def test_chains_stage_counts_find_where_the_gold_was_lost() -> None:
    from bench.trace_stats import chains_stage_counts

    def record(shown_gold: list[bool], choice: str, cands: bool, right: bool, rank: int | None) -> dict[str, Any]:
        shown = [{"route": f"R{i}", "gold": ["g"] if g else []} for i, g in enumerate(shown_gold, 1)]
        return {"extra": {"chains_shown": shown, "choice": choice, "gold_chain_rank": rank,
                          "gold_in_candidates": ["g"] if cands else [], "gold_in_windows": []},
                "correct": {"hits1": right}, "abstained": False}

    found = chains_stage_counts([
        record([True, False], "R1", True, True, 1),          # right
        record([False, True], "R1", False, False, 2),        # lost at the choice
        record([False, False], "R1 (no call)", True, False, 7),  # lost at the answer
        record([], "none", False, False, None),              # no chain at all
    ])
    counts, lost = found["counts"], found["lost"]
    assert counts["a route shown"] == 2 and counts["the route chosen"] == 1 and counts["the answer"] == 1
    assert lost == {"a route shown": 1, "the allowed answers": 1, "none": 1}
    assert found["ranks"] == {"1": 1, "2-5": 1, "6+": 1, "none": 1}


def test_trace_stats_against_another_run_counts_gains_and_losses() -> None:
    from bench.trace_stats import compare_runs

    def record(qid: str, right: bool, first: str = "") -> dict[str, Any]:
        shown = [{"route": "R1", "relations": first}] if first else []
        return {"id": qid, "correct": {"hits1": right}, "extra": {"chains_shown": shown}}

    now = [record("a", True, "mentions (reverse), then has genre"), record("b", True, "directed by"),
           record("c", False), record("d", True, "mentions (reverse)"), record("e", True)]
    before = [record("a", False), record("b", True), record("c", True), record("d", False), record("e", False)]
    change = compare_runs(now, before)
    assert change["gained"] == ["a", "d", "e"] and change["lost"] == ["c"]
    assert change["first_steps"] == {"mentions (reverse)": 2}  # "e" showed no route


def test_a_question_that_offers_alternatives_asks_which_not_yes_or_no() -> None:
    question = "Are the Sleepers located north or south of the Kancamagus Highway?"
    assert alternatives(question) == ["north", "south"]
    passages = ["The Sleepers lie south of the highway."]
    assert allowed_answers(question, [], passages, choices=True)[:2] == ["north", "south"]
    assert allowed_answers(question, [], passages)[:2] == ["yes", "no"]  # hydra's answer keeps its offer
    assert is_yes_no("Was either Lyon or Nice the capital?") and not alternatives("Was either Lyon or Nice the capital?")


def test_chain_rank_merges_the_parallel_jobs_counts(tmp_path: Path) -> None:
    import json

    from bench.chain_rank import main

    target, part = tmp_path / "chain_rank.json", tmp_path / "part.json"
    target.write_text(json.dumps({"seed 0": {"pq-3h": {"meaning_cover": {"best_first": 35}}}}), encoding="utf-8")
    part.write_text(json.dumps({"seed 0": {"pq-3h": {"inverse_steps=true": {"best_first": 34}}}}), encoding="utf-8")
    assert main(["--merge", str(target), str(part)]) == 0
    assert json.loads(target.read_text(encoding="utf-8")) == {
        "seed 0": {"pq-3h": {"meaning_cover": {"best_first": 35}, "inverse_steps=true": {"best_first": 34}}}}
    assert not part.exists()


@pytest.mark.parametrize(("question", "span", "offered"), [
    ("How many employees did X have?", "16,400 employees", "16,400"),  # the question names the unit
    ("how many km long is the river", "517 km", "517"),
    ("How many inhabitants does X have?", "9,984 inhabitant", "9,984"),
    ("How many employees did X have?", "2,980 million", "2,980 million"),  # another unit
    ("How far is X from Y?", "700 km", "700 km"),  # counts nothing
    ("How many employees did X have?", "Orvask Mining Combine", "Orvask Mining Combine"),
])
def test_a_count_is_offered_without_the_unit_the_question_names(question: str, span: str, offered: str) -> None:
    assert bare_count(question, span) == offered


def test_bare_counts_replace_the_span_with_its_number() -> None:
    passage = ["Headcount reached 16,400 employees by the end of the year."]
    question = "How many employees did the parent company of X have?"
    assert "16,400" in allowed_answers(question, [], passage, counts=True)
    assert "16,400 employees" not in allowed_answers(question, [], passage, counts=True)
    assert "16,400 employees" in allowed_answers(question, [], passage)  # hydra's answer and the option off


@pytest.mark.parametrize(("question", "asked"), [
    ("When was the female co-founder born?", "date"),
    ("In what year was the film released?", "year"),
    ("Australian Associated Press was established by a journalist born in which year?", "year"),
    ("Where were the Olympics held when the skater won?", None),  # "when" is not its first question word
    ("Who founded Unity?", None),
])
def test_a_question_asks_for_a_date_or_a_year(question: str, asked: str | None) -> None:
    assert date_asked(question) == asked


@pytest.mark.parametrize(("question", "answer", "given"), [
    ("When was the co-founder of Unity born?", "1845", "August 6, 1845"),  # the date the passage states
    ("When was the co-founder of Unity born?", "August 6", "August 6, 1845"),
    ("When was the publisher in business?", "1889", "from 1889 to 1990"),  # a period
    ("When was the co-founder of Unity born?", "Unity", "Unity"),  # not a date
    ("When was the town renamed?", "1927", "1927"),  # no passage states a date holding it
    ("In what year was the co-founder of Unity born?", "August 6, 1845", "1845"),
    ("Who co-founded Unity?", "1845", "1845"),  # no date asked
])
def test_a_date_answer_is_given_at_the_grain_the_question_asks_for(question: str, answer: str, given: str) -> None:
    passages = ["It was renamed in 1927.",
                "Mary Page Fillmore (August 6, 1845 - October 6, 1931) co-founded Unity, in business from 1889 to 1990."]
    assert date_at_grain(question, answer, passages) == given


@pytest.mark.parametrize(("question", "answer", "given"), [
    ("What number largest airline in the United States is Hawaiian?", "8", "8th"),  # stated only as an ordinal
    ("How long is the Inn?", "517", "517 km"),  # stated only with its measure
    ("The Inn is a river that is how many km long?", "517", "517"),  # the question names the unit
    ("What share of revenue?", "34", "34 percent"),
    ("How old was she in 1888?", "43", "43"),  # "43 years": a duration, left as said
    ("When was the airline founded?", "1929", "1929"),  # also stated bare
    ("Who founded the airline?", "Stanley Kennedy", "Stanley Kennedy"),  # no number
])
def test_a_bare_number_is_given_as_the_evidence_states_it(question: str, answer: str, given: str) -> None:
    passages = ["Hawaiian Airlines is the 8th largest commercial airline in the United States; it was founded in 1929.",
                "The Inn is 517 km long. She was 43 years old in 1888.", "It brought in about 34 percent of revenue."]
    assert stated_form(question, answer, passages) == given


def test_what_a_thing_is_the_is_offered_with_definite() -> None:
    passage = "The flagship product is the Weaver-6 welding arm, which brought in about 52 percent of revenue."
    assert "Weaver-6 welding arm" in spans_of(passage, definite=True)
    assert "Weaver-6 welding arm" not in spans_of(passage)  # the name run stops at "welding"
    assert "Weaver-6" in spans_of(passage, definite=True)
    assert "capital" in spans_of("Torvassa is the capital of Caspenne.", definite=True)  # up to the preposition


def test_a_withheld_span_is_not_offered_but_a_candidate_name_is() -> None:
    passages = ["Jaws directed by Steven Spielberg. Jaws release year 1975."]
    assert allowed_answers("what films did X write", ["Jaws"], passages) == ["Jaws", "Steven Spielberg", "1975"]
    withheld = {"steven spielberg", "jaws"}
    assert allowed_answers("what films did X write", ["Jaws"], passages, withheld=withheld) == ["Jaws", "1975"]


def test_window_spans_that_the_graph_holds_off_the_route_are_withheld(demo_index: Path) -> None:
    """With a chosen route, a window span naming an entity next to the route in the question subgraph
    (not one of its ends) is not offered with `graph_spans=false`: the graph holds it under a relation
    the route did not take. The default offers it; spans the graph does not hold are offered either way."""
    question = Question("demo-009", "Which company did Pellin Rail Freight complete a bulk transaction with?",
                        ["Montesolo Asset Management"], topic_entities=["Pellin Rail Freight"])

    def offered(**overrides: Any) -> tuple[AnswerRecord, list[str]]:
        record, llm = _run(demo_index, question, _choose("bulk", NOT_FOUND), choose="top", **overrides)
        return record, llm.requests[-1].schema["properties"]["answer"]["enum"]

    assert resolve_config("chains")["graph_spans"] is True  # the default offers them
    record, strict = offered(graph_spans=False)
    _, loose = offered()
    kg = open_context(demo_index, ScriptedLLM([])).kg
    graph = {kg.label(n) for n in subgraph_within(kg, [record.topic_entities[0]["id"]], 3).graph}
    withheld = set(loose) - set(strict)
    assert set(strict) <= set(loose) and withheld and withheld <= graph
    assert set(strict) - graph  # what the reports say beyond the graph stays


def test_unasked_spans_withhold_what_the_graph_links_only_through_unnamed_relations(tmp_path: Path) -> None:
    """`unasked_spans` (on by default): "what movies was X the writer of" names `written by` alone (and the kind asked),
    so a window span the graph links to the route only through other relations ("1942", the film's
    release year; its director) is not offered; a co-writer (linked through the named relation), the
    route's end and what the graph does not hold ("Boston") stay. A question with a word that names
    nothing ("war") withholds nothing: that word may ask for a relation the scorer cannot place."""
    index = _tsv_index(tmp_path, "Tennessee Johnson\twritten_by\tAlvin Meyers\nTennessee Johnson\twritten_by\tWells Root\n"
                                 "Tennessee Johnson\trelease_year\t1942\nTennessee Johnson\tdirected_by\tWilliam Dieterle\n"
                                 "Dust Road\tdirected_by\tWilliam Dieterle\nDust Road\trelease_year\t1950\n",
                       '{"id": "d1", "title": "Tennessee Johnson", "text": "Tennessee Johnson directed by William '
                       'Dieterle. Tennessee Johnson release year 1942. Tennessee Johnson written by Wells Root. '
                       'It opened in Boston."}\n')

    def offered(text: str, **overrides: Any) -> list[str]:
        question = Question("q", text, ["Tennessee Johnson"], topic_entities=["Alvin Meyers"])
        record, llm = _run(index, question, _choose("written", "Tennessee Johnson"), choose="top", **overrides)
        assert record.prediction == "Tennessee Johnson"
        return llm.requests[-1].schema["properties"]["answer"]["enum"]

    asked = "what movies was [Alvin Meyers] the writer of"
    assert resolve_config("chains")["unasked_spans"] is True  # the default
    # `past_ends` (also on by default) would withhold the co-writer too: off here, to see this option alone
    loose, strict = offered(asked, unasked_spans=False, past_ends=False), offered(asked, past_ends=False)
    assert {"1942", "William Dieterle", "Wells Root", "Boston"} <= set(loose)
    assert set(loose) - set(strict) == {"1942", "William Dieterle"}
    assert {"Tennessee Johnson", "Wells Root", "Boston"} <= set(strict)
    silent = "what movies did [Alvin Meyers] write during the war"
    assert offered(silent, past_ends=False) == offered(silent, unasked_spans=False, past_ends=False)


def _tsv_index(tmp_path: Path, triples: str, docs: str = "") -> Path:
    """An index of a hand-made TSV graph and, where given, JSONL documents."""
    from index.build import build_index
    from index.doc_options import DocOptions, DocSource
    from index.kg_stage import KgSource

    kb = tmp_path / "kb.tsv"
    kb.write_text(triples, encoding="utf-8")
    sources = []
    if docs:
        (tmp_path / "docs.jsonl").write_text(docs, encoding="utf-8")
        sources = [DocSource(tmp_path / "docs.jsonl", "jsonl", "wiki")]
    out = tmp_path / "index"
    build_index(out, [KgSource(kb, "tsv")], sources, doc_options=DocOptions(entity_vectors=False, faiss_kind="flat"))
    return out


def _half_kb_index(tmp_path: Path) -> Path:
    """A graph that lost a fact (Duel written by Richard Matheson) which a document still states."""
    return _tsv_index(tmp_path, "I Am Legend\twritten_by\tRichard Matheson\nI Am Legend\thas_genre\tHorror\n"
                                "Duel\thas_genre\tThriller\nDuel\tdirected_by\tSteven Spielberg\n"
                                "Jaws\tdirected_by\tSteven Spielberg\n",
                      '{"id": "d1", "title": "Duel", "text": "Duel written by Richard Matheson. Duel is a road film."}\n'
                      '{"id": "d2", "title": "Jaws", "text": "Jaws is a film about a shark."}\n')


def test_doc_steps_reach_what_only_a_document_states(tmp_path: Path) -> None:
    """`doc_steps`: the entities whose documents name the topic join the question subgraph, linked to
    it by a `mentions` step, with their own facts: the genre of the film whose writer only its
    document names is reached (the default). Off, no chain reaches that film."""
    from engine.methods.chains.method import MENTIONED, ChainsRun
    from engine.methods.shared.topics import linked_or_searched

    ctx = open_context(_half_kb_index(tmp_path), ScriptedLLM([]))
    question = Question("q", "the films written by [Richard Matheson] were in which genres", ["Thriller", "Horror"],
                        topic_entities=["Richard Matheson"])

    def planned(**overrides: Any) -> tuple[ChainsRun, list[Chain]]:
        run = ChainsRun(question, ctx, resolve_config("chains", overrides))
        topics = linked_or_searched(question, ctx, run.record, 2, 0, run.label)
        assert [run.label(t) for t in topics] == ["Richard Matheson"]
        return run, run.plan(topics)

    def reached(chains: list[Chain], run: ChainsRun) -> set[str]:
        return {run.label(e) for c in chains for e in c.ends}

    assert resolve_config("chains")["doc_steps"] == 20
    off, shown = planned(doc_steps=0)
    assert "Thriller" not in reached(shown, off) and "doc_linked" not in off.record.extra
    on, shown = planned(doc_steps=5)
    assert "Thriller" in reached(shown, on) and on.record.extra["doc_linked"] == 1
    assert on.sub is not None
    linked = [(on.label(u), on.label(v)) for u, v, key in on.sub.graph.edges(keys=True) if key == MENTIONED]
    assert linked == [("Duel", "Richard Matheson")]  # Jaws's document does not name him
    route = next(c for c in shown if "Thriller" in {on.label(e) for e in c.ends})
    assert route.relation_words(ctx.kg.relation_label).startswith("mentions (reverse)")


def _block_order(llm: ScriptedLLM) -> list[str]:
    first_answer = next(r for r in llm.requests if r.stage == "answer")
    return re.findall(r"^(Passages|Facts):$", first_answer.messages[1]["content"], re.MULTILINE)


def test_evidence_last_named_puts_the_passages_last_where_no_word_names_the_last_step(demo_index: Path) -> None:
    """`evidence_last=named`: "who founded X" names `founded by`, so the graph's facts stay
    nearest the question; "who is the chief executive of X" names no relation of the demo's graph
    (its reports name the chief executive), so the passages go last. With `evidence_last=facts`
    (the default before) the facts go last either way."""
    chief = Question("d", "Who is the chief executive of Norvale Motors?", ["Leontine Marsh"],
                     topic_entities=["Norvale Motors"])
    reply = _choose("founded by", NOT_FOUND)
    founder, founder_llm = _run(demo_index, FOUNDER, reply, choose="top", evidence_last="named")
    assert founder.extra["evidence_last"] == "facts"
    assert _block_order(founder_llm)[-1] == "Facts"
    record, llm = _run(demo_index, chief, reply, choose="top", evidence_last="named")
    assert record.extra["evidence_last"] == "passages"
    assert _block_order(llm) == ["Facts", "Passages"]
    default, default_llm = _run(demo_index, chief, reply, choose="top", evidence_last="facts")
    assert default.extra["evidence_last"] == "facts"
    assert _block_order(default_llm) == ["Passages", "Facts"]  # the same evidence, the facts last


def test_described_sets_keep_the_entity_the_question_describes(demo_index: Path) -> None:
    """`described_sets`: "the aluminium smelter that supplies Norvale Motors": the route's first
    set holds its seven suppliers; the one whose description is the smelter's stays, and the
    route's next steps are walked from it alone, so the facts name one exchange, not every
    supplier's parent's."""
    question = Question("d", "On which stock exchange is the parent company of the aluminium smelter that supplies "
                        "Norvale Motors listed?", ["Lumera Bourse"], topic_entities=["Norvale Motors"])
    reply = _choose("supplier of", "Lumera Bourse")

    def facts(llm: ScriptedLLM) -> str:
        prompt = next(r for r in llm.requests if r.stage == "answer").messages[1]["content"]
        return next(line for line in prompt.splitlines() if "-> listed on:" in line)
    before, before_llm = _run(demo_index, question, reply, choose="top", described_sets=0.0)
    assert "described" not in before.extra
    assert facts(before_llm).count(",") >= 1  # the exchanges of several suppliers' parents
    record, llm = _run(demo_index, question, reply, choose="top", described_sets=0.05)
    assert record.extra["described"] == {"phrase": "aluminium smelter that supplies", "kept": ["Zhennad Aluminium"],
                                         "of": 7}
    assert facts(llm).endswith("listed on: Lumera Bourse")
    assert record.prediction == "Lumera Bourse"


def test_asked_sets_keep_the_ends_the_question_describes(demo_index: Path) -> None:
    """`asked_sets` (on by default): "which mining company supplies X": the route reaches X's two
    suppliers; the one whose description is a miner's stays, so it is the first candidate. Off, or
    where the question names the kind alone ("which company"), both stay."""
    def run(text: str, **overrides: Any) -> tuple[AnswerRecord, list[str]]:
        question = Question("d", text, ["Orvask Lithium"], topic_entities=["Torvassa Cathode Materials"])
        record, llm = _run(demo_index, question, _choose("supplier of (reverse)", NOT_FOUND), **overrides)
        return record, llm.requests[-1].schema["properties"]["answer"]["enum"]

    mining = "Which mining company supplies Torvassa Cathode Materials?"
    assert resolve_config("chains")["asked_sets"] == 0.05
    record, offered = run(mining)
    assert record.extra["asked_ends"] == {"phrase": "mining company", "kept": ["Orvask Lithium"], "of": 2}
    assert offered[0] == "Orvask Lithium" and "Torvassa Recycling Works" not in offered[:2]
    off, offered_off = run(mining, asked_sets=0.0)
    assert "asked_ends" not in off.extra and set(offered_off[:2]) == {"Orvask Lithium", "Torvassa Recycling Works"}
    plain, _ = run("Which company supplies Torvassa Cathode Materials?")
    assert "asked_ends" not in plain.extra
    # every exchange's description says "stock exchange": the modifier chooses nothing
    listed = Question("d", "On which stock exchange is the parent company of the aluminium smelter that supplies "
                      "Norvale Motors listed?", ["Lumera Bourse"], topic_entities=["Norvale Motors"])
    record, _ = _run(demo_index, listed, _choose("supplier of", "Lumera Bourse"), choose="top", described_sets=0.0)
    assert "asked_ends" not in record.extra


def _offered(index: Path, text: str, answer: str, topic: str, said: str, **overrides: Any) -> list[str]:
    """The answer call's enum for a question about `topic` whose route the word `said` names and whose
    scripted reply is `answer` (the prediction, checked)."""
    question = Question("q", text, [answer], topic_entities=[topic])
    record, llm = _run(index, question, _choose(said, answer), choose="top", **overrides)
    assert record.prediction == answer
    return llm.requests[-1].schema["properties"]["answer"]["enum"]


def test_past_ends_withhold_what_lies_one_step_past_the_route(tmp_path: Path) -> None:
    """`past_ends` (on by default): the route to the film X wrote ends there; the film's co-writer
    (a step past it, on no route) is no span a window may offer; the route's end, the topic and
    what the graph does not hold ("Boston") stay. Off, the co-writer is offered."""
    index = _tsv_index(tmp_path, "King Leopold's Ghost\twritten_by\tAdam Hochschild\n"
                                 "King Leopold's Ghost\twritten_by\tPippa Scott\n"
                                 "King Leopold's Ghost\thas_genre\tDocumentary\n",
                       '{"id": "d1", "title": "King Leopold\'s Ghost", "text": "King Leopold\'s Ghost written by '
                       'Pippa Scott. King Leopold\'s Ghost written by Adam Hochschild. It opened in Boston."}\n')

    def offered(**overrides: Any) -> list[str]:
        return _offered(index, "what movies did [Adam Hochschild] write", "King Leopold's Ghost", "Adam Hochschild",
                        "written", **overrides)

    assert resolve_config("chains")["past_ends"] is True
    loose, strict = offered(past_ends=False), offered()
    assert "Pippa Scott" in loose and "Pippa Scott" not in strict
    assert {"King Leopold's Ghost", "Boston"} <= set(strict)


def test_a_description_of_relation_words_alone_keeps_the_route(demo_index: Path) -> None:
    # "the company founded by X": "company" is the phrase's head, "founded" names `founded by`
    question = Question("d", "Who is the chief executive of the company founded by Aldric Brennvald?", ["x"],
                        topic_entities=["Aldric Brennvald"])
    record, _ = _run(demo_index, question, _choose("founded by", NOT_FOUND), choose="top", described_sets=0.05)
    assert "described" not in record.extra


def test_echo_retry_asks_once_more_without_the_question_s_own_words(demo_index: Path) -> None:
    """`echo_retry` (the default): an answer that is words the question says ("Headquartered") is asked
    for once more under an enum without them; a topic entity named beside route ends is not (the
    first end answers, `rank_answers`), and with the option off nothing is asked again."""
    question = Question("echo", "Which company headquartered in Torvassa supplies Norvale Motors?", ["Kestrel Cell Works"])
    offered: list[list[str]] = []

    def reply(req: ScriptedRequest) -> Any:
        enum = req.schema["properties"]["answer"]["enum"] if req.schema else []
        if req.stage == "answer_echo":
            offered.append(enum)
            return {"answer": "Kestrel Cell Works" if "Kestrel Cell Works" in enum else enum[0]}
        return {"answer": "Headquartered"}

    record, llm = _run(demo_index, question, reply, choose="top")
    assert [r.stage for r in llm.requests] == ["answer", "answer_echo"]
    assert record.extra["echo"] == "Headquartered" and "Headquartered" not in offered[0]
    assert record.prediction == "Kestrel Cell Works"
    record, llm = _run(demo_index, question, reply, choose="top", echo_retry=False)
    assert [r.stage for r in llm.requests] == ["answer"] and "echo" not in record.extra
    record, llm = _run(demo_index, FOUNDER, lambda req: {"answer": "Norvale Motors"}, choose="top")
    assert "answer_echo" not in [r.stage for r in llm.requests] and record.prediction == "Oskar Thelling"


def test_inverse_steps_read_a_step_up_as_the_inverse_relation_by_default(tmp_path: Path) -> None:
    """`inverse_steps` (the default): a graph stating both `parents` and `children` for each
    pair has them as each other's inverse, recorded; "the son of X's daughter" then reads a
    reverse `parents` step as `children` going down, and the route down twice ranks first. Off,
    a reverse step of either relation counts as naming "son", and a route that goes down, back
    up to X and down again ranks first."""
    from engine.methods.chains.method import ChainsRun

    family = [("Ada", "Bea"), ("Bea", "Cid"), ("Ada", "Dan"), ("Dan", "Eve"), ("Oma", "Ada"), ("Oma", "Ida")]
    ctx = open_context(_tsv_index(tmp_path, "".join(f"{p}\tchildren\t{c}\n{c}\tparents\t{p}\n" for p, c in family)),
                       ScriptedLLM([]))
    question = Question("q", "who is the son of [Ada] 's daughter", ["Cid"], topic_entities=["Ada"])

    def first_route(**overrides: Any) -> tuple[ChainsRun, Chain]:
        run = ChainsRun(question, ctx, resolve_config("chains", overrides))
        shown = run.plan([ctx.linker.table.find("Ada")[0][0]])
        return run, shown[0]

    assert resolve_config("chains")["inverse_steps"] is True
    on, best = first_route()
    inverses = {ctx.kg.relation_label(a): ctx.kg.relation_label(b) for a, b in on.record.extra["inverse_relations"].items()}
    assert inverses == {"children": "parents", "parents": "children"}
    assert sorted(on.label(e) for e in best.ends) == ["Cid", "Eve"]  # down twice
    off, climbed = first_route(inverse_steps=False)
    assert "inverse_relations" not in off.record.extra
    assert sorted(off.label(e) for e in climbed.ends) == ["Bea", "Dan"]  # down, up to Ada, down again


def test_unnamed_hops_keep_a_question_that_names_no_relation_to_one_step(tmp_path: Path) -> None:
    """`unnamed_hops` (the default): "what films are about X" names no relation of the graph, so
    every step beyond the first costs more, and the route to the films tagged X (one step) ranks
    first. Off, the class noun "films" is as close to `has genre` as to anything, and a second
    step to the films' genres ranks first."""
    from engine.methods.chains.method import ChainsRun

    triples = ("MASH\thas_tags\tkorean war\nMASH\thas_genre\tComedy\nMASH\thas_genre\tWar\n"
               "Toko-Ri\thas_tags\tkorean war\nToko-Ri\thas_genre\tWar\nToko-Ri\tstarred_actors\tWilliam Holden\n")
    ctx = open_context(_tsv_index(tmp_path, triples), ScriptedLLM([]))
    question = Question("q", "what films are about [korean war]", ["MASH", "Toko-Ri"], topic_entities=["korean war"])

    def first_ends(**overrides: Any) -> list[str]:
        run = ChainsRun(question, ctx, resolve_config("chains", overrides))
        shown = run.plan([ctx.linker.table.find("korean war")[0][0]])
        return sorted(run.label(e) for e in shown[0].ends)

    assert resolve_config("chains")["unnamed_hops"] > 0
    assert first_ends() == ["MASH", "Toko-Ri"]
    assert first_ends(unnamed_hops=0.0) != ["MASH", "Toko-Ri"]


def test_co_words_ask_for_the_relation_there_and_back() -> None:
    """`co_words` (on by default): "who co-starred with X" and "who wrote movies together with X" say
    their relation once and ask for it twice (X's films, then their actors or writers), as "the same
    N" does; a question that already names the relation twice ("which directors co-directed movies
    with X") asks for no third step, and a question without "co-" or "together" is read as before."""
    from dataclasses import replace

    from engine.methods.shared.chain_scoring import CHAINS_WEIGHTS, ChainScorer

    relations = ["starred_actors", "directed_by", "written_by"]

    def read(question: str, on: bool) -> tuple[dict[str, int], list[str]]:
        weights = replace(CHAINS_WEIGHTS, co_words=on)
        scorer = ChainScorer("lexical", question, lambda r: r.replace("_", " "), None, weights, relations=relations)
        return dict(scorer.said_times), [words for words, _ in scorer.meaning_words]

    assert resolve_config("chains")["co_words"] is True  # the default
    assert read("who co-starred with X", True) == ({"star": 2}, ["starred", "starred"])
    assert read("who co-starred with X", False) == ({"star": 1}, ["starred"])
    assert read("who wrote movies together with X", True) == ({"writ": 2}, ["wrote", "wrote"])
    assert read("which directors co-directed movies with X", True) == ({"direct": 2}, ["directors", "directed"])
    assert read("who directed X", True) == read("who directed X", False)


def test_repeat_mentions_count_a_kin_noun_said_twice_as_two_mentions() -> None:
    """`repeat_mentions` (on by default): "the child of kid of X 's parent" names `children` twice
    (two steps) and `parents` once; "place of birth" stays one mention of its relation (two
    words of one label). Off, "child of kid" was one mention, as "place of birth" is."""
    from dataclasses import replace

    from engine.methods.shared.chain_scoring import CHAINS_WEIGHTS, ChainScorer

    relations = ["children", "parents", "place_of_birth"]

    def mentions(question: str, on: bool) -> list[str]:
        weights = replace(CHAINS_WEIGHTS, repeat_mentions=on)
        scorer = ChainScorer("lexical", question, lambda r: r.replace("_", " "), None, weights, relations=relations)
        return [words for words, _ in scorer.meaning_words]

    assert resolve_config("chains")["repeat_mentions"] is True  # the default
    assert mentions("what is the child of kid of X 's parent ?", True) == ["child", "kid", "parent"]
    assert mentions("what is the child of kid of X 's parent ?", False) == ["child kid", "parent"]
    assert mentions("what is the place of birth of X 's son ?", True) == ["place birth", "son"]


def test_reverse_words_read_a_reverse_step_as_what_has_the_relation() -> None:
    """`reverse_words` (offered, off by default): the whole-chain cosine reads `written by
    (reverse)` as "things written by it", as `asked_type` reads an end set; a forward step and
    the chain's later steps read as before."""
    from dataclasses import replace

    from engine.methods.shared.chain_scoring import CHAINS_WEIGHTS, ChainScorer

    chain = Chain("Alvin", (("written_by", "in"), ("starred_actors", "out")), [["Alvin"], ["Film"], ["Lionel"]])

    def text(on: bool) -> str:
        scorer = ChainScorer("lexical", "what movies was X the writer of", lambda r: r.replace("_", " "), None,
                             replace(CHAINS_WEIGHTS, reverse_words=on), relations=["written_by", "starred_actors"])
        return scorer._chain_text(chain)

    assert resolve_config("chains")["reverse_words"] is False
    assert text(True) == "things written by it, then starred actors"
    assert text(False) == "written by (reverse), then starred actors"


def test_doc_words_keep_a_route_to_the_step_the_question_names(demo_index: Path) -> None:
    """`doc_words` (offered, off by default): "which company did X complete a bulk transaction
    with" names one relation; its other word, "complete", names none and is a word of X's own
    report ("it has also completed a bulk transaction with ..."), so it excuses no second step and
    the route ends at the company X traded with. So it does with the default `verb_mentions`
    ("complete" comes right before "a bulk transaction": the mention's verb). With both off, a
    longer route ranks first (to X's customer, its own trading partner, then that one's founding
    year)."""
    question = Question("d", "Which company did Kestrel Cell Works complete a bulk transaction with?",
                        ["Skarvik Hydrogen Ventures"], topic_entities=["Kestrel Cell Works"])

    def first_route(**overrides: Any) -> str:
        record, _ = _run(demo_index, question, _choose("", "Skarvik Hydrogen Ventures"), choose="top", **overrides)
        return str(record.extra["chains_shown"][0]["relations"])

    assert resolve_config("chains")["doc_words"] == 0.0
    assert first_route(doc_words=1.0, verb_mentions=False) == "bulk transaction with"
    assert first_route() == "bulk transaction with"
    assert first_route(verb_mentions=False) == "supplier of, then bulk transaction with, then founded year"


def test_a_question_naming_no_relation_reads_the_topics_report_where_its_route_has_none(demo_index: Path) -> None:
    """`unnamed_hops`: "who is the chief executive of X" names no relation of the demo's graph; its
    route (choose=top) reaches a person without a document, so the windows come from X's own
    report, which names the chief executive, and the answer call is offered that name. With
    `unnamed_hops=0` the route goes on to another company, and its report's windows do not hold it."""
    chief = Question("d", "Who is the chief executive of Norvale Motors?", ["Leontine Marsh"],
                     topic_entities=["Norvale Motors"])
    record, _ = _run(demo_index, chief, _choose("", "Leontine Marsh"), choose="top")
    titles = {t for p in record.paths if p.source != "kg" for t in p.titles}
    assert titles == {"Norvale Motors"}
    assert record.prediction == "Leontine Marsh"
    before, _ = _run(demo_index, chief, _choose("", "Leontine Marsh"), choose="top", unnamed_hops=0.0)
    assert "Norvale Motors" not in {t for p in before.paths if p.source != "kg" for t in p.titles}
    assert before.prediction != "Leontine Marsh"


def test_mention_order_reads_the_relations_from_the_entity_out() -> None:
    """`mention_order`: "the nationality of the child of X 's father" nests its relations from X out:
    father, child, nationality (the possessive after X first, then the nouns before it, nearest
    first). A route that takes them in that order answers all three; the same steps in another
    order answer two of them, in order. A noun right before the mention names its kind, not a
    step ("the director of the film X" orders one relation: nothing), and words after the mention
    that no possessive joins are left unordered ("which films did the director of X act in"); a
    relation asked there and back ("who starred together with X") is ordered once, so not at all."""
    from dataclasses import replace

    from engine.methods.shared.chain_plans import Chain
    from engine.methods.shared.chain_scoring import CHAINS_WEIGHTS, ChainScorer

    relations = ["children", "parents", "nationality", "directed_by", "starred_actors"]

    def scorer(question: str, weight: float = 0.3) -> ChainScorer:
        weights = replace(CHAINS_WEIGHTS, mention_order=weight)
        return ChainScorer("lexical", question, lambda r: r.replace("_", " "), None, weights, relations=relations)

    def chain(*steps: str) -> Chain:
        return Chain("X", tuple((s, "out") for s in steps), [["X"], *([["e"]] * len(steps))])

    nested = scorer("what is the nationality of the child of X 's father ?")
    assert [sorted(names) for names in nested.step_order] == [["parents"], ["children"], ["nationality"]]
    assert nested._in_order(chain("parents", "children", "nationality")) == 1.0
    assert nested._in_order(chain("children", "parents", "nationality")) == 2 / 3
    in_order, out_of_order = nested([chain("parents", "children", "nationality"),
                                     chain("children", "parents", "nationality")])
    unweighted = scorer("what is the nationality of the child of X 's father ?", weight=0.0)
    same, also_same = unweighted([chain("parents", "children", "nationality"),
                                  chain("children", "parents", "nationality")])
    assert in_order - out_of_order > same - also_same
    assert unweighted.step_order == []  # off: not read
    assert scorer("who is the director of the film X").step_order == []
    assert scorer("which films did the director of X act in").step_order == []
    # a relation asked there and back ("co-", "together", "the same N") is one mention in one place
    co = ChainScorer("lexical", "who starred together with X", lambda r: r.replace("_", " "), None,
                     replace(CHAINS_WEIGHTS, mention_order=0.3, co_words=True), relations=relations)
    assert len(co.meaning_words) == 2 and co.step_order == []
    assert resolve_config("chains")["mention_order"] == 0.3


def _word_scorer(question: str, relations: list[str], **weights: Any) -> ChainScorer:
    """A lexical chain scorer with the `chains` weights, `unasked_last` 0.5 and `weights` (the word-term tests)."""
    from dataclasses import replace

    from engine.methods.shared.chain_scoring import CHAINS_WEIGHTS

    return ChainScorer("lexical", question, lambda r: r.replace("_", " "), None,
                       replace(CHAINS_WEIGHTS, unasked_last=0.5, **weights), relations=relations)


def _out_chain(*steps: str) -> Chain:
    """A chain from X out along `steps`, one entity a set."""
    return Chain("X", tuple((s, "out") for s in steps), [["X"], *([["e"]] * len(steps))])


def _placed_words_cost_a_step_more(option: str, relations: list[str], question: str, silent_off: list[str],
                                   short: list[str], longer: list[str]) -> None:
    """With `option` on every word of `question` is placed (off: `silent_off` are not), so the route
    a step longer than `short` costs `unasked_last` and ranks further below it than with the option off."""
    on, off = _word_scorer(question, relations, **{option: True}), _word_scorer(question, relations, **{option: False})
    assert on.silent_words == [] and off.silent_words == silent_off
    assert on.names_each_word and not off.names_each_word
    assert on._unasked_last(_out_chain(*longer)) == 1.0 and off._unasked_last(_out_chain(*longer)) == 0.0
    (one, two), (one_off, two_off) = (scorer([_out_chain(*short), _out_chain(*longer)]) for scorer in (on, off))
    assert one > two and one - two > one_off - two_off


def test_verb_mentions_a_verb_before_an_article_and_a_mention_names_no_other_relation() -> None:
    """`verb_mentions`: in "which company did X complete a bulk transaction with" the word "complete"
    comes right before an article and the mention "bulk transaction": it is that mention's verb, not a
    word that may stand for a relation the scorer cannot place, so every word is accounted for and a
    route that goes on past the bulk transaction (to the partner's parent) costs `unasked_last`.
    Off, "complete" names nothing and excuses the extra step. A word before an article and a word that
    names nothing stays silent ("complete a purchase")."""
    relations = ["bulk_transaction_with", "subsidiary_of"]
    _placed_words_cost_a_step_more("verb_mentions", relations, "which company did X complete a bulk transaction with ?",
                                   ["complete"], ["bulk_transaction_with"], ["bulk_transaction_with", "subsidiary_of"])
    purchase = _word_scorer("which company did X complete a purchase from ?", relations, verb_mentions=True)
    assert purchase.silent_words == ["complete", "purchase"]
    assert resolve_config("chains")["verb_mentions"] is True


def test_frame_words_the_request_and_the_topics_kind_are_no_unplaced_words() -> None:
    """`frame_words`: "movie" in "the release year of the movie X" says what X is, and "can you name"
    is how the question asks: neither is a word that may stand for a relation the scorer cannot
    place, so every word is accounted for and a route that takes `release year` a second time (from
    the year to a film titled as that year, then its year) costs `unasked_last`. Off, they are silent
    words and excuse the extra step. A noun after an article elsewhere stays silent."""
    relations = ["release_year", "directed_by", "has_genre"]

    def scorer(question: str, on: bool) -> ChainScorer:
        return _word_scorer(question, relations, frame_words=on)

    _placed_words_cost_a_step_more("frame_words", relations, "what was the release year of the movie X", ["movie"],
                                   ["release_year"], ["release_year", "release_year"])
    assert scorer("can you name a film directed by X", True).silent_words == []
    assert "you" in scorer("can you name a film directed by X", False).silent_words
    # "plot" after an article, not before the topic: a word the question leaves unplaced
    assert scorer("what is the plot of the movie X", True).silent_words == ["plot"]
    assert resolve_config("chains")["frame_words"] is True


def test_whole_spans_offer_the_names_a_passage_says_whole_not_their_cut_parts() -> None:
    """`whole_names` (`answer_spans.whole_spans`): the span patterns cut "Harry L. Fraser" at its full
    stop and "Sinbad and the Eye of the Tiger" at its lower-case "and the"; where the passage says such
    a known name whole, the name is offered in place of the parts it alone holds. A part the passage
    also says on its own stays ("Zhennad", the town); the topic's own name cuts its parts and is not
    offered; without known names the spans are as before."""
    from engine.methods.shared.answer_spans import allowed_answers, spans_of, whole_spans

    text = "'Neath the Arizona Skies directed by Harry L. Fraser. 'Neath the Arizona Skies starred actors John Wayne."
    known = ["Harry L. Fraser", "John Wayne", "'Neath the Arizona Skies"]
    assert "Harry L" in spans_of(text) and "Harry L. Fraser" not in spans_of(text)
    assert whole_spans(text, spans_of(text), known, {"'neath the arizona skies"}) == ["Harry L. Fraser", "John Wayne"]
    title = "Sinbad and the Eye of the Tiger starred actors Margaret Whiting."
    assert whole_spans(title, spans_of(title), ["Sinbad and the Eye of the Tiger", "Margaret Whiting"]) == \
        ["Sinbad and the Eye of the Tiger", "Margaret Whiting"]
    town = "Zhennad Aluminium has its head office in Zhennad in Tarvania."
    assert "Zhennad" in whole_spans(town, spans_of(town), ["Zhennad Aluminium"])
    assert whole_spans(town, spans_of(town), []) == spans_of(town)
    offered = allowed_answers("who directed X", ["Harry L. Fraser"], [text], known=known,
                              unoffered={"'neath the arizona skies"})
    assert offered == ["Harry L. Fraser", "John Wayne"]
    assert "Harry L" in allowed_answers("who directed X", [], [text])


def test_copular_subjects_offer_a_product_s_name_with_its_noun() -> None:
    """`subject_names` (`answer_spans.copular_subjects`): "the AF-28 microcontroller remains its flagship
    product" says what the product is, name and noun; the name patterns stop at the lower-case noun
    and offer "AF-28" (and "28"). With `subjects` the whole phrase is offered in place of the parts it
    alone holds; a name run with a function word inside ("the Aschen Fab 1 in Aschen is ...") and a
    subject without a name ("The company is ...") are no such phrase; a name the passage also says
    on its own stays."""
    from engine.methods.shared.answer_spans import allowed_answers, copular_subjects

    text = ("The Aschen Fab 1 in Aschen is the company's main fab, and the AF-28 microcontroller remains its "
            "flagship product with about 49 percent of revenue.")
    assert copular_subjects(text) == ["AF-28 microcontroller"]
    assert copular_subjects("The company is a maker of chips. The board was its owner.") == []
    assert copular_subjects("The Brattvik Nacelle Plant in Brattvik is the company's main plant.") == []
    plain = allowed_answers("What is the flagship product?", [], [text])
    assert "AF-28" in plain and "AF-28 microcontroller" not in plain
    offered = allowed_answers("What is the flagship product?", [], [text], subjects=True)
    assert "AF-28 microcontroller" in offered and "AF-28" not in offered and "28" not in offered
    assert "Aschen Fab 1" in offered
    also = text + " Sales of the AF-28 grew."
    assert "AF-28" in allowed_answers("What is the flagship product?", [], [also], subjects=True)
    assert resolve_config("chains")["subject_names"] is False


def test_rare_words_lift_the_window_that_says_what_the_question_asks() -> None:
    """`window_words` (`retrieval.with_rare_words`): a window that says the question's words few other
    windows say ("flagship product") rises above one the cosine put first for words every window says
    ("company"); weight 0, or no word asked, leaves the cosine's order. The words the route's
    relations name are not asked: "written" of "the directors of the films written by the writer of
    X" would lift the windows about the writers the route already went through."""
    from engine.access.retrieval import with_rare_words
    from engine.methods.shared.word_forms import word_stems

    asked = word_stems("What is the flagship product of the semiconductor company headquartered in X?")
    texts = ["The company was founded in 2004 and its shares trade on the exchange.",
             "The company employed 2,400 people at the end of the year.",
             "The AF-28 microcontroller remains its flagship product, the company said."]
    said = [word_stems(t) for t in texts]
    ranked = [(0, 0.44), (1, 0.39), (2, 0.38)]
    assert with_rare_words(asked, said, ranked, 0.1)[0][0] == 2
    assert with_rare_words(asked, said, ranked, 0.0) == ranked
    assert with_rare_words(set(), said, ranked, 0.1) == ranked
    assert resolve_config("chains")["window_words"] == 0.0


def test_window_words_do_not_look_for_what_the_route_states(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`window_words` asks the windows for the question's words less those the chosen route's relations
    name: the route through `written by` and `directed by` states who wrote and directed, so
    "written" and "directors" lift no window about the writers; "films" is still asked."""
    import engine.methods.chains.method as chains_method

    index = _tsv_index(tmp_path, "Mackenna's Gold\twritten_by\tCarl Foreman\n"
                                 "The Guns of Navarone\twritten_by\tCarl Foreman\n"
                                 "The Guns of Navarone\tdirected_by\tJ. Lee Thompson\n",
                       '{"id": "d1", "title": "The Guns of Navarone", "text": "The Guns of Navarone written by Carl '
                       'Foreman. The Guns of Navarone directed by J. Lee Thompson. The films were shot in Greece."}\n')
    asked: list[set[str]] = []
    real = chains_method.with_rare_words

    def spy(words: Any, said: Any, ranked: Any, weight: float) -> Any:
        asked.append(set(words))
        return real(words, said, ranked, weight)

    monkeypatch.setattr(chains_method, "with_rare_words", spy)
    question = Question("q", "who are the directors of the films written by the writer of [Mackenna's Gold]",
                        ["J. Lee Thompson"], topic_entities=["Mackenna's Gold"])
    record, _ = _run(index, question, _choose("directed", "J. Lee Thompson"), choose="top", window_words=0.1)
    assert record.prediction == "J. Lee Thompson"
    assert asked and asked[-1] == {"film"}


def test_whole_names_offer_a_neighbour_s_name_whole_not_its_cut_parts(tmp_path: Path) -> None:
    """`whole_names` (on by default): the director's window names him "Harry L. Fraser", which the
    span patterns cut at the full stop into "Harry L" and "Fraser"; the director is on the route in
    the question subgraph, so his whole name is offered and the parts are not, nor the parts of the
    topic's own title ("Arizona Skies"). Off, the cut parts are offered."""
    index = _tsv_index(tmp_path, "'Neath the Arizona Skies\tdirected_by\tHarry L. Fraser\n"
                                 "Randy Rides Alone\tdirected_by\tHarry L. Fraser\n",
                       '{"id": "d1", "title": "Harry L. Fraser", "text": "Harry L. Fraser directed \'Neath the '
                       'Arizona Skies. Harry L. Fraser directed Randy Rides Alone."}\n')

    def offered(**overrides: Any) -> list[str]:
        return _offered(index, "who directed ['Neath the Arizona Skies]", "Harry L. Fraser", "'Neath the Arizona Skies",
                        "directed", **overrides)

    assert resolve_config("chains")["whole_names"] is True
    cut, whole = offered(whole_names=False), offered(whole_names=True)
    assert "Harry L" in cut and "Fraser" in cut and "Arizona Skies" in cut
    assert "Harry L" not in whole and "Fraser" not in whole and "Arizona Skies" not in whole
    assert whole == ["Harry L. Fraser"]  # "Randy Rides Alone", a step past the route: `past_ends`


def test_merge_windows_shows_each_sentence_once(tmp_path: Path) -> None:
    """`merge_windows` (offered, off by default): the director's document has two windows that
    share its middle sentence; both are shown, so the sentence is said twice. With the option they
    are one passage of the three sentences in the document's order."""
    index = _tsv_index(tmp_path, "Alpha Film\tdirected_by\tJo Bloggs\n",
                       '{"id": "d1", "title": "Jo Bloggs", "text": "Jo Bloggs was born in Rome. Jo Bloggs directed '
                       'Alpha Film. Jo Bloggs won a prize in 1990."}\n')
    question = Question("q", "who directed [Alpha Film]", ["Jo Bloggs"], topic_entities=["Alpha Film"])

    def passages(**overrides: Any) -> list[str]:
        record, _ = _run(index, question, _choose("directed", "Jo Bloggs"), choose="top", **overrides)
        assert record.prediction == "Jo Bloggs"
        return [" ".join(p.sentences) for p in record.paths if p.source != "kg"]

    assert sorted(passages()) == ["Jo Bloggs directed Alpha Film. Jo Bloggs won a prize in 1990.",
                                  "Jo Bloggs was born in Rome. Jo Bloggs directed Alpha Film."]
    assert passages(merge_windows=True) == [
        "Jo Bloggs was born in Rome. Jo Bloggs directed Alpha Film. Jo Bloggs won a prize in 1990."]
    assert resolve_config("chains")["merge_windows"] is False


def test_inverse_scope_graph_reads_the_inverse_the_neighbourhood_cannot_show(tmp_path: Path) -> None:
    """`inverse_scope=graph` (the default): Ann's neighbourhood holds one parents / children pair, too
    few to tell that the relations are inverses (`inverse_scope=subgraph` finds none); the whole graph
    holds four, and the record says so."""
    rows = "".join(f"{p}\tchildren\t{c}\n{c}\tparents\t{p}\n" for p, c in
                   [("Ann", "Bob"), ("Cy", "Dan"), ("Eve", "Fay"), ("Gus", "Hal")])
    index = _tsv_index(tmp_path, rows)
    question = Question("q", "who is the kid of [Ann]", ["Bob"], topic_entities=["Ann"])
    record, _ = _run(index, question, _choose("children", "Bob"), choose="top", inverse_scope="subgraph")
    assert "inverse_relations" not in record.extra
    record, _ = _run(index, question, _choose("children", "Bob"), choose="top")
    assert set(record.extra["inverse_relations"].values()) == {mint_relation("children"), mint_relation("parents")}
    assert record.prediction == "Bob"


def test_topic_docs_read_the_topic_s_own_report_where_no_relation_is_named(tmp_path: Path) -> None:
    """`topic_docs`: "who is the chief executive of X" names no relation of a graph that only says X's
    parent. The route (choose=top) goes to the parent, and with `topic_docs=route` the windows are
    the parent's report, which names the parent's chief executive; with `first` they are X's own
    report, with `also` both. A question that names its route keeps the route's documents."""
    index = _tsv_index(tmp_path, "Larkspur Instruments\tsubsidiary_of\tOrvel Holdings\n"
                                 "Orvel Holdings\theadquartered_in\tCorvane\n",
                       '{"id": "d1", "title": "Orvel Holdings", "text": "Petra Vance is group chief executive. '
                       'The group is chaired by Dagny Hollis."}\n'
                       '{"id": "d2", "title": "Larkspur Instruments", "text": "Ilse Marrow has been chief '
                       'executive since 2021. The company builds laboratory balances."}\n')
    chief = Question("q", "Who is the chief executive of Larkspur Instruments?", ["Ilse Marrow"],
                     topic_entities=["Larkspur Instruments"])

    def titles(question: Question, answer: str, **overrides: Any) -> set[str]:
        record, _ = _run(index, question, _choose("", answer), choose="top", **overrides)
        return {t for p in record.paths if p.source != "kg" for t in p.titles}

    assert titles(chief, "Ilse Marrow", topic_docs="route") == {"Orvel Holdings"}
    assert titles(chief, "Ilse Marrow", topic_docs="first") == {"Larkspur Instruments"}
    assert titles(chief, "Ilse Marrow", topic_docs="also") == {"Larkspur Instruments", "Orvel Holdings"}
    parent = Question("q", "Who chairs the parent company that Larkspur Instruments is a subsidiary of?",
                      ["Dagny Hollis"], topic_entities=["Larkspur Instruments"])
    assert titles(parent, "Dagny Hollis", topic_docs="first") == {"Orvel Holdings"}


def test_topic_docs_leave_a_route_through_documents_to_its_documents() -> None:
    """`topic_docs` reads the topic's documents only past a fact of the graph: a route whose first
    step is a document's mention (`doc_steps`' step, a mentions graph's relation) already reads
    documents that speak of the topic."""
    from engine.methods.chains.method import MENTIONED, _fact_step
    from index.mentions_kg import MENTIONS

    def first(relation: str) -> Chain:
        return Chain("t", ((relation, "out"),), [["t"], ["e"]])

    assert _fact_step(first("https://localkg.example/relation/subsidiary_of"))
    assert not _fact_step(first(MENTIONS)) and not _fact_step(first(MENTIONED))
