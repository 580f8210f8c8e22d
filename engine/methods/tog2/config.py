"""The typed config of `tog2`: the paper's values, the released code's choices (off by default)
and ours."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.methods.method_config import MethodConfig, option
from engine.methods.shared.prune import PRUNE_TOOLS
from engine.methods.tog2.context import CHUNK_QUERIES, SCORERS, UNITS

_T = {"low": 0.0, "high": 2.0}  # temperatures


@dataclass(frozen=True)
class Tog2Config(MethodConfig):
    """`tog2`: rounds of graph search and context retrieval; the paper's values, the code's
    choices (off by default) and ours."""

    width: int = option(3, "W: relations per entity and topic entities kept per round", "ToG-2 §3", low=1)
    depth: int = option(3, "D: rounds", "ToG-2 §3", low=1)
    top_k: int = option(10, "K: context units per round (and at initialisation)", "ToG-2 §3", low=1)
    alpha: float = option(0.3, "decay of the entity score (the paper gives no value)", "ToG-2 Eq. 6", low=0.0)
    relation_threshold: float = option(0.2, "relation scores (0..10 -> 0..1) under it are pruned", "ToG-2 §3",
                                       low=0.0, high=1.0)
    relation_prune: str = option("combined", "combined: one call for all entities (Eq. 3); per_entity: one "
                                              "call each (Eq. 2)", "ToG-2 Eq. 2-3",
                                 choices=("combined", "per_entity"))
    prune_tool: str = option("llm", "llm (the paper), or relations scored against the question without a "
                                    "call (then no topic prune)", "ours, after ToG Table 5", choices=PRUNE_TOOLS)
    max_relations: int = option(12, "relations shown per entity, most similar to the question first", low=1)
    max_tails: int = option(20, "tails per (entity, relation): a deterministic sample of a hub's", low=1)
    max_topic_entities: int = option(5, "linked entities offered to the topic prune", low=1)
    topic_prune: bool = option(True, "the model picks the starting entities (may pick none)", "ToG-2 §3")
    topic_search: int = option(5, "nothing linked: entities of the question's top passages (0: off)", low=0)
    context_unit: str = option("sentence", "sentence (paper: K sentences) or chunk (code: paragraphs)", "ToG-2 §3",
                               choices=UNITS)
    chunk_query: str = option("triple+question", "what a unit is scored against: triple+question, "
                                                 "triple+chunk (Eq. 5) or question (code)", "ToG-2 Eq. 5",
                              choices=CHUNK_QUERIES)
    context_scorer: str = option("dense", "unit scorer: the index's bi-encoder, or BM25", choices=SCORERS)
    max_chunks_per_entity: int = option(20, "chunks read per candidate entity", low=1)
    max_unit_chars: int = option(400, "characters of a unit as shown to the model", low=1)
    clues: bool = option(True, "carry the reasoning's clues into the next round", "ToG-2 §3")
    reform_query: bool = option(True, "re-form the retrieval query between rounds (D-1 calls)", "ToG-2 §3")
    drop_literals: bool = option(False, "literal tails are no candidates", "ToG-2 code")
    drop_docless: bool = option(False, "entities without documents are no candidates", "ToG-2 code")
    require_grounded_answer: bool = option(True, '"sufficient" only when the evidence shown says the answer')
    confirm_initial: bool = option(True, "an initialisation answer waits for round 1 (taken if it finds none)")
    abstain: bool = option(False, 'nothing sufficient: "not found" instead of a best guess')
    sc_gate: bool = option(False, "self-consistency gate before any graph search", "ToG-2 code")
    sc_samples: int = option(10, "sc_gate: CoT samples", "ToG-2 code", low=1)
    sc_agreement: float = option(0.8, "sc_gate: share of the samples that must agree to stop", "ToG-2 code",
                                 low=0.0, high=1.0)
    sc_temperature: float = option(0.7, "sc_gate: sampling temperature", "ToG-2 code", **_T)
    temperature_exploration: float = option(0.0, "temperature of the prune calls (the paper: 0 for every "
                                                 "generation)", "ToG-2 §3", **_T)
    temperature_reasoning: float = option(0.0, "temperature of the reasoning and query calls", "ToG-2 §3", **_T)
    topic_prune_max_tokens: int = option(64, "token limit of the topic prune call", low=1)
    relation_prune_max_tokens: int = option(200, "token limit of a relation prune call", low=1)
    reasoning_max_tokens: int = option(160, "token limit of a reasoning call", low=1)
    query_max_tokens: int = option(64, "token limit of a query re-forming call", low=1)
    seed: int = option(0, "sampling seed")


TOG2_DEFAULTS: dict[str, Any] = Tog2Config.defaults()
