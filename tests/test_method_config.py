"""Typed method configs (`engine/methods/method_config.py`): defaults, checks, listing, docs, and
the config hashes of unchanged settings, pinned so that existing runs keep resuming."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.methods import registry
from engine.methods.method_config import MethodConfig, option
from engine.methods.spec import MethodSpec

ROOT = Path(__file__).resolve().parents[1]

# The config hash of every built-in method's default config, computed by the code before typed
# configs existed. A run folder stores these in run.json and in every record: a change here
# restarts every run made with the defaults.
PINNED_DEFAULT_HASHES = {
    "io": "3a441f0e15645f09",
    "cot": "7228365aedfebab5",
    "sc": "a411bcbc63cd2270",
    "rag": "9a07165ef99bc61a",
    "tog": "12967b81f0b72524",
    "tog-r": "d31c7800f3044e32",
    "tog2": "d664ad0a1f298519",
    "hydra": "6b5828a669a80726",
    "hydra-e": "341d59350f58a23e",
    "hydra-s": "8871ad1f72adcb7f",  # topic_windows (efc8a93eada10742 before it), echo_retry=spans (95f08e668f06e48d before it, e7802dc862566993 before answer_forms, e2748f2ec4c9a9ef before windows_beside_docs, 7c7aeaf31c6b5c45 before answer_windows=3; dbb9b074002d8226 before chain_weights=chains, end_prefix)
    "chains": "9687c1a2c3b70109",  # topic_docs=also (1168d60601f612fb before it), inverse_scope=graph (5ab9f06c7ed1f12e before it), frame_words and whole_names (c910aae0bef84982 before them), asked_sets and past_ends (4d58b04741e8452c before them), mention_order=0.3 and verb_mentions (2e47cc04214f7676 before them), co_words (7f281b06aa3db980 before it), repeat_mentions and unasked_spans (7845bb82d61bcaf6 before them), unasked_last (109e1b1f73a4b690 before it), kin_synonyms (2ea027bb607063f3 before it), unnamed_hops (45f295308d426fdc before it), inverse_steps (10f9a29be63a7d15 before it), echo_retry (773c35e38edbba63 before it), kind_once (286195e6419cc1be before it), same_twice (c4aad5f5353d5285 before it, a0024319773c8894 before definite_kinds, 6535026e281c1918 before date_grain, 4dc3792c6648ef1d before bare_counts, 1901a34b138cabd9 before kin_terms, 96261166931a2e28 before step_direction, 51928a4e52e35ab4 before described_sets, 36441735f4c453fd before converse_nouns, 0132f486a093c662 before evidence_last=named, bdbd8ee6c7d30422 before kind_nouns, 132187f389fe46fe before doc_steps)
}

# data/runs/chains/metaqa-1-hop (50 MetaQA 1-hop questions, qwen2.5-coder-0.5b): its run.json config
# and config hash, as that run wrote them, before `relation_cover`, `relation_order`, `cover_counts` and `meaning_cover`
# existed (`--set relation_cover=0 --set relation_order=0 --set cover_counts=false --set meaning_cover=0` gives that
# scorer and that hash back).
CHAINS_RUN_CONFIG = {
    "max_hops": 3, "max_topic_entities": 2, "topic_search": 5, "max_degree": 500, "max_nodes": 20000,
    "beam": 40, "scorer": "dense", "last_step": 0.6, "first_step": 0.6, "hop_penalty": 0.06,
    "hub_penalty": 0.1, "asked_type": 0.6, "word_overlap": 0.3, "shown_chains": 5, "choose": "llm",
    "answer_routes": 3, "max_shown": 2, "max_candidates": 30, "windows": 4, "window_sentences": 2,
    "question_passages": 3, "max_window_chars": 320, "max_chunks_per_entity": 4, "window_entities": 5,
    "abstain": True, "max_tokens": 48, "seed": 0,
}
CHAINS_RUN_HASH = "57ed3c3622b9fd63"
# data/runs/prune-bm25/metaqa-2-hop: tog and tog-r with `--set prune_tool="bm25"`.
PRUNE_BM25_HASHES = {"tog": "6a3f1b1240d3d5b2", "tog-r": "945e923971a526fc"}


def test_default_config_hashes_are_the_pinned_ones() -> None:
    got = {m: registry.config_hash(m, registry.default_config(m)) for m in PINNED_DEFAULT_HASHES}
    assert got == PINNED_DEFAULT_HASHES


def test_an_existing_run_resumes_with_the_same_hashes() -> None:
    """The settings of existing runs give the hashes their run.json and records hold."""
    from engine.runs.batch import method_configs

    # keys added since that run (the last four at defaults that leave the hash as it was)
    added = {"relation_cover": 0, "relation_order": 0, "cover_counts": False, "meaning_cover": 0.0,
             "meaning_threshold": 0.55, "meaning_margin": 0.0, "unnamed_step": 0.0, "inverse_steps": False,
             "graph_spans": True, "doc_steps": 0, "alternatives": False, "kind_nouns": False, "evidence_last": "facts",
             "converse_nouns": False,
             "described_sets": 0.0, "step_direction": 0.0, "kin_terms": False, "bare_counts": False,
             "date_grain": False, "definite_kinds": False, "same_twice": False, "kind_once": False,
             "echo_retry": False, "unnamed_hops": 0.0, "repeat_mentions": False, "reverse_words": False,
             "doc_words": 0.0, "kin_synonyms": False, "unasked_last": 0.0, "unasked_spans": False,
             "co_words": False, "mention_order": 0.0, "verb_mentions": False, "asked_sets": 0.0,
             "past_ends": False, "frame_words": False, "whole_names": False, "window_words": 0.0,
             "subject_names": False, "merge_windows": False, "inverse_scope": "subgraph", "topic_docs": "route"}
    configs = method_configs(["chains"], ["relation_cover=0", "relation_order=0", "cover_counts=false", "meaning_cover=0",
                                          "choose=\"llm\"", "doc_steps=0", "kind_nouns=false",
                                          "evidence_last=\"facts\"", "converse_nouns=false",
                                          "described_sets=0", "step_direction=0", "kin_terms=false", "bare_counts=false",
                                          "date_grain=false", "definite_kinds=false", "same_twice=false",
                                          "kind_once=false", "echo_retry=false", "inverse_steps=false",
                                          "unnamed_hops=0", "kin_synonyms=false", "unasked_last=0",
                                          "repeat_mentions=false", "unasked_spans=false", "co_words=false",
                                          "mention_order=0", "verb_mentions=false", "asked_sets=0",
                                          "past_ends=false", "frame_words=false", "whole_names=false",
                                          "window_words=0", "subject_names=false", "merge_windows=false",
                                          "inverse_scope=\"subgraph\"", "topic_docs=\"route\""])
    assert configs["chains"] == {**CHAINS_RUN_CONFIG, **added}
    kept = {k: v for k, v in configs["chains"].items() if k not in added}
    assert json.dumps(kept) == json.dumps(CHAINS_RUN_CONFIG)  # same types: 3 not 3.0
    # a run.json written before the option: the value it was made with, and its hash
    assert registry.resolve_stored_config("chains", CHAINS_RUN_CONFIG) == configs["chains"]
    assert registry.config_hash("chains", registry.resolve_stored_config("chains", CHAINS_RUN_CONFIG)) == CHAINS_RUN_HASH
    assert registry.config_hash("chains", configs["chains"]) == CHAINS_RUN_HASH
    bm25 = method_configs(["tog", "tog-r"], ['prune_tool="bm25"'])
    assert {m: registry.config_hash(m, c) for m, c in bm25.items()} == PRUNE_BM25_HASHES


@pytest.mark.parametrize("folder", ["chains/metaqa-1-hop", "prune-bm25/metaqa-2-hop"])
def test_a_run_folder_on_disk_matches(folder: str) -> None:
    """Where the run folder is present (the main checkout), its run.json and records agree with
    what the code computes now for the run's settings."""
    run = ROOT / "data" / "runs" / folder
    if not (run / "run.json").exists():
        pytest.skip(f"no run folder data/runs/{folder} here")
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    for method, entry in meta["methods"].items():
        resolved = registry.resolve_stored_config(method, entry["config"])
        assert registry.config_hash(method, resolved) == entry["config_hash"]
        with (run / entry["file"]).open(encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                assert record["config_hash"] == entry["config_hash"]
                assert registry.config_hash(method, record["extra"]["config"]) == entry["config_hash"]


def test_typed_defaults_keep_their_types() -> None:
    from engine.methods.baselines.rag import RagConfig
    from engine.methods.tog.method import TOG_DEFAULTS, TogConfig

    assert TogConfig.defaults() == TOG_DEFAULTS
    assert [type(v) for v in RagConfig.defaults().values()] == [int, type(None), int, float, int, int, bool]
    cfg = TogConfig.from_config({**TOG_DEFAULTS, "width": 2, "unrelated": 1})
    assert cfg.width == 2 and cfg.depth == 3 and cfg.prune_tool == "llm"


@dataclass(frozen=True)
class _Echo(MethodConfig):
    chars: int = option(5, "characters repeated", "ours", low=1)
    weights: list[float] = option([0.5, 0.5], "two weights", "Paper §3", low=0, high=1)
    mode: str | None = option(None, "a mode", choices=(None, "a", "b"))
    strict: bool = option(False, "be strict")
    scale: float = option(1.0, "a scale", low=0, high=2)


def test_checks_name_the_key_and_the_value() -> None:
    spec = MethodSpec.typed("echo-typed", lambda q, c, cfg: None, _Echo, "echo")  # type: ignore[arg-type,return-value]
    assert spec.config({"chars": 2, "mode": "a"}) == {"chars": 2, "weights": [0.5, 0.5], "mode": "a",
                                                       "strict": False, "scale": 1.0}
    bad = [({"chars": 0}, "chars must be a positive integer, not 0"),
           ({"chars": 1.5}, "chars must be a positive integer, not 1.5"),
           ({"weights": [0.5]}, r"weights must be a list of 2 numbers, not \[0.5\]"),
           ({"weights": [0.5, 2]}, r"weights must be within \[0, 1\], not 2"),
           ({"mode": "c"}, "mode must be one of None, a, b, not 'c'"),
           ({"strict": 1}, "strict must be true or false, not 1"),
           ({"scale": "x"}, "scale must be a number, not 'x'"),
           ({"scale": 3}, r"scale must be within \[0, 2\], not 3"),
           ({"chras": 2}, "echo-typed has no config key chras")]
    for overrides, message in bad:
        with pytest.raises(ValueError, match=message):
            spec.config(overrides)
    assert _Echo.defaults()["weights"] is not _Echo.defaults()["weights"]  # a fresh list each time


def test_set_errors_name_the_bad_key_or_value() -> None:
    from engine.runs.batch import method_configs
    from ingest.base.errors import InputError

    with pytest.raises(InputError, match="--set: width must be a positive integer, not 0"):
        method_configs(["tog"], ["tog.width=0"])
    with pytest.raises(InputError, match="temperature must be a number, not 'hot'"):
        method_configs(["io"], ["io.temperature=hot"])
    with pytest.raises(InputError, match="no such config key; known keys: max_tokens, seed, temperature"):
        method_configs(["io"], ["io.widht=2"])


def test_listing_and_docs_come_from_the_typed_config() -> None:
    from bench.docs_hooks import options_table
    from engine.api.lines import methods_lines
    from engine.api.models import methods

    listed = {m["name"]: m for m in methods()}
    width = next(o for o in listed["tog"]["options"] if o["key"] == "width")
    assert width == {"key": "width", "default": 3, "allowed": "positive integer",
                     "help": "beam width W: relations and entities kept per depth", "paper": "ToG §4.1"}
    lines = methods_lines([listed["rag"]])
    assert 'collection=null (null | wiki | web | domain): search one document collection only' in lines[2]
    table = options_table("tog")
    assert "| key | default | allowed | what | paper |" in table
    assert "| `prune_tool` | `\"llm\"` | llm \\| bm25 \\| embedding | relation and entity pruner | ToG Table 5 |" in table


def test_hydra_scoring_defaults_match_score_config() -> None:
    """`hydra_score.SCORE_DEFAULTS` (what `ScoreConfig.from_config` falls back on) and the typed
    hydra config hold the same scoring defaults; hydra-e differs only in its reduced subgraph."""
    from engine.methods.hydra.config import HydraConfig, HydraEConfig
    from engine.methods.hydra.score import SCORE_DEFAULTS

    hydra = HydraConfig.defaults()
    assert {k: hydra[k] for k in SCORE_DEFAULTS} == {**SCORE_DEFAULTS, "alpha_k": list(SCORE_DEFAULTS["alpha_k"])}
    diff = {k for k, v in HydraEConfig.defaults().items() if hydra[k] != v}
    assert diff == {"one_relation_per_edge"} and list(HydraEConfig.defaults()) == list(hydra)
