"""`hydra` / `hydra-e` (HydraRAG) on the real demo KG and reports, with a scripted LLM for the
control flow: which phase answers, what each call sees, the record, the call budget.

A scripted LLM proves only the control flow; the paths come from the real demo KG through the
real path search, the scores from `hydra_score` with the index's real embedding model, and
tests/test_hydra_real.py runs the method with a real language model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from engine.access.documents import ChunkRecord, ParquetDocumentStore, SearchHit
from engine.access.graph import Subgraph
from engine.access.retrieval import DenseScorer
from engine.llm.scripted import ScriptedLLM, ScriptedRequest
from engine.methods.hydra.answer import _graph_text_only
from engine.methods.hydra.docs import (
    DocPath,
    Sentence,
    entity_sentences,
    path_entities,
    sentence_candidates,
    top_sentences,
    web_sentences,
)
from engine.methods.hydra.paths import (
    one_relation_per_edge,
    skyline_chain,
    skyline_depth,
    skyline_order,
)
from engine.methods.hydra.score import Candidate
from engine.methods.registry import default_config, resolve_config
from engine.methods.shared.answer_spans import echoes as answer_echoes
from engine.questions.record import AnswerRecord, Question
from engine.runs.answer import answer_question
from engine.runs.context import open_context
from index.graph_docs import restates_graph

FOUNDER = Question("demo-002", "Who founded Norvale Motors?", ["Oskar Thelling"])
CEO = Question("d1", "Who is the chief executive of Norvale Motors?", ["Leontine Marsh"])
MAX_CALLS = 1 + 3 + 4 + 4 + 2  # analysis; initial, refined, predicted (doc paths, selection, answer, +1); fallback


def ids_with(req: ScriptedRequest, words: tuple[str, ...]) -> list[str]:
    """The ids of the shown paths ("P3 {...}") that contain one of the words, in shown order."""
    shown = re.findall(r"^(P\d+) (.*)$", req.messages[-1]["content"], re.MULTILINE)
    return [pid for pid, text in shown if any(w in text for w in words)]


def script(answers: list[tuple[str, str]], skyline: str = "Norvale Motors - founded by - answer",
           sources: tuple[str, ...] = ("kg",), prefer: tuple[str, ...] = ("founded by",),
           analysis: Any = None, doc_path: str = "") -> Callable[[ScriptedRequest], Any]:
    """Analysis as given; selection takes the paths with a preferred relation first; answer
    calls reply from `answers` in turn (the last one repeats)."""
    turn = {"answer": 0}

    def reply(req: ScriptedRequest) -> Any:
        schema: Any = req.schema
        if req.stage == "analysis":
            if analysis is not None:
                return analysis
            return {"sub_questions": ["who founded Norvale Motors"], "skyline": skyline.split(" - "),
                    "sources": list(sources)}
        if req.stage == "selection":
            prop = schema["properties"]["paths"]
            enum = prop["items"]["enum"]
            chosen = [i for i in ids_with(req, prefer) if i in enum]
            return {"paths": list(dict.fromkeys(chosen + enum))[: prop["minItems"]]}
        if req.stage == "doc_paths":
            return {"paths": [{"sentence": "S1", "path": doc_path}] if doc_path else []}
        if req.stage == "answer":
            enough, answer = answers[min(turn["answer"], len(answers) - 1)]
            turn["answer"] += 1
            return {"facts": "From the paths.", "enough": enough, "answer": answer}
        if req.stage == "refine":
            return {"question": "who started the company Norvale Motors", "skyline": "Norvale Motors - founder - answer"}
        if req.stage == "predict":
            return {"predictions": [{"answer": "Oskar Thelling", "skyline": "Norvale Motors - founded by - Oskar Thelling"}]}
        if req.stage == "answer_fallback":
            return {"answer": "Henry Ford", "from": "own knowledge"}
        raise AssertionError(f"unexpected stage {req.stage}")

    return reply


def run(index: Path, question: Question, reply: Callable[[ScriptedRequest], Any], method: str = "hydra",
        **config: Any) -> tuple[AnswerRecord, ScriptedLLM]:
    llm = ScriptedLLM(reply)
    record = answer_question(method, question, open_context(index, llm), config)
    assert record.error is None, record.extra.get("traceback")
    return record, llm


def stages(record: AnswerRecord) -> list[str]:
    return [c["stage"] for c in record.llm_calls]


# ---- the skyline -------------------------------------------------------------------------------


def test_skyline_depth_order_and_chain() -> None:
    sky = "Rashomon - directed by - director - born in - answer"
    assert skyline_chain(sky) == ["Rashomon", "directed by", "director", "born in", "answer"]
    assert skyline_depth(sky, ["Rashomon"], 3) == 2
    assert skyline_depth("Kill Bill -> directed by -> answer", ["Kill Bill"], 3) == 1
    assert skyline_depth("A - r - b - r - c - r - d - r - answer", ["A"], 3) == 3  # bounded by D_max
    # the answer between two topic entities: the farther one counts
    assert skyline_depth("Logan Lerman - acted in - answer - decorated by - Barry Greaves",
                         ["Barry Greaves", "Logan Lerman"], 3) == 1
    assert skyline_depth("who knows", ["X"], 3) == 3  # no chain: D_max
    assert skyline_order(["urn:b", "urn:a", "urn:c"], ["Barry Greaves", "Logan Lerman", "Zed"],
                         "Logan Lerman - acted in - answer - decorated by - Barry Greaves") == \
        ["urn:a", "urn:b", "urn:c"]
    assert path_entities("Kestrel Cell Works - chief executive - Severin Oduya") == \
        ("Kestrel Cell Works", "Severin Oduya")


def test_hydra_e_keeps_one_seeded_relation_per_clustered_edge() -> None:
    g = nx.MultiDiGraph()
    g.add_edge("a", "b", key="r1")
    g.add_edge("a", "b", key="r2")
    g.add_edge("b", "a", key="r3")  # the same entity pair, the other direction: one clustered edge
    g.add_edge("b", "c", key="r4")
    sub = Subgraph(g, ["a"], 2, {"a": 0, "b": 1, "c": 2})
    one = one_relation_per_edge(sub, seed=0)
    assert one.graph.number_of_edges() == 2
    assert one.graph.has_edge("b", "c", key="r4")
    kept = [(u, v, k) for u, v, k in one.graph.edges(keys=True) if {u, v} == {"a", "b"}]
    assert len(kept) == 1 and kept[0][2] in {"r1", "r2", "r3"}
    assert one_relation_per_edge(sub, seed=0).graph.edges(keys=True) == one.graph.edges(keys=True)  # stable
    seeds = {next(k for u, v, k in one_relation_per_edge(sub, s).graph.edges(keys=True) if {u, v} == {"a", "b"})
             for s in range(12)}
    assert len(seeds) > 1  # the seed decides
    assert sub.graph.number_of_edges() == 4  # the input is untouched


class HandMadeDocs:
    """An entity's report chunks and a `web` collection, written here; the demo index's embedder."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        texts = [("urn:e:kestrel", "domain", "Kestrel Cell Works makes battery cells in Torvassa. "
                  "Kestrel Cell Works is led by chief executive Severin Oduya."),
                 ("urn:e:kestrel", "web", "Kestrel news: a new plant opens."),
                 (None, "web", "Severin Oduya, chief executive of Kestrel Cell Works, spoke on Monday. "
                  "The weather was fine.")]
        self.chunks = [ChunkRecord(f"c{i}", f"d{i}", e, col, "Kestrel" if e else "News", t, 0, len(t), i)
                       for i, (e, col, t) in enumerate(texts)]

    def chunks_of(self, entity: str, limit: int | None = None) -> list[ChunkRecord]:
        return [c for c in self.chunks if c.entity == entity][:limit]

    def dense_search(self, text: str, k: int = 10, collection: str | None = None) -> list[SearchHit]:
        return [SearchHit(c, 1.0) for c in self.chunks if collection in (None, c.collection)][:k]


