"""HydraRAG (methods `hydra` and `hydra-e`): structured cross-source reasoning over the KG and
documents (the HydraRAG paper, §4, Appendix A Algorithms 1-4, defaults of Appendix C).

1. Initialisation: topic entities (linking; a dataset's pre-linked ids first; nothing linked:
   the entities of the question's best passages, `topic_search`, as in tog2); available
   evidence detection (kg: a topic entity has facts; wiki: a topic entity has documents, domain
   collections count as wiki; web: the `web` collection answers the question); question
   analysis in one call under a JSON schema: sub-questions, the skyline indicator and the
   sources to search first (the agentic source selector, merged into the same call: the model
   chooses among the available sources); D_predict is computed from the skyline (relations
   between the answer and the farthest topic entity), bounded by D_max. An invalid reply gets
   the LLM layer's one retry, then a fallback (the question as indicator, D_max, every source).
2. Exploration phases, each ending in pruning and an answer attempt; the first `{Yes}` stops:
   - initial: the selected sources at depth min(D_predict, D_max);
   - refined: a follow-up question and a new indicator (one call), every available source, D_max;
   - predicted: the model's candidate answers with their own indicators (one call), aligned
     with subgraph entities, as extra path endpoints (lengths up to |List_P|·D_max);
   - fallback: all paths found, pruned, and an answer from them plus the model's own knowledge
     (marked as such in the record).
   Structured retrieval is `hydra_paths` (question subgraph, skyline order, bidirectional path
   search with the W1 relevance hook, grouped paths); unstructured is `hydra_docs` (top W_max
   sentence windows per source by the skyline, one call writing them as knowledge paths).
3. Pruning (`hydra_score.prune`, Algorithm 4 steps 1-2: relevance top W1, cross-score top W2),
   then one selection call (the W2 as ids under an enum, top W_max, temperature 0) and one answer
   call (the facts of the paths that matter, {Yes}/{No}, the answer).

LLM calls: analysis 1; per phase: doc paths 0-1, selection 0-1 (none when W_max or fewer
candidates), answer 1 (none for an empty pool); refined +1, predicted +1; fallback selection
0-1 + answer 1. At most 1 + 3 + 4 + 4 + 2 = 14.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from engine.access.graph import EvidencePath, Source, Subgraph, subgraph_within
from engine.access.retrieval import WEB, shared_scorer
from engine.methods import hydra_prompts as hp
from engine.methods.answer_spans import allowed_answers
from engine.methods.common import (
    answer_of,
    ask,
    found_in,
    gold_held,
    names_any,
    new_record,
    optional_docs,
    optional_embedder,
    question_text,
    rank_answers,
    timed,
)
from engine.methods.hydra_docs import (
    DocPath,
    Sentence,
    entity_sentences,
    knowledge_paths,
    sentence_candidates,
    top_sentences,
    web_sentences,
)
from engine.methods.hydra_paths import (
    KgPaths,
    clustered_edges,
    one_relation_per_edge,
    path_candidates,
    relevance_scorer,
    search_paths,
    skyline_depth,
    skyline_order,
)
from engine.methods.hydra_score import (
    ALIGNMENT_MODES,
    RELEVANCE_MODES,
    SUPPORT_MODES,
    Candidate,
    Pruned,
    ScoreConfig,
    Scored,
    prune,
    relevance_scores,
)
from engine.methods.labels import display_text, entity_text
from engine.methods.method_config import MethodConfig, option
from engine.methods.spec import MethodSpec
from engine.methods.topics import linked_or_searched
from engine.questions.record import AnswerRecord, AnswerSource, Question
from index.entities import normalise
from ingest.errors import LocalkgError

if TYPE_CHECKING:
    from engine.access.graph import GroupedPath
    from engine.methods.context import Context

SOURCES = ("kg", "wiki", "web")
PHASES = ("initial", "refined", "predicted", "fallback")
SUPPORT_NAMES = {"kg": "KG", "wiki": "Wiki", "web": "Web"}

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
    max_doc_entities: int = option(10, "doc_entities=reached: reached entities whose documents are read", low=1)
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
    answer_choice: str = option("free", "free: any text (paper); paths: a name the chosen KG paths show; "
                                        "evidence: those names or a span of the chosen sentences",
                                choices=("free", "paths", "evidence"))
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
    max_answer_names: int = option(60, "answer_choice=paths: names offered at most", low=1)
    trace_max_entities: int = option(300, "entity names kept per stage in extra.trace", low=1)
    seed: int = option(0, "the seed of every call and of hydra-e's relation choice")


@dataclass(frozen=True)
class HydraEConfig(HydraConfig):
    """`hydra-e`: `hydra` on a subgraph with one seeded-random relation per clustered edge."""

    one_relation_per_edge: bool = option(True, "hydra-e: one seeded-random relation per clustered edge",
                                         "HydraRAG-E")


HYDRA_DEFAULTS: dict[str, Any] = HydraConfig.defaults()
SCORE_KIND = "HydraRAG cross-score (Algorithm 4)"

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
    answer: str = ""
    enough: bool = False


class _Hydra:
    """State of one HydraRAG question."""

    def __init__(self, question: Question, ctx: Context, config: dict[str, Any], method: str) -> None:
        self.question, self.ctx = question, ctx
        self.config = (HydraEConfig if method == "hydra-e" else HydraConfig).from_config(config)
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
        scorer = relevance_scorer(self.label, self.kg.relation_label, topics, self.relevance(indicator)) \
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

    # -- pruning, selection, answer -----------------------------------------------------------
    def prune(self, pool: Sequence[Candidate], indicator: str) -> Pruned:
        assert self.scorer is not None
        known = {n for c in pool if c.source == "kg" for n in c.entities}
        if any(c.source != "kg" for c in pool) and self.sub is not None:
            known |= set(self.subgraph_labels().values())
        with timed(self.record, "pruning"):
            return prune(pool, indicator, self.topic_labels, known, self.scorer.vectors, self.score_config)

    def select(self, kept: Sequence[Scored], indicator: str) -> list[Candidate]:
        """LLM-aware selection: the top W_max of the W2 (no call when there is nothing to choose)."""
        k = self.config.w_max
        cands = [s.candidate for s in kept]
        if len(cands) <= k:
            return cands
        parsed = self._ask(hp.SELECT_SYSTEM, hp.select_user([c.text for c in cands], indicator, self.text, k),
                           hp.select_schema(len(cands), k), "selection", "temperature_selection",
                           "selection_max_tokens")
        if not isinstance(parsed, dict):  # a failed call keeps the cross-score order
            return cands[:k]
        return [cands[int(i[1:]) - 1] for i in dict.fromkeys(parsed["paths"])]

    def attempt(self, phase: str, pool: list[Candidate], analysis: Analysis, step: dict[str, Any]) -> Attempt:
        """Prune, select and answer; `enough` when the model says {Yes} (and the answer stands)."""
        result = Attempt(phase, _dedupe(pool))
        if not result.pool or self.scorer is None:
            step["answer"] = {"skipped": "no candidate paths"}
            return result
        result.pruned = self.prune(result.pool, analysis.skyline)
        step["relevance"] = self.scored_stage(result.pruned.after_relevance)
        step["cross"] = self.scored_stage(result.pruned.after_cross)
        result.selected = self.select(result.pruned.after_cross, analysis.skyline)
        step["selected"] = {"texts": [c.text for c in result.selected],
                            **self.stage_names([n for c in result.selected for n in c.entities],
                                               [c.text for c in result.selected])}
        step["entities"] = self.reached(result.selected)[:10]
        texts = [c.text for c in result.selected]
        if phase == "fallback":
            parsed = self._ask(hp.FALLBACK_SYSTEM, hp.answer_user(texts, analysis.skyline, self.text),
                               hp.FALLBACK_SCHEMA, "answer_fallback", "temperature_answer", "answer_max_tokens")
            result.answer = answer_of(parsed)
            own = not isinstance(parsed, dict) or parsed.get("from") != "paths"
            step["answer"] = {"answer": result.answer, "from": "own knowledge" if own else "paths"}
            self.record.extra["own_knowledge"] = own or self.support(result.answer, result.selected) == []
            return result
        parsed = self._ask(hp.ANSWER_SYSTEM, hp.answer_user(texts, analysis.skyline, self.text, analysis.sub_questions),
                           hp.answer_schema(self.answer_names(result.selected)), "answer", "temperature_answer",
                           "answer_max_tokens")
        result.answer = answer_of(parsed)
        said_yes = isinstance(parsed, dict) and parsed.get("enough") == "Yes" and bool(result.answer)
        step["answer"] = {"enough": "Yes" if said_yes else "No", "answer": result.answer,
                          "facts": parsed.get("facts", "") if isinstance(parsed, dict) else ""}
        result.enough = said_yes
        if said_yes and self.config.require_grounded_answer and not self.support(result.answer, result.selected):
            step["answer"]["ungrounded_answer"] = True
            result.enough = False
        step["sufficient"] = result.enough  # with "depth" and "entities": what `ask` shows of a step
        return result

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

    def answer_names(self, selected: Sequence[Candidate]) -> list[str]:
        """With `answer_choice: paths` and only KG paths selected: the names the answer may be
        (the names the paths show the model, never a topic entity; a name hidden behind "… N
        more" cannot be chosen); otherwise none (free text: document paths are sentences, their
        answers need not be an entity's name). With `answer_choice: evidence` (ours): those names
        and the answer-shaped spans (names, dates, figures, "yes"/"no") of the source sentences
        of the selected document evidence, whatever the sources selected."""
        choice = self.config.answer_choice
        if choice == "free" or not selected or (choice == "paths" and any(c.source != "kg" for c in selected)):
            return []
        topics = {normalise(t) for t in self.topic_labels}
        shown = [n for c in selected if c.source == "kg" for n in reversed(c.entities)]  # ends first
        names = [n for n in dict.fromkeys(shown) if normalise(n) not in topics and not n.startswith("unnamed entity")]
        limit = self.config.max_answer_names
        if choice == "paths":
            return names[:limit]
        sentences = [c.payload.sentence.text for c in selected if isinstance(c.payload, DocPath)]
        return allowed_answers(self.text, names, sentences, limit)

    # -- the record ---------------------------------------------------------------------------
    def support(self, answer: str, selected: Sequence[Candidate]) -> list[str]:
        """The sources whose selected paths name the answer (a topic entity names nothing)."""
        if not answer or normalise(answer) in {normalise(t) for t in self.topic_labels}:
            return []
        topics = {normalise(t) for t in self.topic_labels}
        found = set()
        for c in selected:
            names = [n for n in c.entities if normalise(n) not in topics]
            if names_any(answer, names) or (c.source != "kg" and found_in(answer, [c.text])):
                found.add(c.source)
        return [s for s in SOURCES if s in found]

    def reached(self, selected: Sequence[Candidate]) -> list[str]:
        """Names the selected paths reach, answer candidates first: the last entity set of each
        KG path (best path first), then the sets before it, then the documents' entities."""
        groups = [cast("GroupedPath", c.payload) for c in selected if c.source == "kg"]
        ends = [self.label(e) for g in groups for e in g.sets[-1]]
        middles = [self.label(e) for g in groups for s in reversed(g.sets[1:-1]) for e in s]
        docs = [n for c in selected if c.source != "kg" for n in reversed(c.entities)]
        return [n for n in ends + middles + docs if not n.startswith("unnamed entity")]

    def gold_in(self, names: Any, texts: Sequence[str] = ()) -> list[str]:
        """The gold answers a stage holds: a name equal to one, or (documents) a text saying it.
        For the stage-recall statistics only; nothing in the method reads it."""
        return gold_held(self.question.answers, names, texts)

    def stage_names(self, names: Sequence[str], texts: Sequence[str]) -> dict[str, Any]:
        distinct = list(dict.fromkeys(names))
        cap = self.config.trace_max_entities
        return {"entities": distinct[:cap], "entity_count": len(distinct), "gold": self.gold_in(distinct, texts)}

    def scored_stage(self, scored: Sequence[Scored]) -> dict[str, Any]:
        cands = [s.candidate for s in scored]
        return {"n": len(scored), "top": [s.as_dict() for s in scored[:3]],
                **self.stage_names([n for c in cands for n in c.entities], [c.text for c in cands if c.source != "kg"])}

    def evidence(self, selected: Sequence[Candidate], scores: dict[int, float]) -> list[EvidencePath]:
        result = []
        for c in selected:
            score = scores.get(id(c))
            if c.source == "kg":
                group = cast("GroupedPath", c.payload)
                for path in group.paths[: self.config.max_shown]:
                    ev = EvidencePath.from_path(path, self.name, self.kg.relation_label)
                    ev.score, ev.score_kind = score, SCORE_KIND
                    result.append(ev)
            else:
                s = cast(DocPath, c.payload).sentence
                source = cast(Source, s.collection if s.collection in ("wiki", "web", "domain") else "domain")
                written = "model" if self.config.doc_evidence == "paths" else None
                result.append(EvidencePath(source=source, sentences=[s.text, c.text], chunk_ids=[s.chunk_id],
                                           titles=[s.title], score=score, score_kind=SCORE_KIND,
                                           written_by=written))
        return result

    def finish(self, attempt: Attempt) -> None:
        phase, answer, selected = attempt.phase, attempt.answer, attempt.selected
        self.record.extra["phase"] = phase
        self.record.extra["answer_text"] = answer
        candidates = [n for n in dict.fromkeys(self.reached(selected)) if n not in self.topic_labels]
        self.record.prediction, self.record.predictions = rank_answers(answer, candidates, self.topic_labels)
        support = self.support(answer, selected)
        self.record.extra["support_sources"] = support  # eval's Fig. 8 categories
        self.record.extra["support"] = "+".join(SUPPORT_NAMES[s] for s in support) or "LLM"
        kg, doc = "kg" in support, any(s != "kg" for s in support)
        source = "both" if kg and doc else "kg" if kg else "doc" if doc else "llm"
        if not answer and self.record.prediction:
            # no answer text (a failed call): the prediction is the best entity the paths reach
            source = "kg" if any(c.source == "kg" for c in selected) else "doc"
        self.record.answer_source = cast(AnswerSource, source if self.record.prediction else "none")
        scores = {id(s.candidate): round(s.cross, 6) for s in attempt.pruned.after_cross}
        self.record.paths = self.evidence(selected, scores)
        self.record.extra["final_paths"] = [{"text": c.text, "source": c.source} for c in selected]
        self.record.extra["trace"] = self.trace


def _dedupe(pool: Sequence[Candidate]) -> list[Candidate]:
    seen: dict[tuple[str, str], Candidate] = {}
    for c in pool:
        seen.setdefault((c.source, c.text), c)
    return list(seen.values())


# ---- the phases -----------------------------------------------------------------------------------


def _refine(run: _Hydra, analysis: Analysis, last: Attempt) -> tuple[str, str, list[str]]:
    """The follow-up question, its indicator and its topic entities (linked; the question's own
    first). A failed call keeps the question and the skyline."""
    parsed = run._ask(hp.REFINE_SYSTEM, hp.refine_user([c.text for c in last.selected], analysis.skyline, run.text),
                      hp.REFINE_SCHEMA, "refine", "temperature_exploration", "refine_max_tokens")
    if not isinstance(parsed, dict):
        return run.text, analysis.skyline, list(run.topics)
    q_new = " ".join(str(parsed["question"]).split())
    i_new = " ".join(str(parsed["skyline"]).split()) or analysis.skyline
    topics = list(run.topics)
    try:
        linker = run.ctx.linker
        topics += [c.entity for c in linker.link(q_new) if linker.has(c.entity)][: run.config.max_topic_entities]
    except (LocalkgError, RuntimeError):
        pass
    return q_new, i_new, list(dict.fromkeys(topics))


def _predict(run: _Hydra, pool: Sequence[Candidate]) -> list[tuple[str, str]]:
    k = run.config.w_max
    shown = list(dict.fromkeys(c.text for c in pool))[: 2 * k]  # the paths chosen in both phases
    parsed = run._ask(hp.PREDICT_SYSTEM, hp.predict_user(shown, run.text, k), hp.predict_schema(k), "predict",
                      "temperature_exploration", "predict_max_tokens")
    if not isinstance(parsed, dict):
        return []
    found = [(" ".join(str(p["answer"]).split()), " ".join(str(p["skyline"]).split()))
             for p in parsed["predictions"]]
    return [(a, s) for a, s in found if a]


def _align(run: _Hydra, answer: str) -> tuple[str | None, float]:
    """A predicted answer's entity in the subgraph: its name exactly, else the most similar name
    (cosine >= align_threshold) among the first `max_align_nodes` entities by hop distance."""
    labels = run.subgraph_labels()
    key = normalise(answer)
    for node, label in labels.items():
        if normalise(label) == key:
            return node, 1.0
    if run.scorer is None or run.sub is None:
        return None, 0.0
    depth = run.sub.depth
    nodes = sorted((n for n in labels if n not in run.topics), key=lambda n: (depth.get(n, 99), n))
    nodes = nodes[: run.config.max_align_nodes]
    if not nodes:
        return None, 0.0
    with timed(run.record, "alignment"):
        best = run.scorer.rank(answer, [labels[n] for n in nodes], 1)[0]
    return (nodes[best[0]], best[1]) if best[1] >= run.config.align_threshold else (None, best[1])


def run_hydra_method(question: Question, ctx: Context, config: dict[str, Any], method: str) -> AnswerRecord:
    """HydraRAG (Algorithm 3): initialisation, then initial, refined and predicted exploration,
    each pruned (Algorithm 4) and answered; a fallback answer after all three."""
    run = _Hydra(question, ctx, config, method)
    d_max = run.config.d_max
    limit = run.config.max_topic_entities
    run.topics = linked_or_searched(question, ctx, run.record, limit, run.config.topic_search, run.name)
    run.topic_labels = [run.label(t) for t in run.topics]
    available = run.available_sources()
    analysis = run.analyse(available)
    run.record.extra.update({"available_sources": available, "selected_sources": analysis.sources,
                             "skyline": analysis.skyline, "d_predict": analysis.d_predict,
                             "sub_questions": analysis.sub_questions})
    if analysis.fallback:
        run.record.extra["analysis_fallback"] = True
    attempts: list[Attempt] = []
    if available and run.scorer is not None:
        ordered = skyline_order(run.topics, run.topic_labels, analysis.skyline)
        # initial exploration: the selected sources at min(D_predict, D_max)
        depth = min(analysis.d_predict, d_max) if run.config.initial_depth == "predicted" else d_max
        step: dict[str, Any] = {"phase": "initial", "indicator": analysis.skyline, "depth": depth,
                                "sources": analysis.sources}
        run.trace.append(step)
        up_to = run.config.path_lengths == "up_to"
        pool = run.explore(step, analysis.sources, ordered, analysis.skyline, depth, run.topics, run.text,
                           all_depths=up_to)
        attempts.append(run.attempt("initial", pool, analysis, step))
        if attempts[-1].enough:
            run.finish(attempts[-1])
            return run.record
        # refined exploration: a follow-up question and indicator, every source, D_max
        q_new, i_new, new_topics = _refine(run, analysis, attempts[-1])
        later = run.later_sources(available)
        step = {"phase": "refined", "question": q_new, "indicator": i_new, "depth": d_max, "sources": later}
        run.trace.append(step)
        reached = run.reached_entities(new_topics, attempts, step)
        pool = run.explore(step, later, ordered, i_new, d_max, new_topics, q_new, all_depths=up_to, reached=reached)
        attempts.append(run.attempt("refined", pool, analysis, step))
        if attempts[-1].enough:
            run.finish(attempts[-1])
            return run.record
        # predicted exploration: the model's candidate answers as extra endpoints
        seen = [c for a in attempts for c in (a.selected or a.pool)]
        step = {"phase": "predicted", "depth": d_max, "sources": later, "predictions": []}
        run.trace.append(step)
        pool = []
        reached = run.reached_entities(run.topics, attempts, step)
        for answer, indicator in _predict(run, seen):
            node, similarity = _align(run, answer) if "kg" in available else (None, 0.0)
            step["predictions"].append({"answer": answer, "indicator": indicator,
                                        "aligned": run.name(node) if node else None,
                                        "similarity": round(similarity, 4)})
            extra = [node] if node and node not in run.topics else []
            listed = skyline_order([*run.topics, *extra], [*run.topic_labels, *(run.label(n) for n in extra)],
                                   indicator)
            kg_sources = later if extra else [s for s in later if s != "kg"]
            pool += run.explore(step, kg_sources, listed, indicator, d_max, [*run.topics, *extra], run.text,
                                all_depths=True, reached=reached)
        attempts.append(run.attempt("predicted", pool, analysis, step))
        if attempts[-1].enough:
            run.finish(attempts[-1])
            return run.record
    # fallback: every path found, and the model's own knowledge
    step = {"phase": "fallback", "depth": d_max}
    run.trace.append(step)
    final = run.attempt("fallback", [c for a in attempts for c in a.pool], analysis, step)
    if not final.pool:
        parsed = run._ask(hp.FALLBACK_SYSTEM, hp.answer_user([], analysis.skyline, run.text), hp.FALLBACK_SCHEMA,
                          "answer_fallback", "temperature_answer", "answer_max_tokens")
        final.answer = answer_of(parsed)
        step["answer"] = {"answer": final.answer, "from": "own knowledge"}
        run.record.extra["own_knowledge"] = True
        if parsed is None:
            run.record.error = "the final answer call failed: " + run.record.extra["call_errors"][-1]["error"]
    run.finish(final)
    return run.record


def run_hydra(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    return run_hydra_method(question, ctx, config, "hydra")


def run_hydra_e(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    return run_hydra_method(question, ctx, config, "hydra-e")


# added after the first runs: in the config hash only when set away from the default
_ADDED = ("group_scoring", "beam", "initial_depth", "path_lengths", "answer_choice", "max_answer_names",
          "web_collections", "topic_search", "doc_evidence", "doc_entities", "max_doc_entities")
HYDRA = MethodSpec.typed(
    "hydra", run_hydra, HydraConfig,
    "HydraRAG: skyline-guided path search over KG and documents, cross-source pruning, phased answering",
    hash_when_set=_ADDED)
HYDRA_E = MethodSpec.typed(
    "hydra-e", run_hydra_e, HydraEConfig,
    "HydraRAG-E: HydraRAG with one seeded-random relation per clustered edge of the question subgraph",
    hash_when_set=_ADDED)
