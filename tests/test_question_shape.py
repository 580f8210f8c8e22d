"""What a question asks for (`engine/methods/shared/question_shape.py`) and the `chains` scorer terms
that read it: the end set's kind (`asked_type`) and the question's own relation words
(`word_overlap`), on hand-made graphs with the lexical scorer (no model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import networkx as nx
import numpy as np
import pytest

from engine.access.graph import Subgraph
from engine.methods.shared.chain_plans import enumerate_chains
from engine.methods.shared.chain_scoring import ChainScorer, ScoreWeights
from engine.methods.shared.question_shape import (
    asked_class,
    asked_for,
    described_kind,
    described_phrase,
)
from engine.methods.shared.word_forms import (
    converse_forms,
    kin_forms,
    same_word,
    word_form,
    word_list,
    word_stems,
)


@pytest.mark.parametrize(("question", "asked"), [
    ("the films written by X were directed by who", "person"),
    ("who is the sex of father of X 's children ?", "sex of father"),
    ("who did X marry", "person"),
    ("when did the movies acted by X release", "year date"),
    ("where was X born", "place location"),
    ("how many films did X direct", "number"),
    ("what type of film is X", "type of film"),
    ("which directors co-directed movies with X", "directors co directed"),
    ("X 's wife 's father 's nationality is what", "nationality"),
    ("the place of birth of X 's other half 's father ?", "place of birth"),
    ("X", None),
])
def test_the_phrase_a_question_asks_for(question: str, asked: str | None) -> None:
    assert asked_for(question) == asked


def _sub(edges: list[tuple[str, str, str]], topic: str) -> Subgraph:
    graph = nx.MultiDiGraph()
    for s, p, o in edges:
        graph.add_edge(s, o, key=p)
    return Subgraph(graph, [topic], 3)


# An actor's two films, their co-star and their release years.
ACTED = [("Jaws", "starred actors", "Ann"), ("Jaws", "starred actors", "Roy"),
         ("Sting", "starred actors", "Ann"), ("Jaws", "release year", "1975"),
         ("Sting", "release year", "1973")]


def _best(question: str, weights: ScoreWeights) -> list[str]:
    sub = _sub(ACTED, "Ann")
    scorer = ChainScorer("lexical", question, lambda r: r, None, weights, lambda e: e)
    chains = enumerate_chains(sub, "Ann", 2, scorer=scorer)
    return [f"{r}:{d}" for r, d in chains[0].steps]


PLAIN = ScoreWeights(0.0, 0.0, 0.0, 0.0)


def test_the_asked_kind_picks_the_chain_that_ends_at_years() -> None:
    question = "when were the films starred by X released"
    with_kind = ScoreWeights(0.0, 0.0, 0.0, 0.0, asked_type=1.0)
    # "year date" against "release year: 1975, 1973" beats the films the first step reaches
    assert _best(question, with_kind) == ["starred actors:in", "release year:out"]
    assert _best(question, PLAIN) != ["starred actors:in", "release year:out"]  # the term decides


def test_word_overlap_counts_the_steps_the_question_names() -> None:
    sub = _sub(ACTED, "Ann")
    scorer = ChainScorer("lexical", "the films starred by X", lambda r: r, None,
                     ScoreWeights(0.0, 0.0, 0.0, 0.0, word_overlap=1.0), lambda e: e)
    chains = {">".join(f"{r}:{d}" for r, d in c.steps): c
              for c in enumerate_chains(sub, "Ann", 2, scorer=scorer)}
    overlap = {k: scorer._overlap(c) for k, c in chains.items()}
    assert overlap["starred actors:in"] == 1.0
    assert overlap["starred actors:in>release year:out"] == 0.5


@pytest.mark.parametrize(("word", "form"), [
    ("wrote", "writ"), ("written", "writ"), ("writer", "writ"), ("director", "direct"),
    ("directed", "direct"), ("directing", "direct"), ("starred", "star"), ("stars", "star"),
    ("acted", "act"), ("actors", "act"), ("released", "releas"), ("release", "releas"),
])
def test_word_forms_of_one_word_meet(word: str, form: str) -> None:
    assert word_form(word) == form


def test_a_compound_names_its_last_word() -> None:
    assert same_word(word_form("screenwriters"), word_form("written"))
    assert not same_word(word_form("director"), word_form("actors"))
    assert word_stems("who is the director of X") == {"direct"}
    assert word_list("the director of the films directed by X") == ["direct", "film", "direct"]


# A director's film, its writer's other film and that film's actors: "the actors in the films written
# by the writer of the film X directed" names three relations.
WROTE = [("Jaws", "directed by", "Steve"), ("Jaws", "written by", "Pete"), ("Deep", "written by", "Pete"),
         ("Deep", "starred actors", "Nick"), ("Jaws", "starred actors", "Roy")]


def _cover_best(question: str, cover: float) -> list[str]:
    sub = _sub(WROTE, "Jaws")
    relations = sorted({k for _, _, k in sub.graph.edges(keys=True)})
    scorer = ChainScorer("lexical", question, lambda r: r, None,
                     ScoreWeights(0.0, 0.0, 0.0, 0.0, relation_cover=cover), lambda e: e, relations)
    return [f"{r}:{d}" for r, d in enumerate_chains(sub, "Jaws", 3, scorer=scorer)[0].steps]


def test_relation_cover_keeps_the_relations_the_question_names() -> None:
    question = "who acted in the films whose screenwriter also wrote X"
    scorer = ChainScorer("lexical", question, lambda r: r, None, PLAIN, lambda e: e,
                     ["directed by", "written by", "starred actors"])
    assert scorer.relation_words == ["act", "screenwrit", "writ"]
    full = ["written by:out", "written by:in", "starred actors:out"]
    assert _cover_best(question, 1.0) == full
    assert _cover_best(question, 0.0) != full  # without the term, one step ("starred actors") wins


# Two films of a director, two of a writer: "written by, then directed by" and "directed by, then
# written by" name the same two relations in the other order.
ORDERED = [("Jaws", "directed by", "Steve"), ("Jaws", "written by", "Pete"), ("Duel", "directed by", "Steve"),
           ("Duel", "written by", "Rich"), ("Deep", "written by", "Pete"), ("Deep", "directed by", "Ann")]


def _order_scores(question: str, order: float) -> dict[str, float]:
    sub = _sub(ORDERED, "Jaws")
    relations = ["directed by", "written by"]
    scorer = ChainScorer("lexical", question, lambda r: r, None,
                     ScoreWeights(0.0, 0.0, 0.0, 0.0, relation_cover=1.0, relation_order=order), lambda e: e,
                     relations)
    chains = [c for c in enumerate_chains(sub, "Jaws", 3, scorer=scorer) if c.hops == 3]
    return {" > ".join(f"{r}:{d}" for r, d in c.steps): c.score for c in chains}


def test_relation_order_puts_the_relation_named_at_the_mention_first() -> None:
    question = "who directed the films written by the writer of X"
    right = "written by:out > written by:in > directed by:out"
    swapped = "directed by:out > directed by:in > written by:out"
    without, with_order = _order_scores(question, 0.0), _order_scores(question, 1.0)
    assert without[right] == without[swapped]  # relation_cover reads no order
    assert with_order[right] > with_order[swapped]
    # the question word's window names both relations, so only the first step decides here
    assert with_order[right] - with_order[swapped] == pytest.approx(0.5)


def test_relation_order_reads_only_the_question_relation_words() -> None:
    scorer = ChainScorer("lexical", "which films share the director of X", lambda r: r, None, PLAIN, lambda e: e,
                     ["directed by", "written by"])
    assert scorer.near_mention == {"direct"}
    assert scorer.near_question_word == {"direct"}  # "films", "share" name no relation
    assert ChainScorer("lexical", "X", lambda r: r, None, PLAIN, lambda e: e, ["directed by"]).near_mention == set()


# A director who also acts: "directed by, then starred actors (reverse), then starred actors" names
# both relation words of "who starred in the films directed by the director of X", once each.
DIRECTOR_ACTS = [("Jaws", "directed by", "Steve"), ("Duel", "directed by", "Steve"), ("Duel", "starred actors", "Dennis"),
                 ("Hook", "starred actors", "Steve"), ("Hook", "starred actors", "Robin")]


def _count_scores(question: str, counts: bool) -> dict[str, float]:
    sub = _sub(DIRECTOR_ACTS, "Jaws")
    scorer = ChainScorer("lexical", question, lambda r: r, None,
                     ScoreWeights(0.0, 0.0, 0.0, 0.0, relation_cover=1.0, cover_counts=counts), lambda e: e,
                     ["directed by", "starred actors"])
    return {" > ".join(f"{r}:{d}" for r, d in c.steps): c.score for c in enumerate_chains(sub, "Jaws", 3, scorer=scorer)}


def test_cover_counts_asks_for_a_relation_word_as_often_as_it_is_said() -> None:
    question = "who starred in the films directed by the director of X"
    right = "directed by:out > directed by:in > starred actors:out"
    acting_director = "directed by:out > starred actors:in > starred actors:out"
    once, counted = _count_scores(question, False), _count_scores(question, True)
    assert once[right] == once[acting_director]  # both name "direct" and "star"
    # "direct" is said twice: the acting director's chain names it once, so covers 2 of 3
    assert counted[right] - counted[acting_director] == pytest.approx(1 / 3)
    assert counted[right] == once[right]


@pytest.mark.parametrize(("question", "kind"), [
    ("what films did X write", "films"),
    ("which kind of film is X", "kind of film"),
    ("what is the place of birth of X", None),  # "what is the N of X": N names a relation
    ("what is the X 's children 's darling 's sex ?", None),
    ("who is the kid of X", None),
])
def test_the_class_noun_of_a_what_question(question: str, kind: str | None) -> None:
    assert asked_class(question) == kind


class _Vectors:
    """A stand-in for the embedding model: hand-made unit vectors (a word and the relation label it
    means share one), every other text the last axis; no similarity for the other terms."""

    AXES: ClassVar[dict[str, int]] = {"kid": 0, "children": 0, "dad": 1, "parents": 1, "films": 2, "written by": 2}

    def vectors(self, texts: list[str]) -> np.ndarray:
        rows = np.zeros((len(texts), 4))
        for i, text in enumerate(texts):
            if text == "family":  # as close to children as to parents
                rows[i, :2] = 0.5 ** 0.5
            else:
                rows[i, self.AXES.get(text, 3)] = 1.0
        return rows

    def scores(self, query: str, texts: list[str]) -> list[float]:
        return [0.0] * len(texts)


# A woman's son, his father (her husband), the places they were born.
FAMILY = [("Ann", "children", "Bob"), ("Bob", "parents", "Carl"), ("Bob", "parents", "Ann"),
          ("Carl", "place of birth", "Lyon"), ("Ann", "place of birth", "Oslo"), ("Bob", "place of birth", "Rome")]
RELATIONS = ["children", "parents", "place of birth"]


def _meaning(question: str, weight: float) -> ChainScorer:
    return ChainScorer("dense", question, lambda r: r, _Vectors(),  # type: ignore[arg-type]
                       ScoreWeights(0.0, 0.0, 0.06, 0.0, relation_cover=1.0, meaning_cover=weight,
                                    meaning_threshold=0.55), lambda e: e, RELATIONS)


def test_meaning_cover_reads_the_relations_the_question_names_in_other_words() -> None:
    question = "the place of birth of X 's kid 's dad"
    scorer = _meaning(question, 1.0)
    # "kid" and "dad" name relations by meaning; "place of birth" is one mention, not two
    assert [(w, sorted(r)) for w, r in scorer.meaning_words] == [
        ("place birth", ["place of birth"]), ("kid", ["children"]), ("dad", ["parents"])]
    best = enumerate_chains(_sub(FAMILY, "Ann"), "Ann", 3, scorer=scorer)[0]
    assert [r for r, _ in best.steps] == ["children", "parents", "place of birth"]
    assert best.ends == ["Lyon"]
    # without the term the one step the words name lexically ("place of birth") wins: Oslo
    plain = enumerate_chains(_sub(FAMILY, "Ann"), "Ann", 3, scorer=_meaning(question, 0.0))[0]
    assert plain.ends == ["Oslo"]


def test_a_word_said_twice_is_two_mentions_and_a_class_noun_names_no_relation() -> None:
    assert [w for w, _ in _meaning("the parents of X 's parents", 1.0).meaning_words] == ["parents", "parents"]
    # "films" is what "what films ..." asks for: it never names `written by` by meaning
    scorer = ChainScorer("dense", "what films did X direct", lambda r: r, _Vectors(),  # type: ignore[arg-type]
                         ScoreWeights(0.0, 0.0, 0.0, 0.0, meaning_cover=1.0), lambda e: e, ["written by"])
    assert scorer.meaning_words == []


def test_a_word_as_close_to_two_relations_names_neither_with_a_margin() -> None:
    def words(margin: float) -> list[str]:
        scorer = ChainScorer("dense", "who is the family of X 's kid", lambda r: r, _Vectors(),  # type: ignore[arg-type]
                             ScoreWeights(0.0, 0.0, 0.0, 0.0, meaning_cover=1.0, meaning_margin=margin),
                             lambda e: e, RELATIONS)
        return [w for w, _ in scorer.meaning_words]
    assert words(0.0) == ["family", "kid"]  # cosine 0.71 with children and with parents
    assert words(0.1) == ["kid"]


def test_unnamed_step_costs_each_step_no_question_word_names() -> None:
    """"who is the kid of X": `children` is named ("kid", by meaning); a second step (`place of
    birth`, `parents`) is not, and costs `unnamed_step` each, so the one-step chain wins even where
    the other terms cannot tell the chains apart (no hop penalty here)."""
    def scorer(weight: float) -> ChainScorer:
        return ChainScorer("dense", "who is the kid of X", lambda r: r, _Vectors(),  # type: ignore[arg-type]
                           ScoreWeights(0.0, 0.0, 0.0, 0.0, unnamed_step=weight), lambda e: e, RELATIONS)
    named = scorer(0.5)
    assert named.named_relations == {"children"}
    scores = {tuple(r for r, d in c.steps if d == "out"): c.score
              for c in enumerate_chains(_sub(FAMILY, "Ann"), "Ann", 2, scorer=named)
              if all(d == "out" for _, d in c.steps)}
    assert scores[("children",)] == pytest.approx(scores[("children", "place of birth")] + 0.5)
    assert scores[("children",)] == pytest.approx(scores[("children", "parents")] + 0.5)
    # off (the default): the words are not even read, and the steps cost nothing
    assert scorer(0.0).named_relations == set()


def test_unnamed_step_costs_nothing_where_the_question_names_no_relation() -> None:
    scorer = ChainScorer("dense", "who is X", lambda r: r, _Vectors(),  # type: ignore[arg-type]
                         ScoreWeights(0.0, 0.0, 0.0, 0.0, unnamed_step=0.5), lambda e: e, RELATIONS)
    assert scorer.named_relations == set()
    assert {c.score for c in enumerate_chains(_sub(FAMILY, "Ann"), "Ann", 2, scorer=scorer)} == {0.0}


def test_inverse_relations_are_found_from_the_edges() -> None:
    from engine.methods.shared.relation_inverses import inverse_relations

    graph = nx.MultiDiGraph()
    for parent, child in [("Ann", "Bob"), ("Ann", "Cy"), ("Dan", "Eve"), ("Fay", "Gus")]:
        graph.add_edge(parent, child, key="children")
        graph.add_edge(child, parent, key="parents")
    graph.add_edge("Ann", "Dan", key="spouse")
    graph.add_edge("Dan", "Ann", key="spouse")  # its own inverse: no entry
    graph.add_edge("Bob", "Ann", key="place of birth")  # one pair with children: too few
    assert inverse_relations(graph) == {"children": "parents", "parents": "children"}
    assert inverse_relations(graph, min_pairs=5) == {}


def test_inverse_relations_over_the_whole_graph(tmp_path: Path) -> None:
    """`graph_inverses` (`inverse_scope=graph`): a question's neighbourhood holds one parents /
    children pair, too few to tell (`inverse_relations` of it finds nothing); the whole graph holds
    four, so `children (reverse)` reads as `parents` for every question. Each relation's facts are
    read once per KG."""
    from engine.access.graph import subgraph_within
    from engine.access.oxigraph_kg import OxigraphKG
    from engine.methods.shared.relation_inverses import graph_inverses, inverse_relations
    from index.build import build_index
    from index.kg_stage import KgSource
    from index.paths import IndexPaths
    from ingest.terms import mint_entity, mint_relation

    rows = [f"{p}\tchildren\t{c}\n{c}\tparents\t{p}\n" for p, c in
            [("Ann", "Bob"), ("Cy", "Dan"), ("Eve", "Fay"), ("Gus", "Hal")]]
    (tmp_path / "kb.tsv").write_text("".join(rows) + "Ann\tspouse\tIda\nIda\tspouse\tAnn\n", encoding="utf-8")
    build_index(tmp_path / "ix", [KgSource(tmp_path / "kb.tsv", "tsv")], [])
    kg = OxigraphKG.open(IndexPaths(tmp_path / "ix"))
    children, parents = mint_relation("children"), mint_relation("parents")
    sub = subgraph_within(kg, [mint_entity("Ann")], 1)
    assert inverse_relations(sub.graph) == {}
    assert graph_inverses(kg, [children]) == {children: parents, parents: children}
    calls: list[str] = []
    real = kg.back_relations

    def counted(relation: str, limit: int) -> Any:
        calls.append(relation)
        return real(relation, limit)

    kg.back_relations = counted  # type: ignore[method-assign]
    assert graph_inverses(kg, [parents, children]) == {children: parents, parents: children}
    assert calls == []  # read once per KG


def test_a_reverse_step_reads_as_its_inverse() -> None:
    """"who is the kid of X" over a graph that states only `parents`: with the inverse, the
    reverse step names `children` ("kid") and wins the meaning term."""
    edges = [("Bob", "parents", "Ann"), ("Bob", "place of birth", "Rome"), ("Ann", "place of birth", "Oslo")]

    def best(inverses: dict[str, str]) -> float:
        scorer = ChainScorer("dense", "who is the kid of X", lambda r: r, _Vectors(),  # type: ignore[arg-type]
                             ScoreWeights(0.0, 0.0, 0.0, 0.0, meaning_cover=1.0), lambda e: e,
                             ["parents", "place of birth", "children"], inverses)
        chains = enumerate_chains(_sub(edges, "Ann"), "Ann", 1, scorer=scorer)
        return next(c.score for c in chains if c.steps == (("parents", "in"),))
    assert best({}) == 0.0
    assert best({"parents": "children"}) == 1.0


def test_a_relation_contained_in_another_s_reverse_is_not_its_inverse() -> None:
    from engine.methods.shared.relation_inverses import inverse_relations

    graph = nx.MultiDiGraph()
    for country, cities in [("France", ["Paris", "Lyon", "Nice", "Lille"]), ("Italy", ["Rome", "Milan", "Turin"]),
                            ("Spain", ["Madrid", "Seville", "Bilbao"])]:
        graph.add_edge(country, cities[0], key="capital")
        for city in cities:
            graph.add_edge(city, country, key="located in")
    # every capital edge has a located-in edge back, 3 of the 10 located-in edges a capital edge
    assert inverse_relations(graph) == {}
    assert inverse_relations(graph, balance=4.0) == {"capital": "located in", "located in": "capital"}


# A company with a parent and a sibling: "Cell" is a subsidiary of "Trust", as is "Port".
COMPANIES = [("Cell", "subsidiary of", "Trust"), ("Port", "subsidiary of", "Trust"), ("Cell", "sibling company", "Port"),
             ("Trust", "headquartered in", "Lumera"), ("Port", "headquartered in", "Amarant")]
COMPANY_RELATIONS = ["subsidiary of", "sibling company", "headquartered in"]


def _kinds(question: str, on: bool) -> ChainScorer:
    # the stand-in embedding model: no similarity, so only the word terms score
    return ChainScorer("dense", question, lambda r: r, _Vectors(),  # type: ignore[arg-type]
                       ScoreWeights(0.0, 0.0, 0.06, 0.0, word_overlap=0.3, relation_cover=1.0, cover_counts=True,
                                    kind_nouns=on), lambda e: e, COMPANY_RELATIONS)


@pytest.mark.parametrize("question", [
    "which company is the parent company of X",  # asked for, and the head of another compound
    "in which city is the company that owns X headquartered",  # described by a relative clause
    "in which city is the company founded by X headquartered",  # by a participle
    "which mining company owns X",  # the head of a compound with another modifier
])
def test_a_kind_noun_does_not_name_a_relation_of_several_words(question: str) -> None:
    scorer = _kinds(question, True)
    assert ("compan", "sibling company") in scorer.foreign
    assert "compan" not in scorer.relation_words
    assert "sibling company" in scorer.foreign_relations
    # before the option, "company" named `sibling company` wherever the question said it
    assert "compan" in _kinds(question, False).relation_words


@pytest.mark.parametrize("question", [
    "which company is recorded as a sibling company of X",  # the label's other word is said
    "who is the sibling company of X",
])
def test_a_relation_whose_whole_label_is_said_stays_named(question: str) -> None:
    scorer = _kinds(question, True)
    assert scorer.foreign == set()
    assert "compan" in scorer.relation_words and "sibl" in scorer.relation_words


def test_a_head_said_as_a_kind_and_in_the_label_counts_once() -> None:
    """"which company is recorded as a sibling company of X": "company" after "which" is the kind
    asked for, in "sibling company" the relation. Counted twice, it asked for two `sibling company`
    steps, and the loop `sibling company, then subsidiary of, then sibling company (reverse)`
    covered the question better than the one step."""
    question = "which company is recorded as a sibling company of X"
    scorer = ChainScorer("dense", question, lambda r: r, _Vectors(),  # type: ignore[arg-type]
                         ScoreWeights(0.0, 0.0, 0.06, 0.0, word_overlap=0.3, relation_cover=1.0, cover_counts=True,
                                      kind_nouns=True, kind_once=True), lambda e: e, COMPANY_RELATIONS)
    assert scorer.said_times["compan"] == 1 and scorer.kind_at == {1}
    chains = {tuple(r for r, _ in c.steps): c.score
              for c in enumerate_chains(_sub(COMPANIES, "Cell"), "Cell", 3, scorer=scorer)}
    assert max(chains, key=chains.__getitem__) == ("sibling company",)
    before = _kinds(question, True)  # kind_nouns alone: twice, and the loop wins
    assert before.said_times["compan"] == 2 and before.kind_at == set()


def test_a_label_of_one_content_word_and_a_modifier_word_stay_named() -> None:
    # "what language": `in language` has no other content word; "release" is the modifier of
    # `release year`, never blocked as a kind noun
    scorer = ChainScorer("lexical", "what language is the film whose director release X", lambda r: r, None,
                         ScoreWeights(0.0, 0.0, 0.0, 0.0, relation_cover=1.0, kind_nouns=True), lambda e: e,
                         ["in language", "release year", "directed by"])
    assert scorer.foreign == set()
    assert scorer.relation_words == ["direct", "languag", "releas"]


def test_kind_nouns_keep_the_sibling_loop_from_answering_for_a_parent() -> None:
    """"which company is the parent company of X": with "company" (said twice) read as a relation
    word, chains through `sibling company` cover it and win; read as a kind noun, it pays them no
    `relation_cover` and no `word_overlap`: no word terms tell the two relations apart any more
    (the dense terms decide, off here)."""
    def scores(on: bool) -> dict[tuple[str, ...], float]:
        scorer = _kinds("which company is the parent company of X", on)
        return {tuple(r for r, _ in c.steps): c.score for c in enumerate_chains(_sub(COMPANIES, "Cell"), "Cell", 3, scorer=scorer)}
    off, on = scores(False), scores(True)
    assert "sibling company" in max(off, key=off.__getitem__)
    assert off[("sibling company",)] > off[("subsidiary of",)]
    assert on[("subsidiary of",)] == on[("sibling company",)] == max(on.values())


def test_the_question_relations_are_read_even_where_no_term_weighs_them() -> None:
    """`question_relations` (what `chains`' `evidence_last=named` asks): the relations the words
    name, the same with `meaning_cover` off, where the scorer itself does not read them."""
    def scorer(weight: float) -> ChainScorer:
        return ChainScorer("dense", "who is the kid of X", lambda r: r, _Vectors(),  # type: ignore[arg-type]
                           ScoreWeights(0.0, 0.0, 0.0, 0.0, meaning_cover=weight), lambda e: e, RELATIONS)
    assert scorer(1.0).question_relations() == {"children"}
    off = scorer(0.0)
    assert off.named_relations == set()  # not read for the scores
    assert off.question_relations() == {"children"}


def _converse(question: str, on: bool, relations: list[str] = COMPANY_RELATIONS) -> ChainScorer:
    return ChainScorer("dense", question, lambda r: r, _Vectors(),  # type: ignore[arg-type]
                       ScoreWeights(0.0, 0.0, 0.06, 0.0, word_overlap=0.3, relation_cover=1.0, cover_counts=True,
                                    kind_nouns=True, converse_nouns=on), lambda e: e, relations)


@pytest.mark.parametrize(("word", "other_side"), [
    ("subsidiary", {"parent"}), ("parents", {"subsidiar", "child", "offspr"}), ("children", {"parent"}),
    ("supplier", {"custom"}), ("employer", set()), ("director", set()),
])
def test_converse_nouns_are_english_pairs(word: str, other_side: set[str]) -> None:
    # "employer" and "employee" share a form: one names both sides without the table
    assert converse_forms(word_form(word)) == other_side


def test_a_converse_noun_names_the_relation_the_graph_labels_from_the_other_side() -> None:
    """"the parent company of X": the graph says `X subsidiary of Y`. With `converse_nouns`
    "parent" names `subsidiary of`, and the one-step chain wins alone; without it no word names a
    relation (`kind_nouns` leaves "company" to the kind) and every chain ties on the word terms."""
    def scores(on: bool) -> dict[tuple[str, ...], float]:
        scorer = _converse("which company is the parent company of X", on)
        return {tuple(r for r, _ in c.steps): c.score for c in enumerate_chains(_sub(COMPANIES, "Cell"), "Cell", 3, scorer=scorer)}
    assert _converse("which company is the parent company of X", True).relation_words == ["parent"]
    assert _converse("which company is the parent company of X", False).relation_words == []
    on, off = scores(True), scores(False)
    assert max(on, key=on.__getitem__) == ("subsidiary of",)
    assert on[("subsidiary of",)] > on[("sibling company",)]
    assert off[("subsidiary of",)] == off[("sibling company",)]


def test_a_graph_that_names_both_sides_keeps_its_own_labels() -> None:
    # PathQuestion's kinship: `parents` and `children` are both relations, so "parent" names
    # `parents` alone, and "offspring" (a word of the other side) does not name `parents`
    relations = ["parents", "children", "spouse"]
    parent = _converse("who is the parent of X", True, relations)
    assert parent.relation_words == ["parent"]
    assert [r for r in relations if parent._names({"parent"}, r)] == ["parents"]
    assert _converse("who is the offspring of X", True, relations).relation_words == []


@pytest.mark.parametrize(("question", "found"), [
    ("which company is the parent of the steel maker that supplies X?", ("steel maker that supplies", "maker")),
    ("in which town is the main plant of the wind turbine maker founded by X?",
     ("wind turbine maker founded by", "maker")),
    ("what is the flagship product of the telecommunications company that X completed a deal with?",
     ("telecommunications company that", "company")),
    ("which company is the parent company of X?", None),  # no clause: "of X"
    ("what movies was X the writer of", None),  # no determiner before X
])
def test_the_description_of_the_entities_next_to_the_topic(question: str, found: tuple[str, str] | None) -> None:
    assert described_phrase(question) == found


@pytest.mark.parametrize(("question", "found"), [
    ("which mining company supplies X?", "mining company"),  # "supplies" names `supplier of`
    ("which American film director directed X", "american film director"),  # a participle ends it
    ("on which stock exchange is X listed?", "stock exchange"),
    ("which company supplies X?", None),  # the noun alone
    ("what kind of film is X", None),  # "of" ends it after one word
    ("which company owns the maker of X", None),  # a present-tense verb after the noun
    ("which mining companies supply X", None),  # a plural after a modifier reads as a verb: nothing
    ("which big old red mining company supplies X", None),  # longer than four words
    ("who founded X", None),
])
def test_the_description_of_the_kind_asked_for(question: str, found: str | None) -> None:
    assert described_kind(question, lambda w: w in ("supplies", "supply")) == found


def _direction(question: str, relations: list[str], weight: float = 1.0) -> ChainScorer:
    return ChainScorer("dense", question, lambda r: r, _Vectors(),  # type: ignore[arg-type]
                       ScoreWeights(0.0, 0.0, 0.0, 0.0, converse_nouns=True, step_direction=weight), lambda e: e,
                       relations)


@pytest.mark.parametrize(("question", "relation", "direction"), [
    ("which company supplies X", "supplier of", "in"),  # X the object; `A supplier of B`
    ("who is the supplier of X", "supplier of", "in"),
    ("which company is the parent of X", "subsidiary of", "out"),  # a converse noun
    ("which company is a subsidiary of X", "subsidiary of", "in"),
    ("who directed X", "directed by", "out"),  # X the object; `film directed by person`
    ("who is the director of X", "directed by", "out"),
    ("which films were directed by X", "directed by", "in"),  # X the agent
    ("what does the company founded by X make", "founded by", "in"),
    ("what is the genre of X", "directed by", None),  # the words do not name the relation
])
def test_the_first_step_goes_the_way_the_words_around_the_mention_say(question: str, relation: str,
                                                                       direction: str | None) -> None:
    assert _direction(question, [relation])._expected_direction(relation) == direction


def test_step_direction_ranks_the_step_the_grammar_asks_for_first() -> None:
    # "which company supplies X": Cell supplies Port and Port supplies Trust; from Port the
    # supplier is Cell (a step in), not Trust (out)
    edges = [("Cell", "supplier of", "Port"), ("Port", "supplier of", "Trust")]
    def scores(weight: float) -> dict[tuple[str, ...], float]:
        scorer = _direction("which company supplies X", ["supplier of"], weight)
        return {tuple(f"{r} {d}" for r, d in c.steps): c.score
                for c in enumerate_chains(_sub(edges, "Port"), "Port", 1, scorer=scorer)}
    on, off = scores(1.0), scores(0.0)
    assert on[("supplier of in",)] == 1.0 and on[("supplier of out",)] == 0.0
    assert off[("supplier of in",)] == off[("supplier of out",)]


@pytest.mark.parametrize(("general", "kin"), [
    ("children", {"son", "daughter", "kid"}),
    ("parents", {"father", "mother", "dad", "mom"}),
    ("spouse", {"husband", "wife"}),
    ("director", set()),  # not a kin noun
])
def test_kin_forms_are_the_gendered_and_informal_kin_nouns(general: str, kin: set[str]) -> None:
    assert kin_forms(word_form(general)) >= {word_form(w) for w in kin}
    assert bool(kin_forms(word_form(general))) == bool(kin)


@pytest.mark.parametrize(("general", "synonyms"), [
    ("children", {"heir", "descendant", "progeny", "scion"}),
    ("spouse", {"partner", "consort", "mate"}),
    ("parents", set()),
])
def test_kin_synonyms_are_read_only_when_asked(general: str, synonyms: set[str]) -> None:
    forms = {word_form(w) for w in synonyms}
    assert kin_forms(word_form(general), synonyms=True) >= forms | kin_forms(word_form(general))
    assert not kin_forms(word_form(general)) & forms


def _kin(question: str, on: bool, synonyms: bool = False) -> ChainScorer:
    return ChainScorer("lexical", question, lambda r: r, None,
                       ScoreWeights(0.0, 0.0, 0.0, 0.0, relation_cover=1.0, cover_counts=True, kin_terms=on,
                                    kin_synonyms=synonyms),
                       lambda e: e, RELATIONS)


def test_a_kin_synonym_names_the_relation_of_its_general_noun() -> None:
    question = "what is the place of birth of the heir of X"
    assert _kin(question, True, synonyms=True).relation_words == ["birth", "heir", "plac"]
    assert _kin(question, True).relation_words == ["birth", "plac"]


def test_kin_synonyms_cover_the_step_through_the_heir() -> None:
    # "the place of birth of X 's heir": Ann's child Bob, then his place of birth (Rome); without
    # the option "heir" names nothing and Ann's own place of birth covers the whole question
    def cover(synonyms: bool) -> dict[tuple[tuple[str, str], ...], float]:
        scorer = _kin("what is the place of birth of X 's heir", True, synonyms)
        return {c.steps: scorer._cover(c) for c in enumerate_chains(_sub(FAMILY, "Ann"), "Ann", 2, scorer=scorer)}
    through, own = (("children", "out"), ("place of birth", "out")), (("place of birth", "out"),)
    assert cover(True)[through] == 1.0 and cover(True)[own] == pytest.approx(2 / 3)
    assert cover(False)[through] == cover(False)[own] == 1.0


def test_a_gendered_kin_noun_names_the_relation_of_its_general_noun() -> None:
    question = "what is the place of birth of the father of the son of X"
    assert _kin(question, True).relation_words == ["birth", "fath", "plac", "son"]
    assert _kin(question, False).relation_words == ["birth", "plac"]  # before the option: only by meaning


def _best_steps(facts: list[tuple[str, str, str]], topic: str, scorer: ChainScorer) -> list[tuple[tuple[str, str], ...]]:
    """The steps of every chain (up to 2 hops from `topic`) that ties for the best score."""
    chains = enumerate_chains(_sub(facts, topic), topic, 2, scorer=scorer)
    top = max(c.score for c in chains)
    return [c.steps for c in chains if c.score == top]


def test_kin_terms_rank_the_chain_of_the_kin_nouns_said_first() -> None:
    # "the father of the son of X": Ann's child Bob, then his parents (Carl, Ann); without the
    # option the words name nothing of the subgraph and every chain ties on the word terms
    def best(on: bool) -> list[tuple[tuple[str, str], ...]]:
        return _best_steps(FAMILY, "Ann", _kin("who is the father of the son of X", on))
    assert best(True) == [(("children", "out"), ("parents", "out"))]
    assert len(best(False)) > 1


def _same(question: str, on: bool) -> ChainScorer:
    return ChainScorer("lexical", question, lambda r: r, None,
                       ScoreWeights(0.0, 0.0, 0.06, 0.0, relation_cover=1.0, cover_counts=True, same_twice=on),
                       lambda e: e, ["starred actors", "release year"])


def test_the_same_noun_asks_for_its_relation_there_and_back() -> None:
    # "which films share the same actor of Jaws": Jaws's actors, then their films (Sting)
    def best(on: bool) -> list[tuple[tuple[str, str], ...]]:
        return _best_steps(ACTED, "Jaws", _same("which films share the same actor of X", on))
    assert best(True) == [(("starred actors", "out"), ("starred actors", "in"))]
    assert best(False) == [(("starred actors", "out"),)]  # "actor" said once: one step, the hop penalty decides
    assert _same("who starred in X", True).said_total == _same("who starred in X", False).said_total  # no "same"


def _unasked(question: str, weight: float) -> ChainScorer:
    return ChainScorer("lexical", question, lambda r: r, None,
                       ScoreWeights(0.0, 0.0, 0.0, 0.0, relation_cover=1.0, cover_counts=True, meaning_cover=0.5,
                                    kind_nouns=True, unasked_last=weight),
                       lambda e: e, ["directed by", "written by", "starred actors", "has genre"])


def test_unasked_last_costs_a_last_step_no_word_asks_for() -> None:
    # "what movies was Pete the writer of": the films Pete wrote (Jaws, Deep); on to their actors,
    # which no word asks for, costs the weight
    def scores(weight: float) -> dict[tuple[tuple[str, str], ...], float]:
        scorer = _unasked("what movies was X the writer of", weight)
        return {c.steps: c.score for c in enumerate_chains(_sub(WROTE, "Pete"), "Pete", 2, scorer=scorer)}
    wrote, actors = (("written by", "in"),), (("written by", "in"), ("starred actors", "out"))
    on, off = scores(0.5), scores(0.0)
    assert on[wrote] == off[wrote]
    assert on[actors] == pytest.approx(off[actors] - 0.5)


@pytest.mark.parametrize("question", [
    "what types are the movies written by X",  # a classifier noun asks for a relation it does not name
    "what is the couple of the writer of X",  # "couple" names nothing the scorer places: it may ask for the step
    "what films are about X",  # names no relation: unnamed_hops weighs those
])
def test_unasked_last_spares_a_question_with_words_left_over(question: str) -> None:
    scorer = _unasked(question, 0.5)
    chains = enumerate_chains(_sub(WROTE, "Pete"), "Pete", 2, scorer=scorer)
    assert all(scorer._unasked_last(c) == 0.0 for c in chains)


def test_unasked_last_counts_a_word_once_per_step() -> None:
    # "what movies did Pete write" says `written by` once: its first step uses it, so on through
    # `written by` again to the co-writers (Lou) is not asked for
    facts = [*WROTE, ("Deep", "written by", "Lou")]
    scorer = _unasked("what movies did X write", 0.5)
    cost = {c.steps: scorer._unasked_last(c) for c in enumerate_chains(_sub(facts, "Pete"), "Pete", 2, scorer=scorer)}
    assert cost[(("written by", "in"),)] == 0.0
    assert cost[(("written by", "in"), ("written by", "out"))] == 1.0