def test_document_and_web_sentences_ranked_by_the_skyline(demo_index: Path) -> None:
    embedder = ParquetDocumentStore(demo_index).embedder
    docs = HandMadeDocs(embedder)
    wiki = entity_sentences(docs, ["urn:e:kestrel"], 1, 20)  # type: ignore[arg-type]
    assert [s.chunk_id for s in wiki] == ["c0", "c0"] and {s.source for s in wiki} == {"wiki"}  # web aside
    web = web_sentences(docs, "who leads Kestrel Cell Works", 5, "dense", 1)  # type: ignore[arg-type]
    assert [s.chunk_id for s in web] == ["c1", "c2", "c2"] and {s.source for s in web} == {"web"}
    # web_collections=all: the question search covers every collection; what it finds is the web source's
    everywhere = web_sentences(docs, "who leads Kestrel Cell Works", 5, "dense", 1, None)  # type: ignore[arg-type]
    assert [s.chunk_id for s in everywhere] == ["c0", "c0", "c1", "c2", "c2"]
    assert {s.source for s in everywhere} == {"web"} and everywhere[0].collection == "domain"
    scorer = DenseScorer(embedder)
    skyline = "Kestrel Cell Works - chief executive - answer"
    top = top_sentences(scorer, skyline, wiki + web, 5, 300)
    assert top[0].text == "Kestrel Cell Works is led by chief executive Severin Oduya."
    assert top[-1].text == "The weather was fine."
    assert top[0].score == pytest.approx(scorer.scores(skyline, [top[0].shown(300)])[0], abs=1e-5)
    assert [s.score for s in top] == sorted((s.score for s in top), reverse=True)
    assert len(top_sentences(scorer, skyline, wiki + web, 3, 300)) == 3  # W_max


# ---- phases ------------------------------------------------------------------------------------


def test_initial_phase_answers_with_kg_paths_and_the_record(demo_index: Path) -> None:
    record, llm = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")]))
    assert stages(record) == ["analysis", "selection", "answer"]
    extra = record.extra
    assert extra["phase"] == "initial" and extra["d_predict"] == 1
    assert extra["skyline"] == "Norvale Motors - founded by - answer"
    assert "kg" in extra["available_sources"] and extra["selected_sources"] == ["kg"]
    assert record.prediction == "Oskar Thelling" and record.answer_source == "kg" and extra["support"] == "KG"
    assert extra["support_sources"] == ["kg"]
    # the final paths with provenance: KG triples with ids, the cross-score
    founded = [p for p in record.paths if any(t[1] == "founded by" for t in p.triples)]
    assert founded and founded[0].source == "kg" and founded[0].triple_ids[0][0].endswith("norvale_motors")
    assert founded[0].score is not None and "cross-score" in (founded[0].score_kind or "")
    # stage recall hooks: the gold answer in the subgraph, the BFS paths, each pruning step
    step = extra["trace"][0]
    assert extra["subgraph"]["gold"] == ["Oskar Thelling"] and extra["subgraph"]["nodes"] > 10
    assert step["bfs"][0]["gold"] == ["Oskar Thelling"] and step["bfs"][0]["depth"] == 1
    for stage in ("relevance", "cross", "selected"):
        assert step[stage]["gold"] == ["Oskar Thelling"], stage
    assert step["cross"]["n"] <= 20 and set(step["cross"]["top"][0]) >= {"relevance", "verification", "cross"}
    # what the selection call saw: ids under an enum, the W2 grouped paths, temperature 0
    select = next(r for r in llm.requests if r.stage == "selection")
    assert select.temperature == 0.0
    assert len(select.schema["properties"]["paths"]["items"]["enum"]) == step["cross"]["n"]  # type: ignore[index]
    assert "{Norvale Motors} -founded by-> {Oskar Thelling}" in select.messages[-1]["content"]


