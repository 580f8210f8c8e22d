"""The answer step of a HydraRAG phase (Algorithm 4): pruning, the LLM-aware selection of the
top W_max paths and the answer call, with the names an answer may be."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from engine.access.graph import GroupedPath
from engine.methods.hydra import prompts as hp
from engine.methods.hydra.chain_relevance import ChainRelevance, scaled
from engine.methods.hydra.docs import DocPath, entity_sentences, sentence_candidates, top_sentences
from engine.methods.hydra.explore import HydraExplorer
from engine.methods.hydra.score import Candidate, Pruned, Scored, prune
from engine.methods.hydra.state import Analysis, Attempt
from engine.methods.shared.answer_spans import allowed_answers, echoes
from engine.methods.shared.chain_plans import starts_with_fact
from engine.methods.shared.chain_scoring import masked_question
from engine.methods.shared.common import answer_of, timed
from index.entities import normalise
from index.graph_docs import restates_graph


class HydraRun(HydraExplorer):
    """State of one HydraRAG question, with each phase's pruning, selection and answer."""

    # -- pruning, selection, answer -----------------------------------------------------------
    def prune(self, pool: Sequence[Candidate], indicator: str) -> Pruned:
        assert self.scorer is not None
        known = {n for c in pool if c.source == "kg" for n in c.entities}
        if any(c.source != "kg" for c in pool) and self.sub is not None:
            known |= set(self.subgraph_labels().values())
        chains = self.chain_relevance()
        if chains is not None:  # ours: the KG paths' relevance from the chain scorer, scaled to [0, 1]
            at = [i for i, c in enumerate(pool) if c.source == "kg" and isinstance(c.payload, GroupedPath)]
            values = scaled(chains.of_groups([pool[i].payload for i in at]))
            pool = list(pool)
            for i, value in zip(at, values, strict=True):
                pool[i] = replace(pool[i], relevance=value)
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
        if phase != "fallback":
            result.read = self.read_windows(result.selected)
        if result.read:
            texts_read = [c.text for c in result.read]
            step["read"] = {"texts": texts_read, "gold": self.gold_in([], texts_read)}
        texts = [c.text for c in [*result.selected, *result.read]]
        if phase == "fallback":
            parsed = self._ask(hp.FALLBACK_SYSTEM, hp.answer_user(texts, analysis.skyline, self.text),
                               hp.FALLBACK_SCHEMA, "answer_fallback", "temperature_answer", "answer_max_tokens")
            result.answer = answer_of(parsed)
            own = not isinstance(parsed, dict) or parsed.get("from") != "paths"
            step["answer"] = {"answer": result.answer, "from": "own knowledge" if own else "paths"}
            self.record.extra["own_knowledge"] = own or self.support(result.answer, result.selected) == []
            return result
        short = self.config.answer_prompt == "short"  # ours: evidence and question only, no facts
        user = hp.answer_user(texts, "", self.text) if short else \
            hp.answer_user(texts, analysis.skyline, self.text, analysis.sub_questions)
        system = hp.SHORT_ANSWER_SYSTEM if short else hp.ANSWER_SYSTEM
        names = self.answer_names(result.selected, result.read)
        parsed = self._ask(system, user, hp.answer_schema(names, short), "answer", "temperature_answer",
                           "answer_max_tokens")
        result.answer = answer_of(parsed)
        echo = self.config.echo_retry == "spans" and not names and echoes(self.text, result.answer)
        if echo:
            # ours: the question does not ask for what it says; once more, among the evidence's spans
            spans = [s for s in self._doc_answers(result.selected, result.read) if not echoes(self.text, s)]
            if spans:
                step["echo"] = result.answer
                parsed = self._ask(system, user, hp.answer_schema(spans, short), "answer_echo",
                                   "temperature_answer", "answer_max_tokens")
                result.answer = answer_of(parsed)
        said_yes = isinstance(parsed, dict) and parsed.get("enough") == "Yes" and bool(result.answer)
        step["answer"] = {"enough": "Yes" if said_yes else "No", "answer": result.answer,
                          "facts": parsed.get("facts", "") if isinstance(parsed, dict) else ""}
        result.enough = said_yes
        if said_yes and self.config.require_grounded_answer and \
                not self.support(result.answer, [*result.selected, *result.read]):
            step["answer"]["ungrounded_answer"] = True
            result.enough = False
        if said_yes and self.config.echo_retry == "next" and echoes(self.text, result.answer):
            step["answer"]["echo"] = True  # ours: the question does not ask for what it says
            result.enough = False
        step["sufficient"] = result.enough  # with "depth" and "entities": what `ask` shows of a step
        return result

    def read_windows(self, selected: Sequence[Candidate]) -> list[Candidate]:
        """`answer_windows` (ours): where the model chose KG paths only (with `windows_beside_docs`,
        where it chose any KG path, beside document evidence too, unless that evidence is all of
        documents that restate the graph, `_graph_text_only`), the best `answer_windows`
        sentence windows of the documents of the entities those paths reach (each path's end at its
        best prefix first, then the sets before it, `_reached_ids`), ranked by cosine to the
        question with its topic entities masked (the topic's own report answers "its chief
        executive", not "the chief executive of its supplier"). The paper's answer reads the chosen
        paths only, so a fact that only a reached entity's report states never reaches it: the
        graph reaches the wind turbine maker, its report names the town of its main plant.

        With `path_relevance: chains`, only where the question says a word that names no relation
        of the question subgraph (the chain scorer's `silent_words`: "chief executive", "flagship",
        "employees"): where every word names one ("who founded the parent company of X"), the
        paths answer, and a 0.5B model offered the windows' names too picked a wrong one."""
        k = self.config.answer_windows
        kg_paths = [c for c in selected if c.source == "kg"]
        with_docs = len(kg_paths) < len(selected)
        if with_docs and (not self.config.windows_beside_docs or _graph_text_only(selected)):
            return []
        if k <= 0 or self.docs is None or self.scorer is None or not kg_paths:
            return []
        chains = self.chain_relevance()
        if chains is not None and not chains.scorer.silent_words:
            return []  # every word of the question names a relation of the graph: its paths answer
        with timed(self.record, "retrieval"):
            sentences = entity_sentences(self.docs, self._window_ids(kg_paths, chains), self.config.window_sentences,
                                         self.config.max_chunks_per_entity)
            query = chains.query if chains is not None else masked_question(self.text, self.topic_labels)
            # `windows_beside_docs`: room for the chosen sentences, which are not read twice
            more = len(selected) if with_docs else 0
            best = top_sentences(self.scorer, query, sentences, k + more, self.config.max_sentence_chars)
        shown = {c.text for c in selected}
        return [c for c in sentence_candidates(best, self.topic_labels, self.config.max_sentence_chars)
                if c.text not in shown][:k]

    def _window_ids(self, kg_paths: Sequence[Candidate], chains: ChainRelevance | None) -> list[str]:
        """The entities whose documents `read_windows` reads: those the paths reach (`_reached_ids`);
        with `topic_windows` (ours), the topic entities first where no question word names a relation
        and a chosen path starts with a graph fact: the route is then the scorer's guess, and the
        topic's own report states what the question asks of it."""
        reached = self._reached_ids(kg_paths)
        if not self.config.topic_windows or chains is None or not chains.scorer.names_no_relation:
            return reached
        if not any(_starts_with_fact(c) for c in kg_paths):
            return reached
        self.record.extra["topic_windows"] = True  # where the option acted: the runs count these
        return list(dict.fromkeys([*self.topics, *reached]))

    def _reached_ids(self, selected: Sequence[Candidate]) -> list[str]:
        """The entities the chosen KG paths reach, not the topics: each path's end set (at its best
        prefix, `_best_prefix`) first, then the sets before it, `max_shown` per set and
        `max_doc_entities` in all."""
        shown = self.config.max_shown
        ends: list[str] = []
        inner: list[str] = []
        for c in selected:
            group = c.payload
            if not isinstance(group, GroupedPath):
                continue
            end = self._best_prefix(group) if self.config.answer_choice == "ends" else len(group.relations)
            ends += group.sets[end][:shown]
            inner += [e for entities in reversed(group.sets[1:end]) for e in entities[:shown]]
        topics = set(self.topics)
        return [e for e in dict.fromkeys([*ends, *inner]) if e not in topics][: self.config.max_doc_entities]

    def answer_names(self, selected: Sequence[Candidate], read: Sequence[Candidate] = ()) -> list[str]:
        """With `answer_choice: paths` and only KG paths selected: the names the answer may be
        (the names the paths show the model, never a topic entity; a name hidden behind "… N
        more" cannot be chosen); otherwise none (free text: document paths are sentences, their
        answers need not be an entity's name). With `answer_choice: evidence` (ours): those names
        and the answer-shaped spans (names, dates, figures, "yes"/"no") of the source sentences
        of the selected document evidence, whatever the sources selected. With `answer_choice:
        ends` (ours) and only KG paths selected: the names of their end sets (`_end_names`). The
        windows `read` beside a KG-only selection (`answer_windows`) add their answer-shaped spans
        to the names of `paths` and `ends`."""
        choice = self.config.answer_choice
        limit = self.config.max_answer_names
        if choice in ("paths", "ends") and any(c.source != "kg" for c in selected):
            return self._doc_answers(selected, read) if self.config.doc_answers == "spans" else []
        if choice == "free" or not selected:
            return []
        spans = allowed_answers(self.text, [], _sentences(read), limit, counts=True, definite=True) \
            if read and choice != "evidence" else []
        if choice == "ends":
            return list(dict.fromkeys([*self._answerable(self._end_names(selected))[:limit], *spans]))
        names = self._answerable([n for c in selected if c.source == "kg" for n in reversed(c.entities)])  # ends first
        if choice == "paths":
            return list(dict.fromkeys([*names[:limit], *spans]))
        return allowed_answers(self.text, names, _sentences([*selected, *read]), limit)

    def _doc_answers(self, selected: Sequence[Candidate], read: Sequence[Candidate]) -> list[str]:
        """`doc_answers: spans` (ours): where the model chose document evidence, the names of the
        chosen KG paths' ends and the answer-shaped spans of the chosen and read sentences, never
        a topic entity (a 0.5B model answered "where is the host of the American survival skills
        reality show, The Island, originally from?" with The Island)."""
        kg = [c for c in selected if c.source == "kg"]
        ends = self._end_names(kg) if self.config.answer_choice == "ends" else \
            [n for c in kg for n in reversed(c.entities)]
        # every span first: those naming a topic entity are dropped before the limit
        spans = allowed_answers(self.text, [], _sentences([*selected, *read]), 10 * self.config.max_answer_names,
                                counts=True, definite=True)
        return self._answerable([*ends, *spans])[: self.config.max_answer_names]

    def _answerable(self, names: Sequence[str]) -> list[str]:
        """The names, once each, that may be an answer: never a topic entity or an unnamed one."""
        topics = {normalise(t) for t in self.topic_labels}
        return [n for n in dict.fromkeys(names) if normalise(n) not in topics and not n.startswith("unnamed entity")]

    def _end_names(self, selected: Sequence[Candidate]) -> list[str]:
        """`answer_choice: ends` (ours): the names shown in the last entity set of each chosen KG
        path (a small model otherwise answers with the middle of a chain: the writer of "the
        actors in the films written by the writer of X"); a path through two or more topic
        entities offers every name it shows (the answer may sit between them)."""
        names: list[str] = []
        for c in selected:
            group = c.payload
            if not isinstance(group, GroupedPath):
                continue
            inner = [e for entities in group.sets[1:-1] for e in entities]
            if any(e in self.topics for e in inner):
                names += list(reversed(c.entities))
            else:
                end = group.sets[self._best_prefix(group)]
                names += list(dict.fromkeys(self.label(e) for e in end))[: self.config.max_shown]
        return names

    def _best_prefix(self, group: GroupedPath) -> int:
        """`end_prefix` (ours): the length of the chosen path's prefix that the chain scorer ranks
        best against the question, so that a path the model chose for its first steps offers the
        end the question asks for ("board chair, then born in, then located in" offers the city
        of "in which city was the board chair of X born", not the country); without it (or
        without `path_relevance: chains`), the whole path."""
        chains = self.chain_relevance() if self.config.end_prefix else None
        steps = len(group.relations)
        if chains is None or steps < 2:
            return steps
        key = (group.topic, tuple(group.relations), tuple(tuple(entities) for entities in group.sets))
        if key not in self._prefix_cuts:  # the answer's names and `answer_windows` both ask
            prefixes = [GroupedPath(group.topic, group.relations[:n], group.sets[: n + 1], [], group.score)
                        for n in range(1, steps + 1)]
            scores = chains.of_groups(prefixes)
            self._prefix_cuts[key] = 1 + max(range(steps), key=lambda i: (scores[i], i))
        return self._prefix_cuts[key]


def _graph_text_only(candidates: Sequence[Candidate]) -> bool:
    """Whether every document window among the candidates comes from a document that restates the
    graph's own facts (`--kg-as-docs`; False without document windows): reading more documents
    beside them adds what the KG paths already offer, as another film's year."""
    windows = [c.payload.sentence for c in candidates if isinstance(c.payload, DocPath)]
    return bool(windows) and all(restates_graph(w.chunk_id) for w in windows)


def _sentences(candidates: Sequence[Candidate]) -> list[str]:
    """The source sentences of the document windows among the candidates (KG paths have none)."""
    return [c.payload.sentence.text for c in candidates if isinstance(c.payload, DocPath)]


def _dedupe(pool: Sequence[Candidate]) -> list[Candidate]:
    seen: dict[tuple[str, str], Candidate] = {}
    for c in pool:
        seen.setdefault((c.source, c.text), c)
    return list(seen.values())


def _starts_with_fact(candidate: Candidate) -> bool:
    """A KG path's `starts_with_fact`."""
    group = candidate.payload
    return isinstance(group, GroupedPath) and starts_with_fact(group.relations)
