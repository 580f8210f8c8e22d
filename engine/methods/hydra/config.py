"""The typed config of `hydra` and `hydra-e` (HydraRAG Appendix C defaults, our options beside
them) and the names of the method's sources and phases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.methods.hydra.score import ALIGNMENT_MODES, RELEVANCE_MODES, SUPPORT_MODES
from engine.methods.method_config import MethodConfig, like, option

SOURCES = ("kg", "wiki", "web")
PHASES = ("initial", "refined", "predicted", "fallback")

_UNIT = {"low": 0.0, "high": 1.0}
_TEMP = {"low": 0.0, "high": 2.0}


@dataclass(frozen=True)
class HydraConfig(MethodConfig):
    """`hydra`: the scoring keys (`hydra_score.ScoreConfig`), the search and document bounds, our
    options (the paper's way is each one's default) and the calls' settings."""

    lambda_sem: float = option(0.7, "relevance: weight of the semantic term", "HydraRAG App. C", **_UNIT)
    alpha_cross: float = option(0.7, "cross-score weight", "HydraRAG App. C", **_UNIT)
    w1: int = option(100, "W1: partial paths kept per level of the path search", "HydraRAG App. C", low=1)
    w2: int = option(20, "W2: candidates kept by the first prune (the released code: 40)", "HydraRAG App. C", low=1)
    w_max: int = option(3, "W_max: evidence paths selected per phase", "HydraRAG App. C", low=1)
    prior_kg: float = option(1.0, "source prior rho of the KG", "HydraRAG §4", low=0.0)
    prior_wiki: float = option(0.8, "source prior rho of the Wiki documents", "HydraRAG §4", low=0.0)
    prior_web: float = option(0.7, "source prior rho of the web documents", "HydraRAG §4", low=0.0)
    alpha_k: list[float] = option([1 / 3, 1 / 3, 1 / 3], "weights of prior, support, alignment",
                                  "HydraRAG §4", low=0.0)
    gamma: float = option(0.8, "support threshold (cosine; the paper gives none)", **_UNIT)
    relevance: str = option("paper", "cosine: the released code (no Jaccard term)", "HydraRAG §4",
                            choices=RELEVANCE_MODES)
    support: str = option("paper", "code: 0/1/2/3+ supporting paths -> 0.6/0.7/0.8/0.9", "HydraRAG §4",
                          choices=SUPPORT_MODES)
    alignment: str = option("paper", "code: the best cosine to a KG path instead of the subgraph share",
                            "HydraRAG §4", choices=ALIGNMENT_MODES)
    d_max: int = option(3, "D_max: subgraph hops and the refined / predicted depth", "HydraRAG App. C", low=1)
    max_topic_entities: int = option(3, "topic entities to start from", low=1)
    topic_search: int = option(5, "nothing linked: entities of the question's top passages (0: off)", low=0)
    max_degree: int = option(500, "subgraph: facts read per node and direction", low=1)
    max_nodes: int = option(20_000, "subgraph: node budget", low=1)
    max_paths: int = option(10_000, "path search: paths kept per search", low=1)
    max_shown: int = option(5, "names shown per entity set of a grouped path", low=1)
    one_relation_per_edge: bool = option(False, "hydra-e: one seeded-random relation per clustered edge",
                                         "HydraRAG-E")
    source_selection: bool = option(True, "the model chooses the initial sources (false: all available)",
                                    "HydraRAG §4")
    window_sentences: int = option(1, "sentences per document window", low=1)
    max_chunks_per_entity: int = option(20, "chunks read per entity for windows", low=1)
    max_sentence_chars: int = option(300, "characters of a window as shown", low=1)
    web_k: int = option(5, "web chunks the question search returns", low=1)
    web_search: str = option("dense", "the web search: dense, or sparse (BM25)", choices=("dense", "sparse"))
    web_collections: str = option("web", "what the web search covers: the web collection, or all collections",
                                  choices=("web", "all"))
    doc_evidence: str = option("paths", "paths: the model writes the windows as knowledge paths (paper); "
                                        "sentences: the windows themselves", "HydraRAG §4",
                               choices=("paths", "sentences"))
    doc_entities: str = option("topics", "whose documents Wiki reads: the topic entities' (paper), or also "
                                         "those reached on the chosen KG paths", choices=("topics", "reached"))
    max_doc_entities: int = option(10, "doc_entities=reached and answer_windows: reached entities whose "
                                   "documents are read", low=1)
    align_threshold: float = option(0.8, "predicted answers: cosine to a subgraph entity's name", **_UNIT)
    max_align_nodes: int = option(2000, "subgraph entities embedded for that alignment", low=1)
    require_grounded_answer: bool = option(True, "a Yes whose answer the selected paths do not name is a No")
    group_scoring: str = option("group", "group: a grouped KG path scored as shown; member: as its first "
                                         "member path", choices=("group", "member"))
    beam: str = option("paths", "paths: the best W1 partial paths (paper); chains: in turns across relation "
                                "chains", choices=("paths", "chains"))
    initial_depth: str = option("predicted", "predicted: min(D_predict, D_max) (paper); max: D_max",
                                choices=("predicted", "max"))
    path_lengths: str = option("band", "band: length in (|T|(D-1), |T|D] (paper); up_to: every length <= "
                                       "|T|D", choices=("band", "up_to"))
    path_relevance: str = option("paper", "paper: KG paths by relevance to the skyline (paper); chains (ours): by "
                                          "the chains method's LLM-free scorer against the question",
                                 choices=("paper", "chains"))
    chain_weights: str = option("first", "path_relevance=chains: the chains scorer's terms as hydra-s was built "
                                         "(first), or the chains method's defaults now (chains: also meaning_cover, "
                                         "kind_nouns, converse_nouns, step_direction, kin_terms, same_twice)",
                                choices=("first", "chains"))
    answer_prompt: str = option("facts", "facts: the answer call writes the chosen paths' facts, then Yes/No and "
                                         "the answer (the paper's path refinement, merged); short (ours): Yes/No "
                                         "and the answer as written in the evidence, no example",
                                choices=("facts", "short"))
    answer_choice: str = option("free", "free: any text (paper); paths: a name the chosen KG paths show; "
                                        "ends (ours): a name of their last entity sets; evidence: the paths' "
                                        "names or a span of the chosen sentences",
                                choices=("free", "paths", "ends", "evidence"))
    temperature_analysis: float = option(0.0, "temperature of the analysis call", **_TEMP)
    temperature_exploration: float = option(0.4, "temperature of doc paths, refine, predict", "HydraRAG App. C", **_TEMP)
    temperature_selection: float = option(0.0, "temperature of pruning (the released code: 0.4)", "HydraRAG App. C", **_TEMP)
    temperature_answer: float = option(0.0, "temperature of the answer calls", **_TEMP)
    analysis_max_tokens: int = option(200, "token limit of the analysis call", low=1)
    doc_paths_max_tokens: int = option(256, "token limit of the doc paths call", low=1)
    selection_max_tokens: int = option(48, "token limit of a selection call", low=1)
    answer_max_tokens: int = option(160, "token limit of an answer call", low=1)
    refine_max_tokens: int = option(96, "token limit of a refine call", low=1)
    predict_max_tokens: int = option(160, "token limit of a predict call", low=1)
    end_prefix: bool = option(False, "answer_choice=ends with path_relevance=chains (ours): each chosen KG path "
                                     "offers the end of its prefix that the chain scorer ranks best against the "
                                     "question, not always its last set")
    answer_windows: int = option(0, "ours: with only KG paths chosen, the answer call also reads the best N sentence "
                                 "windows of the documents of the entities those paths reach (their ends first), ranked "
                                 "by cosine to the question with its topic entities masked, and may answer with a span "
                                 "of them (0: off, the paper's way: the answer reads the chosen paths only)", low=0)
    doc_answers: str = option("free", "answer_choice=paths or ends where the model chose document evidence: free: "
                                      "any text; spans (ours): a name of the chosen KG paths' ends or a span of the "
                                      "chosen and read sentences, never a topic entity",
                              choices=("free", "spans"))
    windows_beside_docs: bool = option(False, "answer_windows (ours): also read the windows where the model chose "
                                              "document evidence beside KG paths (the documents of the entities "
                                              "the KG paths reach), unless every chosen sentence is of a "
                                              "document that restates the graph (--kg-as-docs); off: only where "
                                              "it chose KG paths alone (hydra-s: on)")
    topic_windows: bool = option(False, "answer_windows with path_relevance=chains (ours): where no question word "
                                        "names a relation of the question subgraph and a chosen KG path starts with "
                                        "a fact of the graph (not a document's mention), the topic entities' own "
                                        "documents are read beside the reached entities' (\"who is the chief "
                                        "executive of X\" over a graph that only says X's parent; hydra-s: on)")
    answer_forms: bool = option(False, "ours: the answer as the evidence's document sentences state it: a part of a "
                                       "date or period a sentence states, for a \"when\" question, becomes that date "
                                       "or period (\"1845\" -> \"August 6, 1845\"); a bare number they state only "
                                       "with an ordinal suffix or a measure becomes that (\"8\" -> \"8th\", "
                                       "\"517\" -> \"517 km\"; not for \"how many N\") (hydra-s: on)")
    echo_retry: str = option("off", "ours, where an answer is words the question itself says (not a yes/no or "
                                    "\"A or B\" question): spans: a free-text answer is asked once more, one of the "
                                    "evidence's spans the question does not say; next: the answer is not enough, "
                                    "the next phase follows", choices=("off", "spans", "next"))
    max_answer_names: int = option(60, "answer_choice=paths: names offered at most", low=1)
    trace_max_entities: int = option(300, "entity names kept per stage in extra.trace", low=1)
    seed: int = option(0, "the seed of every call and of hydra-e's relation choice")