def test_refined_phase_after_a_no(demo_index: Path) -> None:
    record, llm = run(demo_index, FOUNDER, script([("No", ""), ("Yes", "Oskar Thelling")]))
    # refined exploration searches every available source (the demo has the reports: wiki)
    assert stages(record) == ["analysis", "selection", "answer", "refine", "doc_paths", "selection", "answer"]
    assert record.extra["phase"] == "refined" and record.prediction == "Oskar Thelling"
    refined = record.extra["trace"][1]
    assert refined["phase"] == "refined" and refined["indicator"] == "Norvale Motors - founder - answer"
    assert refined["depth"] == default_config("hydra")["d_max"]
    assert refined["bfs"][0]["depth"] == 3
    refine = next(r for r in llm.requests if r.stage == "refine")
    assert refine.temperature == 0.4  # exploration (Appendix C)


def test_predicted_phase_aligns_the_guess_with_the_subgraph(demo_index: Path) -> None:
    record, _ = run(demo_index, FOUNDER, script([("No", ""), ("No", ""), ("Yes", "Oskar Thelling")]))
    assert stages(record)[-4:] == ["predict", "doc_paths", "selection", "answer"]
    assert record.extra["phase"] == "predicted"
    predicted = record.extra["trace"][2]
    assert predicted["predictions"][0]["aligned"] == "Oskar Thelling"
    assert predicted["predictions"][0]["similarity"] == 1.0
    # the aligned entity is a path endpoint: Norvale Motors ~> Oskar Thelling, lengths 1..2·D_max
    assert predicted["bfs"][0]["topics"] == ["Norvale Motors", "Oskar Thelling"]
    assert predicted["bfs"][0]["paths"] > 0


def test_fallback_marks_the_models_own_knowledge(demo_index: Path) -> None:
    record, _ = run(demo_index, FOUNDER, script([("No", "")]))
    calls = stages(record)
    assert calls[-2:] == ["selection", "answer_fallback"] and calls.count("answer") == 3
    assert len(calls) <= MAX_CALLS
    assert record.extra["phase"] == "fallback" and record.extra["own_knowledge"] is True
    assert record.extra["answer_text"] == "Henry Ford" and record.answer_source == "llm"
    assert record.extra["support"] == "LLM"


def test_an_ungrounded_yes_goes_on_to_the_next_phase(demo_index: Path) -> None:
    # free-text answers (the paper's way; `answer_choice: paths` cannot name what no path reaches)
    record, _ = run(demo_index, FOUNDER, script([("Yes", "Henry Ford"), ("Yes", "Oskar Thelling")]),
                    answer_choice="free")
    assert record.extra["phase"] == "refined"
    assert record.extra["trace"][0]["answer"]["ungrounded_answer"] is True
    paper, _ = run(demo_index, FOUNDER, script([("Yes", "Henry Ford")]), require_grounded_answer=False,
                   answer_choice="free")
    assert paper.extra["phase"] == "initial" and paper.answer_source == "llm"


def test_malformed_analysis_gets_one_retry_then_a_fallback(demo_index: Path) -> None:
    record, llm = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")], analysis="no json here"))
    assert [r.stage for r in llm.requests].count("analysis") == 2  # the reply and its one retry
    assert stages(record).count("analysis") == 1
    assert record.extra["analysis_fallback"] is True
    assert record.extra["skyline"] == "Who founded Norvale Motors?"  # the question as indicator
    assert record.extra["d_predict"] == default_config("hydra")["d_max"]
    assert record.extra["selected_sources"] == record.extra["available_sources"]
    assert record.extra["call_errors"][0]["stage"] == "analysis"
    assert len(stages(record)) <= MAX_CALLS


def test_documents_join_the_pool_with_chunk_ids(demo_index: Path) -> None:
    reply = script([("Yes", "Leontine Marsh")], skyline="Norvale Motors - chief executive - answer",
                   sources=("kg", "wiki"), prefer=("chief executive",),
                   doc_path="Norvale Motors - led by chief executive - Leontine Marsh")
    record, llm = run(demo_index, CEO, reply)
    assert stages(record) == ["analysis", "doc_paths", "selection", "answer"]
    assert record.extra["selected_sources"] == ["kg", "wiki"]
    doc_call = next(r for r in llm.requests if r.stage == "doc_paths")
    assert doc_call.messages[-1]["content"].startswith("Sentences:\nS1 ")
    docs = [p for p in record.paths if p.source != "kg"]
    assert docs and docs[0].chunk_ids[0] and "Leontine Marsh" in docs[0].sentences[-1]
    assert record.answer_source == "doc" and record.extra["support"] == "Wiki"
    assert record.extra["trace"][0]["sentences"] and record.extra["trace"][0]["doc_paths"]
    assert len(record.extra["trace"][0]["sentences"]) <= default_config("hydra")["w_max"]


def test_hydra_e_runs_on_the_reduced_subgraph(demo_index: Path) -> None:
    record, _ = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")]), method="hydra-e")
    assert record.method == "hydra-e" and record.extra["config"]["one_relation_per_edge"] is True
    assert "clustered_edges" in record.extra["subgraph"]
    assert record.extra["phase"] == "initial"


def test_call_budget_with_every_source_and_every_phase(demo_index: Path) -> None:
    reply = script([("No", "")], skyline="Norvale Motors - chief executive - answer", sources=("kg", "wiki"),
                   doc_path="Norvale Motors - led by - Leontine Marsh")
    record, _ = run(demo_index, CEO, reply)
    calls = stages(record)
    assert record.extra["phase"] == "fallback"
    assert calls.count("doc_paths") == 3  # initial, refined, predicted
    assert len(calls) <= MAX_CALLS


def test_config_defaults_are_the_papers() -> None:
    c = default_config("hydra")
    assert (c["w_max"], c["d_max"], c["w1"], c["w2"]) == (3, 3, 100, 20)
    assert (c["lambda_sem"], c["alpha_cross"]) == (0.7, 0.7)
    assert (c["prior_kg"], c["prior_wiki"], c["prior_web"]) == (1.0, 0.8, 0.7)
    assert c["alpha_k"] == pytest.approx([1 / 3] * 3)
    assert (c["relevance"], c["support"], c["alignment"], c["temperature_selection"]) == ("paper", "paper", "paper", 0.0)
    # our additions default to the paper's way
    assert (c["group_scoring"], c["beam"], c["initial_depth"], c["path_lengths"], c["answer_choice"]) == (
        "group", "paths", "predicted", "band", "free")
    assert default_config("hydra-e")["one_relation_per_edge"] is True
    with pytest.raises(ValueError, match="alpha_k"):
        resolve_config("hydra", {"alpha_k": [1, 2]})
    with pytest.raises(ValueError, match="relevance"):
        resolve_config("hydra", {"relevance": "bm25"})


