"""HydraRAG's evidence pruning (engine/methods/hydra/score.py) on hand-made paths and vectors.

Every expected value is computed by hand from the formulas of the paper's §4.3 / Algorithm 4.
Vectors are chosen so that cosines are simple: unit axes (cos 0 or 1) and (0.8, 0.6, 0) style
rows (cos 0.8 with the x axis).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from engine.methods.hydra.score import (
    SCORE_DEFAULTS,
    Candidate,
    ScoreConfig,
    entity_alignment,
    jaccard,
    prune,
    relevance_scores,
    source_prior,
    support_score,
    top,
)

THIRD = 1 / 3


def table(rows: dict[str, Sequence[float]]):
    """A `vectors` function that looks texts up in `rows` and counts its calls."""
    calls: list[list[str]] = []

    def vectors(texts: Sequence[str]) -> np.ndarray:
        calls.append(list(texts))
        return np.array([rows[t] for t in texts], dtype=float)

    vectors.calls = calls  # type: ignore[attr-defined]
    return vectors


def by_text(scored):
    return {s.candidate.text: s for s in scored}


# --- the single formulas ----------------------------------------------------------------------

def test_jaccard_is_set_overlap_with_case_and_space_folded() -> None:
    assert jaccard(["Tom Hanks", "Big"], ["tom  hanks", "Penny Marshall", "1988"]) == pytest.approx(1 / 4)
    assert jaccard(["A", "A"], ["a"]) == 1.0
    assert jaccard([], []) == 0.0


def test_source_prior_is_the_paper_rho_and_rejects_unknown_sources() -> None:
    priors = ScoreConfig().priors
    assert [source_prior(s, priors) for s in ("kg", "wiki", "web")] == [1.0, 0.8, 0.7]
    with pytest.raises(ValueError, match="unknown evidence source 'forum'"):
        source_prior("forum", priors)


def test_support_paper_is_min_of_supporting_sources_and_w_max_over_w_max() -> None:
    config = ScoreConfig()
    assert [support_score(9, n, config) for n in range(5)] == pytest.approx([0, THIRD, 2 * THIRD, 1, 1])
    assert support_score(0, 1, ScoreConfig(w_max=2)) == 0.5


def test_support_code_maps_0_1_2_3plus_paths_to_06_to_09() -> None:
    config = ScoreConfig(support="code")
    assert [support_score(n, 0, config) for n in range(6)] == [0.6, 0.7, 0.8, 0.9, 0.9, 0.9]


def test_entity_alignment_is_share_of_distinct_path_entities_in_the_subgraph() -> None:
    assert entity_alignment(("A", "B", "C", "a"), {"a", "c", "Z"}) == pytest.approx(2 / 3)
    assert entity_alignment((), {"A"}) == 0.0


def test_top_breaks_ties_by_input_position() -> None:
    assert top([0, 1, 2, 3], [0.5, 0.9, 0.5, 0.9], 3) == [1, 3, 0]


# --- prune: relevance (step 1) -----------------------------------------------------------------

def relevance_pool():
    rows = {"I": (1, 0, 0), "p1": (1, 0, 0), "p2": (0.8, 0.6, 0), "p3": (0, 1, 0), "p4": (0.6, 0.8, 0)}
    pool = [Candidate("p1", ("X", "Y", "Z"), "kg"), Candidate("p2", ("X",), "kg"),
            Candidate("p3", ("X", "Y"), "kg"), Candidate("p4", (), "kg")]
    return rows, pool


def test_relevance_paper_is_lambda_sem_cosine_plus_rest_jaccard() -> None:
    rows, pool = relevance_pool()
    pruned = prune(pool, "I", ["X", "Y"], set(), table(rows), ScoreConfig())
    got = {s.candidate.text: s.relevance for s in pruned.after_relevance}
    # p1: .7*1 + .3*|{X,Y}|/|{X,Y,Z}| ; p2: .7*.8 + .3*1/2 ; p3: .7*0 + .3*1 ; p4: .7*.6 + 0
    assert got == pytest.approx({"p1": 0.7 + 0.2, "p2": 0.56 + 0.15, "p3": 0.3, "p4": 0.42})
    assert [s.candidate.text for s in pruned.after_relevance] == ["p1", "p2", "p4", "p3"]


def test_relevance_cosine_option_ignores_entities() -> None:
    rows, pool = relevance_pool()
    pruned = prune(pool, "I", ["X", "Y"], set(), table(rows), ScoreConfig(relevance="cosine"))
    got = {s.candidate.text: s.relevance for s in pruned.after_relevance}
    assert got == pytest.approx({"p1": 1.0, "p2": 0.8, "p3": 0.0, "p4": 0.6})


def test_lambda_sem_one_is_cosine_only() -> None:
    rows, pool = relevance_pool()
    pruned = prune(pool, "I", ["X", "Y"], set(), table(rows), ScoreConfig(lambda_sem=1.0))
    assert [round(s.relevance, 6) for s in pruned.after_relevance] == [1.0, 0.8, 0.6, 0.0]


def test_top_w1_cuts_by_relevance_and_only_the_pool_is_verified() -> None:
    rows, pool = relevance_pool()
    pruned = prune(pool, "I", ["X", "Y"], set(), table(rows), ScoreConfig(w1=2, w2=5))
    assert [s.candidate.text for s in pruned.after_relevance] == ["p1", "p2"]
    assert [s.candidate.text for s in pruned.after_cross] == ["p1", "p2"]


# --- prune: verification and cross-score (step 2) ----------------------------------------------

def cross_pool():
    """k1 (kg) agrees with w1 (wiki, cos .8) and with b1 (web, cos .8); w1 and b1 agree (cos .28)
    only below gamma; k2 (kg) stands alone; k3 (kg) duplicates k1 but is the same source."""
    rows = {"I": (1, 0, 0, 0), "k1": (1, 0, 0, 0), "w1": (0.8, 0.6, 0, 0), "b1": (0.8, -0.6, 0, 0),
            "k2": (0, 0, 1, 0), "k3": (1, 0, 0, 0)}
    pool = [Candidate("k1", ("A", "B"), "kg"), Candidate("w1", ("A", "Q"), "wiki"),
            Candidate("b1", ("A",), "web"), Candidate("k2", ("B",), "kg"),
            Candidate("k3", ("A", "B"), "kg")]
    return rows, pool


def test_support_counts_other_source_types_above_gamma() -> None:
    rows, pool = cross_pool()
    scored = by_text(prune(pool, "I", ["A"], {"A", "B"}, table(rows), ScoreConfig()).after_relevance)
    assert scored["k1"].support_sources == ("web", "wiki")
    assert scored["k1"].support == pytest.approx(2 / 3)
    assert scored["k3"].support_sources == ("web", "wiki")  # k1 is kg: no support from its own kind
    assert scored["w1"].support_sources == ("kg",)          # k1 and k3 are one source type
    assert scored["w1"].support == pytest.approx(1 / 3)
    assert scored["b1"].support_sources == ("kg",)          # w1 at cos .28 < gamma .8
    assert scored["k2"].support_sources == () and scored["k2"].support == 0.0


def test_support_looks_only_inside_the_w1_pool() -> None:
    rows = {"I": (1, 0, 0), "top": (1, 0, 0), "k1": (0.6, 0.8, 0), "w1": (0.6, 0.8, 0)}
    pool = [Candidate("top", (), "kg"), Candidate("k1", (), "kg"), Candidate("w1", (), "wiki")]
    config = ScoreConfig(relevance="cosine", w1=2)
    cut = by_text(prune(pool, "I", [], set(), table(rows), config).after_relevance)
    assert set(cut) == {"top", "k1"}  # w1 ties with k1 and comes later: cut at W1
    assert cut["k1"].support_sources == () and cut["k1"].support == 0.0
    whole = by_text(prune(pool, "I", [], set(), table(rows), ScoreConfig(relevance="cosine")).after_relevance)
    assert whole["k1"].support_sources == ("wiki",) and whole["k1"].support == pytest.approx(1 / 3)


def test_relevance_scores_alone_keep_input_order() -> None:
    rows, pool = relevance_pool()
    assert relevance_scores(pool, "I", ["X", "Y"], table(rows), ScoreConfig()) == pytest.approx(
        [0.9, 0.71, 0.3, 0.42])
    assert relevance_scores([], "I", ["X"], table({}), ScoreConfig()) == []


def test_gamma_decides_agreement() -> None:
    rows, pool = cross_pool()
    loose = by_text(prune(pool, "I", ["A"], set(), table(rows), ScoreConfig(gamma=0.2)).after_relevance)
    assert loose["w1"].support_sources == ("kg", "web")
    strict = by_text(prune(pool, "I", ["A"], set(), table(rows), ScoreConfig(gamma=0.9)).after_relevance)
    assert strict["k1"].support_sources == () and strict["k1"].support == 0.0


def test_support_code_option_counts_agreeing_paths() -> None:
    rows, pool = cross_pool()
    scored = by_text(prune(pool, "I", ["A"], set(), table(rows),
                           ScoreConfig(support="code")).after_relevance)
    # w1 is supported by two kg paths (k1, k3): 2 -> 0.8; k1 by w1 and b1: 2 -> 0.8; k2 by none
    assert (scored["w1"].support, scored["k1"].support, scored["k2"].support) == (0.8, 0.8, 0.6)


def test_alignment_paper_and_code_options() -> None:
    rows, pool = cross_pool()
    paper = by_text(prune(pool, "I", ["A"], {"a", "B"}, table(rows), ScoreConfig()).after_relevance)
    assert (paper["k1"].alignment, paper["w1"].alignment, paper["b1"].alignment) == (1.0, 0.5, 1.0)
    code = by_text(prune(pool, "I", ["A"], {"a", "B"}, table(rows),
                         ScoreConfig(alignment="code")).after_relevance)
    # a kg path is a KG fact: 1; w1's best cosine to a kg path is .8 (k1, k3); b1's too
    assert code["k2"].alignment == 1.0
    assert code["w1"].alignment == pytest.approx(0.8) and code["b1"].alignment == pytest.approx(0.8)


def test_verification_and_cross_score_by_hand() -> None:
    rows, pool = cross_pool()
    scored = by_text(prune(pool, "I", ["A"], {"A", "B"}, table(rows), ScoreConfig()).after_relevance)
    w1 = scored["w1"]
    # relevance: .7*.8 + .3*J({A},{A,Q}) = .56 + .15; verification: (.8 + 1/3 + 1/2) / 3
    assert w1.relevance == pytest.approx(0.71)
    assert w1.verification == pytest.approx((0.8 + 1 / 3 + 0.5) / 3)
    assert w1.cross == pytest.approx(0.7 * 0.71 + 0.3 * (0.8 + 1 / 3 + 0.5) / 3)
    k1 = scored["k1"]  # relevance .7 + .3/2 ; verification (1 + 2/3 + 1) / 3
    assert k1.cross == pytest.approx(0.7 * 0.85 + 0.3 * (1 + 2 / 3 + 1) / 3)


def test_alpha_weights_and_alpha_cross_are_applied() -> None:
    rows, pool = cross_pool()
    config = ScoreConfig(alpha_k=(1.0, 0.0, 0.0), alpha_cross=0.0)
    scored = by_text(prune(pool, "I", ["A"], {"A"}, table(rows), config).after_relevance)
    assert {t: s.cross for t, s in scored.items()} == pytest.approx(
        {"k1": 1.0, "w1": 0.8, "b1": 0.7, "k2": 1.0, "k3": 1.0})
    ranked = prune(pool, "I", ["A"], {"A"}, table(rows), config).after_cross
    # ties at 1.0 keep input order (k1, k2, k3); then wiki, then web
    assert [s.candidate.text for s in ranked] == ["k1", "k2", "k3", "w1", "b1"]


def test_top_w2_by_cross_score_differs_from_relevance_order() -> None:
    rows = {"I": (1, 0, 0), "web": (0.9, 0.43589, 0), "kg": (0.85, 0.52678, 0)}
    pool = [Candidate("web", ("Z",), "web"), Candidate("kg", ("Z",), "kg")]
    pruned = prune(pool, "I", ["A"], {"Z"}, table(rows), ScoreConfig(w2=1, gamma=0.999))
    assert [s.candidate.text for s in pruned.after_relevance] == ["web", "kg"]
    # web: .7*.63 + .3*(.7+0+1)/3 = .611 ; kg: .7*.595 + .3*(1+0+1)/3 = .6165
    assert [s.candidate.text for s in pruned.after_cross] == ["kg"]


def test_empty_pool_embeds_nothing() -> None:
    vectors = table({})
    pruned = prune([], "I", ["A"], set(), vectors, ScoreConfig())
    assert pruned.after_relevance == [] and pruned.after_cross == []
    assert vectors.calls == []  # type: ignore[attr-defined]


def test_one_embedding_call_for_indicator_and_paths_and_unnormalised_rows_are_normalised() -> None:
    vectors = table({"I": (2, 0), "a": (0, 3), "b": (5, 0)})
    pool = [Candidate("a", (), "kg"), Candidate("b", (), "kg")]
    pruned = prune(pool, "I", [], set(), vectors, ScoreConfig(relevance="cosine"))
    assert vectors.calls == [["I", "a", "b"]]  # type: ignore[attr-defined]
    assert [(s.candidate.text, s.relevance) for s in pruned.after_relevance] == [("b", 1.0), ("a", 0.0)]


def test_as_dict_carries_scores_and_source() -> None:
    rows, pool = cross_pool()
    item = by_text(prune(pool, "I", ["A"], {"A"}, table(rows), ScoreConfig()).after_relevance)["w1"]
    d = item.as_dict()
    assert d["text"] == "w1" and d["source"] == "wiki" and d["support_sources"] == ["kg"]
    assert set(d) >= {"relevance", "prior", "support", "alignment", "verification", "cross"}


def test_from_config_reads_exactly_the_agreed_keys() -> None:
    assert set(SCORE_DEFAULTS) == {"lambda_sem", "alpha_cross", "w1", "w2", "w_max", "prior_kg",
                                   "prior_wiki", "prior_web", "alpha_k", "gamma", "relevance",
                                   "support", "alignment"}
    default = ScoreConfig.from_config(SCORE_DEFAULTS)
    assert default == ScoreConfig()
    assert (default.w1, default.w2, default.w_max, default.lambda_sem, default.alpha_cross) == (
        100, 20, 3, 0.7, 0.7)
    custom = ScoreConfig.from_config({**SCORE_DEFAULTS, "w2": 40, "prior_web": 0.5, "alpha_k": [0.5, 0.25, 0.25],
                                      "support": "code", "depth": 3})
    assert (custom.w2, custom.priors["web"], custom.alpha_k, custom.support) == (
        40, 0.5, (0.5, 0.25, 0.25), "code")


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="relevance must be one of"):
        ScoreConfig(relevance="bm25")
    with pytest.raises(ValueError, match="alpha_k"):
        ScoreConfig.from_config({"alpha_k": [0.5, 0.5]})


def test_a_grouped_path_is_scored_by_its_member_path_text_and_entities() -> None:
    """score_text / score_entities (a grouped KG path's first member path) are what relevance
    reads; the shown text and names stay what the model and the stage recall see."""
    rows = {"I": [1.0, 0.0], "X - starred actors - A": [1.0, 0.0], "X - release year - 1988": [0.0, 1.0],
            "{X} -starred actors-> {A, B, C, D, E}": [0.0, 1.0], "{X} -release year-> {1988}": [0.0, 1.0]}
    many = Candidate("{X} -starred actors-> {A, B, C, D, E}", ("X", "A", "B", "C", "D", "E"), "kg",
                     score_text="X - starred actors - A", score_entities=("X", "A"))
    one = Candidate("{X} -release year-> {1988}", ("X", "1988"), "kg",
                    score_text="X - release year - 1988", score_entities=("X", "1988"))
    vectors = table(rows)
    # member paths: .7*1 + .3*1/2 and .7*0 + .3*1/2; the five actors no longer dilute the Jaccard term
    assert relevance_scores([many, one], "I", ["X"], vectors, ScoreConfig()) == pytest.approx([0.85, 0.15])
    assert vectors.calls[-1] == ["I", "X - starred actors - A", "X - release year - 1988"]  # type: ignore[attr-defined]
    # without them (documents; group_scoring "group"): the shown text and every shown name
    plain = [Candidate(many.text, many.entities, "kg"), Candidate(one.text, one.entities, "kg")]
    assert relevance_scores(plain, "I", ["X"], table(rows), ScoreConfig()) == pytest.approx([0.3 / 6, 0.15])
    pruned = prune([many, one], "I", ["X"], {"X", "A"}, table(rows), ScoreConfig())
    assert pruned.after_cross[0].candidate is many and pruned.after_cross[0].candidate.entities == many.entities