@dataclass(frozen=True)
class HydraEConfig(HydraConfig):
    """`hydra-e`: `hydra` on a subgraph with one seeded-random relation per clustered edge."""

    one_relation_per_edge: bool = like(HydraConfig, "one_relation_per_edge", True)


@dataclass(frozen=True)
class HydraSConfig(HydraConfig):
    """`hydra-s` (ours): `hydra` with the settings for small models. The model no longer decides
    the depth, ranks KG paths, rewrites sentences or picks a chain's middle: every depth up to
    D_max is searched, KG paths are ranked by the `chains` scorer against the question, the
    document windows join the pool as they are, the question search covers every collection, and
    the answer is a name of the chosen KG paths' ends (with KG paths only) or a span as written
    in the evidence; the chain scorer reads its terms as the `chains` method has them now, and cuts
    each chosen KG path where its prefixes match the question best before offering its end; where
    the question says a word that names no relation of the graph, the answer call also reads the
    best windows of the reached entities' documents, beside chosen document sentences too (not
    beside those of documents that restate the graph), and, where no question word names a
    relation and a chosen KG path starts with a graph fact, the topic entities' documents beside
    them. The phases, pruning and the model's
    selection are the paper's."""

    initial_depth: str = like(HydraConfig, "initial_depth", "max")
    path_lengths: str = like(HydraConfig, "path_lengths", "up_to")
    path_relevance: str = like(HydraConfig, "path_relevance", "chains")
    answer_choice: str = like(HydraConfig, "answer_choice", "ends")
    answer_prompt: str = like(HydraConfig, "answer_prompt", "short")
    doc_evidence: str = like(HydraConfig, "doc_evidence", "sentences")
    web_collections: str = like(HydraConfig, "web_collections", "all")
    chain_weights: str = like(HydraConfig, "chain_weights", "chains")
    end_prefix: bool = like(HydraConfig, "end_prefix", True)
    answer_windows: int = like(HydraConfig, "answer_windows", 3)
    windows_beside_docs: bool = like(HydraConfig, "windows_beside_docs", True)
    answer_forms: bool = like(HydraConfig, "answer_forms", True)
    echo_retry: str = like(HydraConfig, "echo_retry", "spans")
    topic_windows: bool = like(HydraConfig, "topic_windows", True)


HYDRA_DEFAULTS: dict[str, Any] = HydraConfig.defaults()