def test_answer_choice_paths_offers_only_names_the_kg_paths_reach(demo_index: Path) -> None:
    record, llm = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")]), answer_choice="paths")
    answer = next(r for r in llm.requests if r.stage == "answer")
    enum = answer.schema["properties"]["answer"]["enum"]  # type: ignore[index]
    assert "Oskar Thelling" in enum and enum[-1] == ""  # "" goes with {No}
    assert "Norvale Motors" not in enum  # never the entity the question names
    assert record.prediction == "Oskar Thelling"
    # the paper's way (the default): free text
    _, llm = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")]))
    answer = next(r for r in llm.requests if r.stage == "answer")
    assert "enum" not in answer.schema["properties"]["answer"]  # type: ignore[index]
    with pytest.raises(ValueError, match="answer_choice"):
        resolve_config("hydra", {"answer_choice": "any"})


def test_answer_choice_evidence_offers_names_and_spans_of_the_chosen_sentences(demo_index: Path) -> None:
    record, llm = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")], sources=("kg", "wiki")),
                      doc_evidence="sentences", answer_choice="evidence")
    answer = next(r for r in llm.requests if r.stage == "answer")
    enum = answer.schema["properties"]["answer"]["enum"]  # type: ignore[index]
    assert "Oskar Thelling" in enum and enum[-1] == ""
    step = record.extra["trace"][0]
    shown = " ".join(step["selected"]["texts"])
    assert any(t.source != "kg" for t in record.paths), "a sentence was selected"
    assert len(enum) > 2 and all(a in shown for a in enum[:-1])  # nothing the chosen evidence does not show
    assert record.prediction == "Oskar Thelling"


def test_path_lengths_up_to_keeps_shorter_paths_at_the_predicted_depth(demo_index: Path) -> None:
    two = "Norvale Motors - founded by - person - born in - answer"  # D_predict 2 for a 1-hop question
    record, _ = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")], skyline=two))  # band, the default
    step = record.extra["trace"][0]
    assert record.extra["d_predict"] == 2 and step["bfs"][0]["depth"] == 2
    band = step["bfs"][0]["groups"]
    record, llm = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")], skyline=two), path_lengths="up_to")
    step = record.extra["trace"][0]
    assert step["bfs"][0]["groups"] > band  # the 1-hop groups join the 2-hop ones
    select = next(r for r in llm.requests if r.stage == "selection")
    assert "{Norvale Motors} -founded by-> {Oskar Thelling}\n" in select.messages[-1]["content"] + "\n"
    with pytest.raises(ValueError, match="path_lengths"):
        resolve_config("hydra", {"path_lengths": "all"})


def test_initial_depth_max_searches_at_d_max_whatever_the_skyline_says(demo_index: Path) -> None:
    record, _ = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")]), initial_depth="max", d_max=2,
                    path_lengths="up_to")
    step = record.extra["trace"][0]
    assert record.extra["d_predict"] == 1 and step["depth"] == 2 and step["bfs"][0]["depth"] == 2
    assert step["bfs"][0]["gold"] == ["Oskar Thelling"]  # the 1-hop answer is still on a path (up_to)
    with pytest.raises(ValueError, match="initial_depth"):
        resolve_config("hydra", {"initial_depth": "deep"})
    with pytest.raises(ValueError, match="beam"):
        resolve_config("hydra", {"beam": "wide"})


def test_path_relevance_chains_ranks_the_chain_the_question_describes_first(demo_index: Path) -> None:
    """Ours: with every depth searched and a skyline of the wrong length, the chain scorer (not
    the skyline) orders the KG paths: the 2-hop chain the question names goes first (P1)."""
    question = Question("demo-021", "In which city was the founder of Caspenne Microsystems born?", ["Lumera"])
    wrong = "Caspenne Microsystems - located in - answer"  # one relation, the wrong one, for a 2-hop question
    options = {"initial_depth": "max", "d_max": 2, "path_lengths": "up_to"}
    record, llm = run(demo_index, question, script([("Yes", "x")], skyline=wrong, prefer=()), **options)
    paper_first = re.search(r"^P1 (.*)$", next(r for r in llm.requests if r.stage == "selection")
                            .messages[-1]["content"], re.MULTILINE)
    record, llm = run(demo_index, question, script([("Yes", "x")], skyline=wrong, prefer=()),
                      path_relevance="chains", **options)
    select = next(r for r in llm.requests if r.stage == "selection").messages[-1]["content"]
    first = re.search(r"^P1 (.*)$", select, re.MULTILINE)
    assert first and paper_first
    assert re.fullmatch(r"\{Caspenne Microsystems\} -founded by-> \{[^}]*\} -born in-> \{Lumera\}", first.group(1)), \
        first.group(1)
    assert first.group(1) != paper_first.group(1)  # the paper's relevance to the skyline put another first
    cross = record.extra["trace"][0]["cross"]["top"]
    assert cross[0]["relevance"] == 1.0  # scaled over the pool's KG paths
    with pytest.raises(ValueError, match="path_relevance"):
        resolve_config("hydra", {"path_relevance": "question"})


def test_hydra_s_is_hydra_with_the_small_model_settings() -> None:
    """Ours, beside the paper's `hydra`: fourteen defaults differ, every other key is hydra's."""
    hydra, small = default_config("hydra"), default_config("hydra-s")
    changed = {k: v for k, v in small.items() if hydra[k] != v}
    assert changed == {"initial_depth": "max", "path_lengths": "up_to", "path_relevance": "chains",
                       "answer_choice": "ends", "answer_prompt": "short", "doc_evidence": "sentences",
                       "web_collections": "all", "chain_weights": "chains", "end_prefix": True,
                       "answer_windows": 3, "windows_beside_docs": True, "answer_forms": True,
                       "echo_retry": "spans", "topic_windows": True}
    assert set(small) == set(hydra)


