"""Exploration in a HydraRAG phase: structured retrieval (the question subgraph and the path
search of `hydra_paths`), unstructured retrieval (the document windows of `hydra_docs`), and the
sources and entities of the later phases."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from engine.access.graph import Subgraph, subgraph_within
from engine.methods.hydra.chain_relevance import ChainRelevance
from engine.methods.hydra.config import SOURCES
from engine.methods.hydra.docs import (
    Sentence,
    entity_sentences,
    knowledge_paths,
    sentence_candidates,
    top_sentences,
)
from engine.methods.hydra.paths import (
    KgPaths,
    clustered_edges,
    one_relation_per_edge,
    path_candidates,
    relevance_scorer,
    search_paths,
)
from engine.methods.hydra.record import HydraRecorder
from engine.methods.hydra.score import Candidate, relevance_scores
from engine.methods.hydra.state import Attempt
from engine.methods.shared.common import timed

if TYPE_CHECKING:
    from engine.access.graph import GroupedPath


class HydraExplorer(HydraRecorder):
    """A HydraRAG question's state with its structured and unstructured retrieval."""

    # -- structured retrieval -----------------------------------------------------------------
    def subgraph(self) -> Subgraph:
        if self.sub is None:
            with timed(self.record, "subgraph"):
                sub = subgraph_within(self.kg, self.topics, self.config.d_max,
                                      max_degree=self.config.max_degree,
                                      max_nodes=self.config.max_nodes)
                summary: dict[str, Any] = sub.summary()
                if self.config.one_relation_per_edge:
                    summary["clustered_edges"] = clustered_edges(sub)
                    sub = one_relation_per_edge(sub, self.config.seed)
                self.sub, self.connected = sub, sub.connecting()
            summary["connecting_nodes"] = self.connected.graph.number_of_nodes()
            summary["gold"] = self.gold_in(self.subgraph_labels().values())
            self.record.extra["subgraph"] = summary
        return self.sub

    def subgraph_labels(self) -> dict[str, str]:
        """Names of the subgraph's entities (E_q), read once per question."""
        if self._sub_labels is None:
            sub = self.subgraph()
            with timed(self.record, "subgraph_labels"):
                self._sub_labels = {n: self.label(n) for n in sub.graph.nodes}
        return self._sub_labels

    def chain_relevance(self) -> ChainRelevance | None:
        """With `path_relevance: chains` (ours): the chain scorer of the question (None otherwise)."""
        if self.config.path_relevance != "chains" or self.scorer is None:
            return None
        if self._chain_relevance is None:
            self._chain_relevance = ChainRelevance(self.text, self.topic_labels, self.subgraph(), self.label,
                                                   self.kg.relation_label, self.scorer, self.config.chain_weights)
        return self._chain_relevance

    def relevance(self, indicator: str) -> Any:
        """Relevance of candidates to `indicator` (hydra_score, Algorithm 4 step 1)."""
        def score(cands: Sequence[Candidate]) -> list[float]:
            assert self.scorer is not None
            return relevance_scores(cands, indicator, self.topic_labels, self.scorer.vectors, self.score_config)
        return score

    def kg_paths(self, topics: Sequence[str], indicator: str, depth: int, step: dict[str, Any],
                 all_depths: bool = False) -> list[Candidate]:
        sub = self.subgraph()
        graph = self.connected if list(topics) == list(sub.topics) or len(topics) < 2 else \
            Subgraph(sub.graph, list(topics), sub.hops, sub.depth).connecting()
        assert graph is not None
        chains = self.chain_relevance()
        scorer = chains.of_paths if chains is not None else \
            relevance_scorer(self.label, self.kg.relation_label, topics, self.relevance(indicator)) \
            if self.scorer is not None else None
        with timed(self.record, "path_search"):
            found: KgPaths = search_paths(graph, topics, depth, w1=self.config.w1, scorer=scorer,
                                          max_paths=self.config.max_paths, all_depths=all_depths,
                                          diverse=self.config.beam == "chains")
        cands = path_candidates(found.groups, self.label, self.kg.relation_label, self.config.max_shown,
                                self.config.group_scoring)
        names = [self.label(n) for p in found.paths for n in p.entities]
        step.setdefault("bfs", []).append({"topics": [self.name(t) for t in topics], "depth": depth,
                                           "paths": len(found.paths), "groups": len(found.groups),
                                           **self.stage_names(names, [])})
        return cands

    # -- unstructured retrieval ---------------------------------------------------------------
    def doc_paths(self, sources: Sequence[str], entities: Sequence[str], query: str, indicator: str,
                  step: dict[str, Any], reached: Sequence[str] = ()) -> list[Candidate]:
        if self.docs is None or self.scorer is None:
            return []
        k, chars = self.config.w_max, self.config.max_sentence_chars
        kept: list[Sentence] = []
        with timed(self.record, "doc_retrieval"):
            if "wiki" in sources:
                window, max_chunks = self.config.window_sentences, self.config.max_chunks_per_entity
                found = entity_sentences(self.docs, entities, window, max_chunks)
                kept += top_sentences(self.scorer, indicator, found, k, chars)
                if reached:  # their own top W_max, without the windows just ranked
                    seen = {(s.chunk_id, s.text) for s in found}
                    more = [s for s in entity_sentences(self.docs, reached, window, max_chunks)
                            if (s.chunk_id, s.text) not in seen]
                    kept += top_sentences(self.scorer, indicator, more, k, chars)
            if "web" in sources:
                seen = {(s.chunk_id, s.text) for s in kept}  # web_collections=all can find them again
                fresh = [s for s in self._web(query) if (s.chunk_id, s.text) not in seen]
                kept += top_sentences(self.scorer, indicator, fresh, k, chars)
        step["sentences"] = [s.chunk_id for s in kept]
        labels = [self.label(e) for e in entities]
        if self.config.doc_evidence == "sentences":
            cands = sentence_candidates(kept, labels, chars)
        else:
            cfg = self.config
            cands = knowledge_paths(self.ctx.llm, self.record, kept, labels, indicator,
                                    max_chars=cfg.max_sentence_chars, temperature=float(cfg.temperature_exploration),
                                    max_tokens=cfg.doc_paths_max_tokens, seed=cfg.seed)
        step["doc_paths"] = [c.text for c in cands]
        return cands

    def explore(self, step: dict[str, Any], sources: Sequence[str], topics: Sequence[str], indicator: str,
                depth: int, doc_entities: Sequence[str], query: str, all_depths: bool = False,
                reached: Sequence[str] = ()) -> list[Candidate]:
        pool: list[Candidate] = []
        if "kg" in sources and topics:
            pool += self.kg_paths(topics, indicator, depth, step, all_depths)
        if any(s in sources for s in ("wiki", "web")):
            pool += self.doc_paths(sources, doc_entities, query, indicator, step, reached)
        return pool

    # -- the later phases' sources and entities ----------------------------------------------
    def later_sources(self, available: Sequence[str]) -> list[str]:
        """The sources of the refined and predicted phases: every available one; with
        `doc_entities: reached`, Wiki too whenever the index has documents (the entities the
        KG paths reach may have documents where the topic entities have none)."""
        if self.config.doc_entities == "reached" and self.docs is not None and "wiki" not in available:
            return [s for s in SOURCES if s in available or s == "wiki"]
        return list(available)

    def reached_entities(self, topics: Sequence[str], attempts: Sequence[Attempt],
                         step: dict[str, Any]) -> list[str]:
        """With `doc_entities: reached`, the entities whose documents the Wiki source reads in a
        later phase besides the topic entities': those on the KG paths chosen so far, nearest to
        the topic entity first, the best path first at each distance (the hybrid KG -> document
        step: a chain's middle or end may have in its document what the KG lacks about it).
        Their windows get their own top W_max (the topic entities' windows would outrank them:
        the indicator names the topic entity). Empty with `doc_entities: topics` (paper)."""
        if self.config.doc_entities != "reached":
            return []
        groups = [cast("GroupedPath", c.payload) for a in attempts for c in a.selected if c.source == "kg"]
        levels = max((len(g.sets) for g in groups), default=0)
        near_first = [e for i in range(1, levels) for g in groups if i < len(g.sets) for e in g.sets[i]]
        named = [e for e in dict.fromkeys(near_first)
                 if e not in topics and not self.label(e).startswith("unnamed entity")]
        reached = named[: self.config.max_doc_entities]
        if reached:
            step["reached_docs"] = [self.name(e) for e in reached]
        return reached
