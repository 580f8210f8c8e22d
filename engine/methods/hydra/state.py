"""The state of one HydraRAG question (`hydra`, `hydra-e`): its config, topic entities and scorer,
available evidence detection, the LLM calls and the question analysis (§4.1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.access.graph import Subgraph
from engine.access.retrieval import WEB, shared_scorer
from engine.methods.hydra import prompts as hp
from engine.methods.hydra.chain_relevance import ChainRelevance
from engine.methods.hydra.config import SOURCES, HydraConfig, HydraEConfig, HydraSConfig
from engine.methods.hydra.docs import Sentence, entity_sentences, web_sentences
from engine.methods.hydra.paths import skyline_depth
from engine.methods.hydra.score import Candidate, Pruned, ScoreConfig
from engine.methods.shared.common import (
    ask,
    new_record,
    optional_docs,
    optional_embedder,
    question_text,
    timed,
)
from engine.methods.shared.labels import display_text, entity_text
from engine.questions.record import Question
from ingest.base.errors import LocalkgError

if TYPE_CHECKING:
    from engine.methods.context import Context


@dataclass
class Analysis:
    """The question analysis: sub-questions, skyline indicator, D_predict, initial sources."""

    sub_questions: list[str]
    skyline: str
    d_predict: int
    sources: list[str]
    fallback: bool = False


@dataclass
class Attempt:
    """One phase's pruning, selection and answer."""

    phase: str
    pool: list[Candidate]
    pruned: Pruned = field(default_factory=lambda: Pruned([], []))
    selected: list[Candidate] = field(default_factory=list)
    read: list[Candidate] = field(default_factory=list)  # `answer_windows`: windows read beside the selection
    answer: str = ""
    enough: bool = False


class HydraState:
    """State of one HydraRAG question."""

    def __init__(self, question: Question, ctx: Context, config: dict[str, Any], method: str) -> None:
        self.question, self.ctx = question, ctx
        self.config = {"hydra-e": HydraEConfig, "hydra-s": HydraSConfig}.get(method, HydraConfig).from_config(config)
        self.kg = ctx.kg
        self.text = question_text(question)
        self.record = new_record(question, method)
        self.score_config = ScoreConfig.from_config(config)
        self.trace: list[dict[str, Any]] = []
        self.docs = optional_docs(ctx)
        embedder = optional_embedder(ctx, self.docs)
        self.scorer = shared_scorer(embedder) if embedder is not None else None
        self.topics: list[str] = []
        self.topic_labels: list[str] = []
        self.sub: Subgraph | None = None        # the D_max-hop question subgraph (hydra-e: reduced)
        self.connected: Subgraph | None = None  # its part that connects the topic entities
        self._sub_labels: dict[str, str] | None = None
        self._web_found: dict[str, list[Sentence]] = {}
        self._chain_relevance: ChainRelevance | None = None  # path_relevance=chains, built once
        self._prefix_cuts: dict[tuple[Any, ...], int] = {}  # end_prefix: each grouped path's best cut, once

    # -- sources ------------------------------------------------------------------------------
    def label(self, node: str) -> str:
        return entity_text(self.kg, node)

    def name(self, node: str) -> str:
        return display_text(self.kg, node)

    def available_sources(self) -> list[str]:
        """Available evidence detection: the sources in which the topic entities have matches."""
        found: list[str] = []
        with timed(self.record, "evidence_detection"):
            if any(self.kg.edges(t, d, limit=1).pairs for t in self.topics for d in ("out", "in")):
                found.append("kg")
            if self.docs is not None and self.scorer is not None:
                if any(entity_sentences(self.docs, [t], 1, 1) for t in self.topics):
                    found.append("wiki")
                if self._web(self.text):  # searched by the question: needs no topic entity
                    found.append("web")
        return found

    def _web(self, query: str) -> list[Sentence]:
        """The web windows for a query, searched once per query (detection reuses them)."""
        if self.docs is None:
            return []
        if query not in self._web_found:
            try:
                self._web_found[query] = web_sentences(
                    self.docs, query, self.config.web_k, self.config.web_search,
                    self.config.window_sentences, WEB if self.config.web_collections == "web" else None)
            except (LocalkgError, RuntimeError, ValueError) as exc:  # e.g. built without vectors
                self.record.extra.setdefault("notes", []).append(f"web search failed: {exc}")
                self._web_found[query] = []
        return self._web_found[query]

    # -- calls --------------------------------------------------------------------------------
    def _ask(self, system: str, user: str, schema: dict[str, Any], stage: str, temperature: str,
             max_tokens: str) -> Any | None:
        return ask(self.ctx.llm, self.record, system=system, user=user, schema=schema, stage=stage,
                   temperature=float(getattr(self.config, temperature)), max_tokens=getattr(self.config, max_tokens),
                   seed=self.config.seed)

    def analyse(self, available: Sequence[str]) -> Analysis:
        """Question analysis and source selection in one call; a fallback when it fails."""
        d_max = self.config.d_max
        offered = list(available) or ["kg"]
        parsed = self._ask(hp.ANALYSIS_SYSTEM, hp.analysis_user(self.text, self.topic_labels, offered),
                           hp.analysis_schema(offered, d_max), "analysis", "temperature_analysis",
                           "analysis_max_tokens")
        items = parsed.get("skyline", []) if isinstance(parsed, dict) else []
        skyline = " - ".join(" ".join(str(i).split()) for i in items if str(i).strip())
        if not skyline:
            return Analysis([self.text], self.text, d_max, list(available), fallback=True)
        subs = [" ".join(str(s).split()) for s in parsed.get("sub_questions", []) if str(s).strip()]
        chosen = [s for s in SOURCES if s in parsed.get("sources", []) and s in available]
        if not self.config.source_selection or not chosen:
            chosen = list(available)
        return Analysis(subs, skyline, skyline_depth(skyline, self.topic_labels, d_max), chosen)