def test_hydra_s_answers_from_the_ends_of_the_chains_best_path(demo_index: Path) -> None:
    question = Question("demo-021", "In which city was the founder of Caspenne Microsystems born?", ["Lumera"])
    record, llm = run(demo_index, question, script([("Yes", "Lumera")], prefer=("founded by",)), method="hydra-s",
                      d_max=2)
    assert record.method == "hydra-s" and record.prediction == "Lumera"
    answer = next(r for r in llm.requests if r.stage == "answer")
    assert "facts" not in answer.schema["properties"] and "enum" in answer.schema["properties"]["answer"]


def test_answer_choice_ends_offers_only_the_last_sets_of_the_chosen_paths(demo_index: Path) -> None:
    """Ours: the answer is a name of the chosen KG paths' end sets, never a chain's middle."""
    question = Question("demo-021", "In which city was the founder of Caspenne Microsystems born?", ["Lumera"])
    options = {"initial_depth": "max", "d_max": 2, "path_lengths": "up_to", "path_relevance": "chains"}
    record, llm = run(demo_index, question, script([("Yes", "Lumera")], prefer=("founded by",)), answer_choice="ends",
                      w_max=1, **options)
    answer = next(r for r in llm.requests if r.stage == "answer")
    enum = answer.schema["properties"]["answer"]["enum"]
    shown = re.findall(r"^P\d+ (.*)$", answer.messages[-1]["content"], re.MULTILINE)
    sets = [re.findall(r"\{([^}]*)\}", text) for text in shown]
    ends = {n for s in sets for n in s[-1].split(", ")}
    middles = {n for s in sets for m in s[1:-1] for n in m.split(", ")} - ends
    assert enum == ["Lumera", ""] and middles == {"Teodor Valle"}, (shown, enum)  # the founder is not offered
    assert record.prediction == "Lumera"
    with pytest.raises(ValueError, match="answer_choice"):
        resolve_config("hydra", {"answer_choice": "middle"})


def test_answer_prompt_short_asks_for_the_verdict_and_answer_only(demo_index: Path) -> None:
    """Ours: no facts written first, no worked example, no skyline; the phases work the same."""
    record, llm = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")]), answer_prompt="short")
    answer = next(r for r in llm.requests if r.stage == "answer")
    assert "facts" not in answer.schema["properties"] and "Example" not in answer.messages[0]["content"]
    assert "Skyline:" not in answer.messages[-1]["content"]
    assert record.prediction == "Oskar Thelling" and record.extra["phase"] == "initial"
    record, llm = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")]))
    answer = next(r for r in llm.requests if r.stage == "answer")
    assert "facts" in answer.schema["properties"] and "Skyline:" in answer.messages[-1]["content"]


def test_web_collections_all_makes_the_question_search_cover_every_collection(demo_index: Path) -> None:
    """The demo index has no `web` collection: by default there is no web source; with
    `web_collections=all` the question search finds the reports and they join as the web source."""
    record, _ = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")]))
    assert "web" not in record.extra["available_sources"]
    record, llm = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")], sources=("web",),
                                                  doc_path="Norvale Motors - founded by - Oskar Thelling"),
                      web_collections="all")
    assert "web" in record.extra["available_sources"] and record.extra["selected_sources"] == ["web"]
    analysis = next(r for r in llm.requests if r.stage == "analysis")
    assert "web (pages searched by the question)" in analysis.messages[-1]["content"]
    assert stages(record)[:2] == ["analysis", "doc_paths"]
    written = [p for p in record.paths if p.source != "kg"]
    assert written and all(p.source == "domain" for p in written)  # provenance: the chunk's collection
    assert "web" in record.extra["support_sources"]  # scored and reported as the web source (found by search)
    with pytest.raises(ValueError, match="web_collections"):
        resolve_config("hydra", {"web_collections": "wiki"})


def test_no_linked_entity_starts_from_the_questions_best_passages(demo_index: Path) -> None:
    unnamed = Question("u1", "Which firm builds battery cells in a plant that opened last year?", ["x"])
    record, _ = run(demo_index, unnamed, script([("Yes", "x")], sources=("kg", "wiki")))
    found = record.topic_entities
    assert found and all(t["reason"] == "search" for t in found) and len(found) <= 3  # max_topic_entities
    assert "wiki" in record.extra["available_sources"]  # their reports are the way in
    off, _ = run(demo_index, unnamed, script([("Yes", "x")]), topic_search=0)  # linking only
    assert not off.topic_entities and off.extra["available_sources"] == [] and off.extra["phase"] == "fallback"
    # no topic entity, but a question search over every collection: the web source alone
    web, _ = run(demo_index, unnamed, script([("Yes", "x")], sources=("web",), doc_path="Kestrel - makes - battery cells"),
                 topic_search=0, web_collections="all")
    assert web.extra["available_sources"] == ["web"] and "doc_paths" in stages(web)
    with pytest.raises(ValueError, match="topic_search must be an integer >= 0"):
        resolve_config("hydra", {"topic_search": -1})


def test_doc_evidence_sentences_puts_the_windows_in_the_pool_without_a_call(demo_index: Path) -> None:
    record, llm = run(demo_index, FOUNDER, script([("Yes", "Oskar Thelling")], sources=("wiki",)),
                      doc_evidence="sentences")
    assert "doc_paths" not in stages(record)
    answer = next(r for r in llm.requests if r.stage == "answer")
    assert "Norvale Motors: " in answer.messages[-1]["content"]  # "title: sentence", as retrieved
    written = [p for p in record.paths if p.source != "kg"]
    assert written and all(p.sentences[0] in p.sentences[1] for p in written)  # the path is the sentence
    sentences = [Sentence("It was founded by Oskar Thelling in Norvale.", "c1", "Norvale Motors", "domain")]
    (cand,) = sentence_candidates(sentences, ["Oskar Thelling", "Kestrel"], 300)
    assert cand.entities == ("Norvale Motors", "Oskar Thelling") and cand.source == "wiki"
    with pytest.raises(ValueError, match="doc_evidence"):
        resolve_config("hydra", {"doc_evidence": "chunks"})


