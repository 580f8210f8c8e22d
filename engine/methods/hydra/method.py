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

The flow is here; the config is `hydra_config`, the question's state `hydra_state` (analysis),
`hydra_explore` (retrieval), `hydra_answer` (pruning, selection, answer), `hydra_phases` (refined
and predicted phases) and `hydra_record` (the record).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.methods.hydra import prompts as hp
from engine.methods.hydra.answer import HydraRun
from engine.methods.hydra.config import HydraConfig, HydraEConfig, HydraSConfig
from engine.methods.hydra.paths import skyline_order
from engine.methods.hydra.phases import align, predict, refine
from engine.methods.hydra.state import Analysis, Attempt
from engine.methods.shared.common import answer_of
from engine.methods.shared.topics import linked_or_searched
from engine.methods.spec import MethodSpec
from engine.questions.record import AnswerRecord, Question

if TYPE_CHECKING:
    from engine.methods.context import Context


def run_hydra_method(question: Question, ctx: Context, config: dict[str, Any], method: str) -> AnswerRecord:
    """HydraRAG (Algorithm 3): initialisation, then initial, refined and predicted exploration,
    each pruned (Algorithm 4) and answered; a fallback answer after all three."""
    run = HydraRun(question, ctx, config, method)
    run.topics = linked_or_searched(question, ctx, run.record, run.config.max_topic_entities,
                                    run.config.topic_search, run.name)
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
        for phase in (_initial, _refined, _predicted):
            attempts.append(phase(run, analysis, available, ordered, attempts))
            if attempts[-1].enough:
                run.finish(attempts[-1])
                return run.record
    _fallback(run, analysis, attempts)
    return run.record


def _initial(run: HydraRun, analysis: Analysis, available: list[str], ordered: list[str],
             attempts: list[Attempt]) -> Attempt:
    """Initial exploration: the selected sources at min(D_predict, D_max) (`initial_depth: max`: D_max)."""
    d_max = run.config.d_max
    depth = min(analysis.d_predict, d_max) if run.config.initial_depth == "predicted" else d_max
    step: dict[str, Any] = {"phase": "initial", "indicator": analysis.skyline, "depth": depth,
                            "sources": analysis.sources}
    run.trace.append(step)
    pool = run.explore(step, analysis.sources, ordered, analysis.skyline, depth, run.topics, run.text,
                       all_depths=run.config.path_lengths == "up_to")
    return run.attempt("initial", pool, analysis, step)


def _refined(run: HydraRun, analysis: Analysis, available: list[str], ordered: list[str],
             attempts: list[Attempt]) -> Attempt:
    """Refined exploration: a follow-up question and indicator, every available source, D_max."""
    d_max = run.config.d_max
    q_new, i_new, new_topics = refine(run, analysis, attempts[-1])
    later = run.later_sources(available)
    step = {"phase": "refined", "question": q_new, "indicator": i_new, "depth": d_max, "sources": later}
    run.trace.append(step)
    reached = run.reached_entities(new_topics, attempts, step)
    pool = run.explore(step, later, ordered, i_new, d_max, new_topics, q_new,
                       all_depths=run.config.path_lengths == "up_to", reached=reached)
    return run.attempt("refined", pool, analysis, step)


def _predicted(run: HydraRun, analysis: Analysis, available: list[str], ordered: list[str],
               attempts: list[Attempt]) -> Attempt:
    """Predicted exploration: the model's candidate answers, aligned with the subgraph, as extra endpoints."""
    d_max = run.config.d_max
    later = run.later_sources(available)
    seen = [c for a in attempts for c in (a.selected or a.pool)]
    step: dict[str, Any] = {"phase": "predicted", "depth": d_max, "sources": later, "predictions": []}
    run.trace.append(step)
    pool = []
    reached = run.reached_entities(run.topics, attempts, step)
    for answer, indicator in predict(run, seen):
        node, similarity = align(run, answer) if "kg" in available else (None, 0.0)
        step["predictions"].append({"answer": answer, "indicator": indicator,
                                    "aligned": run.name(node) if node else None,
                                    "similarity": round(similarity, 4)})
        extra = [node] if node and node not in run.topics else []
        listed = skyline_order([*run.topics, *extra], [*run.topic_labels, *(run.label(n) for n in extra)],
                               indicator)
        kg_sources = later if extra else [s for s in later if s != "kg"]
        pool += run.explore(step, kg_sources, listed, indicator, d_max, [*run.topics, *extra], run.text,
                            all_depths=True, reached=reached)
    return run.attempt("predicted", pool, analysis, step)


def _fallback(run: HydraRun, analysis: Analysis, attempts: list[Attempt]) -> None:
    """The fallback: every path found, pruned and selected again, and an answer from them plus the
    model's own knowledge (marked as such)."""
    step: dict[str, Any] = {"phase": "fallback", "depth": run.config.d_max}
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


def run_hydra(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    return run_hydra_method(question, ctx, config, "hydra")


def run_hydra_e(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    return run_hydra_method(question, ctx, config, "hydra-e")


def run_hydra_s(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
    return run_hydra_method(question, ctx, config, "hydra-s")


# added after the first runs: in the config hash only when set away from the default
_ADDED = ("group_scoring", "beam", "initial_depth", "path_lengths", "answer_choice", "max_answer_names",
          "web_collections", "topic_search", "doc_evidence", "doc_entities", "max_doc_entities",
          "path_relevance", "answer_prompt", "chain_weights", "end_prefix", "answer_windows", "windows_beside_docs", "doc_answers",
          "answer_forms", "echo_retry", "topic_windows")
HYDRA = MethodSpec.typed(
    "hydra", run_hydra, HydraConfig,
    "HydraRAG: skyline-guided path search over KG and documents, cross-source pruning, phased answering",
    hash_when_set=_ADDED)
HYDRA_E = MethodSpec.typed(
    "hydra-e", run_hydra_e, HydraEConfig,
    "HydraRAG-E: HydraRAG with one seeded-random relation per clustered edge of the question subgraph",
    hash_when_set=_ADDED)
HYDRA_S = MethodSpec.typed(
    "hydra-s", run_hydra_s, HydraSConfig,
    "HydraRAG with settings for small models (ours): every depth, KG paths ranked by the chains scorer, "
    "sentences as evidence, answers from the paths' ends, the evidence's words or the reached entities' documents",
    hash_unless={"chain_weights": "first", "end_prefix": False, "answer_windows": 0, "windows_beside_docs": False, "doc_answers": "free",
                 "answer_forms": False, "echo_retry": "off", "topic_windows": False})