def test_options_added_later_enter_the_hash_only_when_set() -> None:
    """Runs made before these options keep their config hash (and resume) at the defaults."""
    import hashlib
    import json

    from engine.methods.registry import config_hash

    added = ("group_scoring", "beam", "initial_depth", "path_lengths", "answer_choice", "max_answer_names",
             "web_collections", "topic_search", "doc_evidence", "doc_entities", "max_doc_entities", "path_relevance",
             "answer_prompt", "chain_weights", "end_prefix", "answer_windows", "windows_beside_docs", "doc_answers",
             "answer_forms", "echo_retry", "topic_windows")
    base = default_config("hydra")
    before = {k: v for k, v in base.items() if k not in added}
    blob = json.dumps({"method": "hydra", "config": before}, sort_keys=True, default=str)
    assert config_hash("hydra", base) == hashlib.sha256(blob.encode()).hexdigest()[:16]
    assert config_hash("hydra", {**base, "answer_choice": "paths"}) != config_hash("hydra", base)


SUPPLIER_CEO = Question("demo-038", "Who is the chief executive of the company that supplies lithium-ion batteries "
                        "to Norvale Motors?", ["Severin Oduya"])


def test_doc_entities_reached_reads_the_documents_of_the_entities_on_the_chosen_paths(demo_index: Path) -> None:
    """The KG knows who supplies Norvale Motors, only Kestrel's report knows its chief
    executive: the paper's Wiki source (the topic entity's documents) cannot reach it; with
    `doc_entities=reached` the refined phase reads the documents of the entities that the
    chosen KG paths reach, and the report's window joins the pool. (Whether it then survives
    pruning is for a real run to show: it has none of the topic entity's names, which the
    relevance score's Jaccard term rewards.)"""
    def reply() -> Callable[[ScriptedRequest], Any]:
        """No at first; the refined skyline asks for the supplier's chief executive."""
        base = script([("No", ""), ("Yes", "Severin Oduya")], prefer=("supplier of",),
                      skyline="Norvale Motors - supplier of - company - chief executive - answer")

        def answer(req: ScriptedRequest) -> Any:
            if req.stage == "refine":
                return {"question": "who leads the battery supplier of Norvale Motors",
                        "skyline": "battery supplier of Norvale Motors - led by chief executive - answer"}
            return base(req)
        return answer

    def kestrel_windows(record: AnswerRecord) -> list[str]:
        refined = next(s for s in record.extra["trace"] if s["phase"] == "refined")
        return [c for c in refined.get("sentences", []) if "kestrel" in c]

    paper, _ = run(demo_index, SUPPLIER_CEO, reply(), doc_evidence="sentences")
    assert "reached_docs" not in paper.extra["trace"][1] and not kestrel_windows(paper)
    reached, _ = run(demo_index, SUPPLIER_CEO, reply(), doc_evidence="sentences", doc_entities="reached")
    refined = reached.extra["trace"][1]
    assert refined["phase"] == "refined" and "Kestrel Cell Works" in refined["reached_docs"]
    assert "Norvale Motors" not in refined["reached_docs"] and len(refined["reached_docs"]) <= 10  # max_doc_entities
    assert kestrel_windows(reached)
    assert len(refined["sentences"]) == 2 * 3  # W_max of the topic entity's windows, W_max of the reached ones
    assert any("Severin Oduya" in p for p in refined["doc_paths"])
    with pytest.raises(ValueError, match="doc_entities"):
        resolve_config("hydra", {"doc_entities": "all"})


CHAIR_BORN = Question("demo-025", "In which city was the board chair of Pellin Rail Freight born?", ["Pellin"])


def test_end_prefix_offers_the_end_of_the_best_ranked_prefix_of_a_chosen_path(demo_index: Path) -> None:
    """The model chooses paths that go one step past the city the board chair was born in (as
    the 0.5B model did on the demo); `answer_choice=ends` then offers only their last sets, and
    with `end_prefix` the chain scorer cuts each chosen path where it matches the question best:
    after `born in`."""
    def offered(**config: Any) -> list[str]:
        reply = script([("Yes", "Pellin")], prefer=("located in",), skyline="Pellin Rail Freight - board chair - "
                       "person - born in - answer")
        _, llm = run(demo_index, CHAIR_BORN, reply, "hydra-s", **config)
        answer = next(r for r in llm.requests if r.stage == "answer")
        return list(answer.schema["properties"]["answer"]["enum"])  # type: ignore[index]

    whole, cut = offered(end_prefix=False), offered()  # on in hydra-s
    assert whole[0] == "Tarvania"  # the end of "born in, then located in", the model's first choice
    assert cut[0] == "Pellin" and "Tarvania" not in cut and "Orvask" not in cut


PARENT_CEO = Question("demo-042", "Who is the chief executive of the parent company of Saltreach Biologics?",
                      ["Caspar Ellwood"])
PARENT_FOUNDER = Question("demo-018", "Who founded the parent company of Norvale Motors?", ["Aldric Brennvald"])


def test_answer_windows_read_the_reports_of_the_entities_the_chosen_paths_reach(demo_index: Path) -> None:
    """The graph reaches the parent company of Saltreach Biologics; only the parent's report names
    its chief executive. With `answer_windows` the answer call also reads the best windows of the
    reached entities' reports and may answer with a span of them; without, only the paths' ends.
    Where every word of the question names a relation of the graph ("who founded the parent
    company"), the paths answer and no window is read."""
    def answered(question: Question, gold: str, **config: Any) -> tuple[AnswerRecord, list[str], str]:
        def reply(req: ScriptedRequest) -> Any:
            if req.stage == "answer":
                enum = req.schema["properties"]["answer"]["enum"]  # type: ignore[index]
                return {"enough": "Yes", "answer": gold if gold in enum else enum[0]}
            return script([("Yes", "")], prefer=("subsidiary of",), skyline="Saltreach Biologics - parent - "
                          "company - chief executive - answer")(req)
        record, llm = run(demo_index, question, reply, "hydra-s", **config)
        answer = next(r for r in llm.requests if r.stage == "answer")
        return record, list(answer.schema["properties"]["answer"]["enum"]), answer.messages[-1]["content"]  # type: ignore[index]

    record, enum, user = answered(PARENT_CEO, "Caspar Ellwood", answer_windows=3)
    assert "Caspar Ellwood" in enum and "Caspar Ellwood" in user
    assert record.prediction == "Caspar Ellwood" and record.answer_source == "doc"
    assert record.extra["read_windows"] and record.extra["final_paths"]  # read beside the selection, kept apart
    read = [p for p in record.paths if p.source != "kg"]
    assert read and all(p.written_by is None for p in read)  # the report's own words
    record, enum, user = answered(PARENT_CEO, "Caspar Ellwood", answer_windows=0)
    assert "Caspar Ellwood" not in enum and "read_windows" not in record.extra
    record, enum, user = answered(PARENT_FOUNDER, "Aldric Brennvald", answer_windows=3)
    assert "read_windows" not in record.extra and all(p.source == "kg" for p in record.paths)


def test_topic_windows_read_the_topic_s_report_where_no_word_names_a_relation(demo_index: Path) -> None:
    """"Who is the chief executive of X" names no relation of the demo's graph; the model chooses the
    path to X's parent, and without `topic_windows` the answer call reads windows of the parent's
    report only. With it (`hydra-s`'s default, off in `hydra`) X's own report is read beside it. A
    question that names its relation ("who founded the parent company of X") reads no window
    either way."""
    def read(question: Question, **config: Any) -> set[str]:
        def reply(req: ScriptedRequest) -> Any:
            if req.stage == "answer":
                return {"enough": "Yes", "answer": req.schema["properties"]["answer"]["enum"][0]}  # type: ignore[index]
            return script([("Yes", "")], prefer=("subsidiary of",),
                          skyline="Norvale Motors - parent - company - answer")(req)
        record, _ = run(demo_index, question, reply, "hydra-s", **config)
        acted.append(record.extra.get("topic_windows", False))  # the record says where the option acted
        return {w["text"].split(":")[0] for w in record.extra.get("read_windows", [])}

    acted: list[bool] = []
    chief = Question("d", "Who is the chief executive of Norvale Motors?", ["Leontine Marsh"])
    assert default_config("hydra-s")["topic_windows"] is True and default_config("hydra")["topic_windows"] is False
    assert read(chief, topic_windows=False) == {"Brennvald Holdings"}
    assert "Norvale Motors" in read(chief)
    assert read(PARENT_FOUNDER, topic_windows=True) == set()
    assert acted == [False, True, False]


def test_windows_beside_docs_read_the_reached_reports_beside_a_chosen_sentence(demo_index: Path) -> None:
    """The model chooses the KG path to the parent company and a sentence of a document (as it
    did on AdvHotpotQA). `answer_windows` reads the reached entities' reports only where the
    model chose KG paths alone; with `windows_beside_docs` (`hydra-s`'s default) it reads them
    beside the sentence too, and the parent's report names its chief executive."""
    def reply(req: ScriptedRequest) -> Any:
        if req.stage == "selection":
            shown = re.findall(r"^(P\d+) (.*)$", req.messages[-1]["content"], re.MULTILINE)
            paths = [pid for pid, text in shown if "subsidiary of" in text and text.startswith("{")]
            sentences = [pid for pid, text in shown if not text.startswith("{")]
            return {"paths": list(dict.fromkeys([*paths[:1], *sentences[:1], *(pid for pid, _ in shown)]))[:2]}
        if req.stage == "answer":
            said = "Caspar Ellwood" in req.messages[-1]["content"]
            return {"enough": "Yes" if said else "No", "answer": "Caspar Ellwood" if said else ""}
        return script([("Yes", "")], sources=("kg", "wiki"), prefer=("subsidiary of",),
                      skyline="Saltreach Biologics - parent - company - chief executive - answer")(req)

    def answered(**config: Any) -> tuple[AnswerRecord, str]:
        record, llm = run(demo_index, PARENT_CEO, reply, "hydra-s", w_max=2, w2=200, **config)
        answer = next(r for r in llm.requests if r.stage == "answer")
        return record, answer.messages[-1]["content"]

    record, user = answered(windows_beside_docs=False)
    chosen = record.extra["trace"][0]["selected"]["texts"]
    assert any(t.startswith("{") for t in chosen) and not all(t.startswith("{") for t in chosen)
    assert "read" not in record.extra["trace"][0] and "Caspar Ellwood" not in user
    record, user = answered()  # hydra-s's default
    assert record.extra["trace"][0]["read"] and "Caspar Ellwood" in user
    assert record.prediction == "Caspar Ellwood"
    # doc_answers=spans: the answer is one of the ends' names or the sentences' spans, no topic entity
    llm = run(demo_index, PARENT_CEO, reply, "hydra-s", w_max=2, w2=200, windows_beside_docs=True,
              doc_answers="spans")[1]
    schema = next(r for r in llm.requests if r.stage == "answer").schema
    enum = schema["properties"]["answer"]["enum"]  # type: ignore[index]
    assert enum[0] == "Pharmaceuticals"  # the chosen path's end ("subsidiary of, then main business")
    assert "Caspar Ellwood" in enum and "Saltreach Biologics" not in enum
    free = next(r for r in run(demo_index, PARENT_CEO, reply, "hydra-s", w_max=2, w2=200)[1].requests
                if r.stage == "answer").schema
    assert "enum" not in free["properties"]["answer"]  # type: ignore[operator]


def test_windows_beside_docs_skip_documents_that_restate_the_graph() -> None:
    """`windows_beside_docs` reads no windows beside sentences of documents written from the
    graph's own facts (`--kg-as-docs`, ids "kgdoc-..."): the KG paths offer what they say, and a
    reached film's other facts ("1942") only misled the 0.5B model. The documents of the facts
    `--kg-keep` left out ("dropped-...") state what the graph lacks, and count as documents."""
    def window(chunk_id: str) -> Candidate:
        return Candidate("Jaws: Jaws release year 1975.", ("Jaws",), "wiki",
                         DocPath(Sentence("Jaws release year 1975.", chunk_id, "Jaws", "wiki")))
    path = Candidate("{Jaws} - directed by - {Steven Spielberg}", ("Jaws", "Steven Spielberg"), "kg")
    assert restates_graph("kgdoc-0012419#0") and not restates_graph("dropped-0000003#0")
    assert _graph_text_only([path, window("kgdoc-0000001#0")])
    assert not _graph_text_only([path, window("kgdoc-0000001#0"), window("dropped-0000002#0")])
    assert not _graph_text_only([path, window("hotpot:2506b56e2d085dba#0")])
    assert not _graph_text_only([path])  # no document window


FLAGSHIP_SHARE = Question("flagship-share", "What share of sales does the flagship product of the parent company "
                          "of Saltreach Biologics account for?", ["47 percent"])


def test_answer_forms_give_a_bare_number_as_the_evidence_states_it(demo_index: Path) -> None:
    """`answer_forms` (`hydra-s`'s default): the model answers with a bare number ("34") that the
    sentences it read state only as a measure ("about 34 percent of revenue"); the prediction is
    the figure as stated, and the record says so. `hydra` keeps the model's words."""
    def reply(req: ScriptedRequest) -> Any:
        if req.stage == "answer":
            text = req.messages[-1]["content"]
            stated = [n for n in re.findall(r"\b(\d+) percent", text)
                      if not re.search(rf"(?<![\w.,]){n}(?!\s?percent)(?![\w]|[.,]\d)", text)]
            return {"enough": "Yes", "answer": stated[0] if stated else ""}
        if req.stage == "selection":
            shown = re.findall(r"^(P\d+) (.*)$", req.messages[-1]["content"], re.MULTILINE)
            return {"paths": [pid for pid, _ in shown][:2]}
        return script([("Yes", "")], sources=("kg", "wiki"), prefer=("subsidiary of",),
                      skyline="Saltreach Biologics - parent - company - flagship - share - answer")(req)

    record = run(demo_index, FLAGSHIP_SHARE, reply, "hydra-s", w_max=2, w2=200)[0]
    said = record.extra["answer_text"]
    assert said.isdigit() and record.prediction == f"{said} percent"
    assert record.extra["answer_form"] == f"{said} -> {said} percent"
    kept = run(demo_index, FLAGSHIP_SHARE, reply, "hydra-s", w_max=2, w2=200, answer_forms=False)[0]
    assert kept.prediction == said and "answer_form" not in kept.extra


def test_echo_retry_asks_again_where_the_answer_is_the_question_s_own_words(demo_index: Path) -> None:
    """`echo_retry=spans` (`hydra-s`'s default): the model answers with words the question says
    ("Saltreach Biologics"); the answer call is asked once more, under an enum of the evidence's
    spans that the question does not say, and its answer stands. `off` keeps the echo; a yes/no
    question is never asked again."""
    offered: list[list[str]] = []

    def reply(req: ScriptedRequest) -> Any:
        if req.stage == "selection":
            shown = re.findall(r"^(P\d+) (.*)$", req.messages[-1]["content"], re.MULTILINE)
            paths = [pid for pid, text in shown if "subsidiary of" in text and text.startswith("{")]
            sentences = [pid for pid, text in shown if not text.startswith("{")]
            return {"paths": [*paths[:1], *sentences[:1]]}
        if req.stage == "answer":
            return {"enough": "Yes", "answer": "Saltreach Biologics"}
        if req.stage == "answer_echo":
            enum = req.schema["properties"]["answer"]["enum"]  # type: ignore[index]
            offered.append(enum)
            return {"enough": "Yes", "answer": "Caspar Ellwood" if "Caspar Ellwood" in enum else enum[0]}
        return script([("Yes", "")], sources=("kg", "wiki"), prefer=("subsidiary of",),
                      skyline="Saltreach Biologics - parent - company - chief executive - answer")(req)

    record = run(demo_index, PARENT_CEO, reply, "hydra-s", w_max=2, w2=200)[0]
    assert record.extra["trace"][0]["echo"] == "Saltreach Biologics"
    assert offered and not any("saltreach biologics" in s.lower() for s in offered[0])
    assert record.prediction == "Caspar Ellwood" and stages(record).count("answer_echo") == 1
    kept = run(demo_index, PARENT_CEO, reply, "hydra-s", w_max=2, w2=200, echo_retry="off")[0]
    assert "answer_echo" not in stages(kept) and "echo" not in kept.extra["trace"][0]
    yes_no = Question("yes-no", "Is Saltreach Biologics a subsidiary of Dovrenz Pharma?", ["yes"])
    asked = run(demo_index, yes_no, reply, "hydra-s", w_max=2, w2=200)[0]
    assert "answer_echo" not in stages(asked)


@pytest.mark.parametrize(("question", "answer", "echoes"), [
    ("Where is the host of the reality show, The Island, originally from?", "The Island", True),
    ("Who founded Norvale Motors?", "Norvale Motors", True),
    ("In which city was the board chair of Pellin Rail Freight born?", "Pellin", False),  # part of a longer name
    ("Is Norvale Motors a subsidiary of Lumera Industrial Trust?", "Norvale Motors", False),  # yes/no
    ("Which is older, Norvale Motors or Kestrel Cell Works?", "Norvale Motors", False),  # its own alternatives
    ("Who founded Norvale Motors?", "Oskar Thelling", False),
])
def test_an_echo_is_a_run_of_the_question_s_own_words(question: str, answer: str, echoes: bool) -> None:
    assert answer_echoes(question, answer) is echoes
