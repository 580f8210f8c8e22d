"""Entity linking: from a question to KG entities, with a score and a reason for each.

Order of evidence:
1. topic entities given with the question (the papers' files carry Freebase MIDs / Wikidata
   QIDs): taken as they are;
2. mentions marked in `[brackets]` (MetaQA);
3. otherwise, mentions found by n-gram matching against the label/alias dictionary (longest,
   best-shaped match wins; an LLM extraction step can supply mentions instead).
Each mention is resolved by exact label, alias, then normalised match; a mention that matches
nothing is resolved as a misspelt name (`FuzzyNames`: a character-trigram index over the
normalised names, checked by edit distance), else by label-embedding similarity (when the index
has entity-label vectors). Both scores are similarities in [0, 1] kept only above the threshold.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from engine.access.mention_spans import (
    _BRACKETED,
    _TOKEN,
    _capitalised_runs,
    _cuts,
    _is_stop_span,
    _overlaps_not_within,
    _shape_weight,
    _Span,
    _spans,
)
from engine.access.name_search import FUZZY_MAX_EDITS, FuzzyNames, LabelIndex
from index.embedder import Embedder
from index.entities import EntityTable, normalise
from index.paths import IndexPaths
from ingest.base.errors import IndexError_
from ingest.terms import expand_entity_id

# How much a kind of name match is worth.
MATCH_WEIGHT = {"id": 1.0, "exact": 1.0, "alias": 0.95, "normalised": 0.85}
DEFAULT_THRESHOLD = 0.8
# A dictionary match that is only part of a longer capitalised run counts for less.
PARTIAL_PENALTY = 0.8
MAX_NGRAM = 10
FUZZY_MIN_CHARS = 4  # shorter mentions are too ambiguous to correct
# Names in the trigram index: on a larger table, the best-connected ones. A million names keep
# about 55 MB of arrays, take some 7 s and 0.7 GB at the peak to index, 4 ms a search.
FUZZY_MAX_NAMES = 1_000_000


@dataclass(frozen=True)
class LinkCandidate:
    """A KG entity proposed for a mention of the question, and why."""

    mention: str
    entity: str
    label: str
    score: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class EntityLinker:
    """Links questions to entities of one index."""

    def __init__(
        self,
        table: EntityTable,
        label_index: LabelIndex | None = None,
        embedder: Embedder | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        max_ngram: int = MAX_NGRAM,
        paths: IndexPaths | None = None,
    ) -> None:
        self.table = table
        self._paths = paths
        self.label_index = label_index
        self._embedder = embedder
        self.threshold = threshold
        self.max_ngram = max_ngram

    @classmethod
    def open(cls, root: Path | IndexPaths, embedder: Embedder | None = None, threshold: float = DEFAULT_THRESHOLD) -> EntityLinker:
        """A linker over an index; label-embedding search is used when the index has it."""
        paths = root if isinstance(root, IndexPaths) else IndexPaths(Path(root))
        table = EntityTable.open(paths)
        label_index = LabelIndex(paths) if paths.vector_ids("entities").exists() else None
        return cls(table, label_index, embedder, threshold, paths=paths)

    # -- public ------------------------------------------------------------------------------

    def has(self, entity: str) -> bool:
        """Whether `entity` is an entity of the index."""
        return self.table.has(entity)

    def link(
        self,
        question: str,
        topic_entities: Iterable[str] | Mapping[str, str] | None = None,
        mentions: Sequence[str] | None = None,
    ) -> list[LinkCandidate]:
        """Candidates for the question's topic entities, best first.

        `topic_entities`: pre-linked ids (or {id: name}) from the dataset, used as they are.
        `mentions`: mention strings from another extractor (e.g. an LLM) instead of n-grams.
        """
        if topic_entities:
            return self._given(topic_entities)
        bracketed = [m.strip() for m in _BRACKETED.findall(question) if m.strip()]
        if bracketed or mentions:
            prefix = "bracket" if bracketed else "mention"
            found: list[LinkCandidate] = []
            for mention in bracketed or list(mentions or []):
                found.extend(self.resolve(mention, prefix))
            return _best_first(found)
        return _best_first(self._from_ngrams(question))

    def resolve(self, mention: str, prefix: str = "mention", limit: int = 3) -> list[LinkCandidate]:
        """Entities for one mention: exact, alias, normalised, spelling (fuzzy), then
        label-embedding similarity."""
        found = self.table.find(mention)
        if found:
            weight = MATCH_WEIGHT[found[0][1]]
            return [
                LinkCandidate(mention, entity, self.table.label(entity), round(weight - 0.01 * i, 4), f"{prefix}: {how} match")
                for i, (entity, how) in enumerate(found[:limit])
            ]
        return self._by_spelling(mention, prefix, limit) or self._by_embedding([mention], prefix, limit)

    # -- steps -------------------------------------------------------------------------------

    def _given(self, topic_entities: Iterable[str] | Mapping[str, str]) -> list[LinkCandidate]:
        pairs = list(topic_entities.items()) if isinstance(topic_entities, Mapping) else [(e, "") for e in topic_entities]
        result = []
        for given, name in pairs:
            hits = self.table.find(given)
            if hits and hits[0][1] == "id":
                entity = hits[0][0]
                result.append(LinkCandidate(name or given, entity, self.table.label(entity), 1.0, "given topic entity"))
                continue
            by_name = self.table.find(name) if name else []
            if by_name:
                entity, how = by_name[0]
                result.append(LinkCandidate(name, entity, self.table.label(entity), MATCH_WEIGHT[how],
                                            f"given topic entity {given} not in KG; its name: {how} match"))
            else:
                result.append(LinkCandidate(name or given, expand_entity_id(given), name or given, 0.5,
                                            "given topic entity, not in the KG"))
        return result

    def _from_ngrams(self, question: str) -> list[LinkCandidate]:
        matches = self._dictionary_matches(question)
        taken = [(span.start, span.end) for span, _ in matches]
        result: list[LinkCandidate] = []
        all_runs = _capitalised_runs(question)
        misspelt = self._misspelt_names(question, [span for span, _ in matches], all_runs)
        result.extend(candidate for _, candidate in misspelt)
        # A name-like run that no match covers whole (misspelt, abbreviated, or only partly a
        # label): try label similarity on the whole run (unless it is a misspelt name, found
        # above), and trust the partial matches less.
        runs = [r for r in all_runs if (r.start, r.end) not in taken]
        wider = runs + [span for span, _ in misspelt]
        runs = [r for r in runs if not any(m.start < r.end and r.start < m.end for m, _ in misspelt)]
        for span, found in matches:
            partial = any(r.start <= span.start and span.end <= r.end for r in wider)
            score = MATCH_WEIGHT[found[0][1]] * _shape_weight(span.text) * (PARTIAL_PENALTY if partial else 1.0)
            note = " (part of a longer name)" if partial else ""
            for i, (entity, how) in enumerate(found[:3]):
                result.append(LinkCandidate(span.text, entity, self.table.label(entity), round(score - 0.01 * i, 4),
                                            f"n-gram: {how} match{note}"))
        if runs:
            result.extend(self._by_embedding([r.text for r in runs], "n-gram", 1))
        if not result and self.label_index is not None:
            # Nothing name-like at all (e.g. a lower-case, misspelt question): embed the
            # content-word n-grams and keep the best non-overlapping ones above the threshold.
            result = self._content_ngrams_by_embedding(question)
        return result

    def _misspelt_names(self, question: str, matched: list[_Span], runs: list[_Span]) -> list[tuple[_Span, LinkCandidate]]:
        """Non-overlapping spans that are a label misspelt (`_by_spelling`), best first.

        A span starts with a capitalised word, is not all function words, and may hold a
        dictionary match ("Tommy hong" holds "Tommy"), but is never a match itself, inside one,
        or across its edge: a name spelt right keeps its match. It holds every capitalised run
        it touches whole: a word of a longer name ("Fertilizer" of "Altmoor Fertilizer Co") is
        no name of its own.
        """
        words = [m for m in _TOKEN.finditer(question) if m.group(0)[0].isalnum()]
        found: list[tuple[_Span, LinkCandidate]] = []
        for i, first in enumerate(words):
            if not (first.group(0)[0].isupper() or first.group(0)[0].isdigit()):
                continue
            for last in words[i:i + self.max_ngram]:
                span = _Span(first.start(), last.end(), 0, question[first.start():last.end()])
                if (_is_stop_span(span.text) or any(_overlaps_not_within(m, span) for m in matched)
                        or any(_cuts(span, r) for r in runs)):
                    continue
                # A span around a name spelt right is more likely that name and a word beside
                # it ("Martha were" is not "Martha West"): one edit at most there.
                holds_match = any(span.start <= m.start and m.end <= span.end for m in matched)
                found.extend((span, c) for c in self._by_spelling(span.text, "n-gram", 1, 1 if holds_match else FUZZY_MAX_EDITS))
        chosen: list[tuple[_Span, LinkCandidate]] = []
        for span, candidate in sorted(found, key=lambda f: (-f[1].score, f[0].start - f[0].end, f[0].start)):
            if not any(span.start < other.end and other.start < span.end for other, _ in chosen):
                chosen.append((span, candidate))
        return chosen

    def _dictionary_matches(self, question: str) -> list[tuple[_Span, list[tuple[str, str]]]]:
        """Non-overlapping n-grams that are labels or aliases: capitalised ones first, then the
        longest, then the best kind of match."""
        candidates = []
        for span in _spans(question, self.max_ngram):
            if _is_stop_span(span.text):
                continue
            found = self.table.find(span.text)
            if found and found[0][1] != "id":
                candidates.append((span, found))
        candidates.sort(key=lambda c: (-_shape_weight(c[0].text), -c[0].tokens, -MATCH_WEIGHT[c[1][0][1]], c[0].start))
        chosen: list[tuple[_Span, list[tuple[str, str]]]] = []
        for span, found in candidates:
            if not any(span.start < other.end and other.start < span.end for other, _ in chosen):
                chosen.append((span, found))
        return chosen

    def _content_ngrams_by_embedding(self, question: str) -> list[LinkCandidate]:
        words = [m for m in re.finditer(r"\w+(?:['’.-]\w+)*", question)]
        spans: list[_Span] = []
        for i in range(len(words)):
            for j in range(i, min(len(words), i + 4)):
                chosen = words[i:j + 1]
                if _is_stop_span(chosen[0].group(0)) or _is_stop_span(chosen[-1].group(0)):
                    continue
                start, end = chosen[0].start(), chosen[-1].end()
                spans.append(_Span(start, end, len(chosen), question[start:end]))
        found = self._by_embedding([s.text for s in spans[:64]], "n-gram", 1)
        by_mention = {c.mention: c for c in found}
        result: list[LinkCandidate] = []
        taken: list[_Span] = []
        for span in sorted(spans[:64], key=lambda s: -(by_mention[s.text].score if s.text in by_mention else 0)):
            candidate = by_mention.get(span.text)
            if candidate is None or any(span.start < t.end and t.start < span.end for t in taken):
                continue
            taken.append(span)
            result.append(candidate)
        return result

    def _by_spelling(self, mention: str, prefix: str, limit: int, max_edits: int = FUZZY_MAX_EDITS) -> list[LinkCandidate]:
        """Entities whose name is `mention` misspelt: a few character edits away, scored by
        1 - edits / length (the longer of the two normalised names), kept above the threshold."""
        key = normalise(mention)
        if len(key) < FUZZY_MIN_CHARS:
            return []
        by_name, degrees, ids = self.table.normalised_names(), self.table.degrees, self.table.ids
        hits = []
        for name, edits in self.fuzzy_names.search(key, max_edits):
            score = 1.0 - edits / max(len(key), len(name))
            if score >= self.threshold:
                hits += [(score, -degrees[row], ids[row], name, edits) for row in by_name[name]]
        # closest spelling first, then the best-connected entity (as for exact matches)
        result: list[LinkCandidate] = []
        same_name: Counter[str] = Counter()
        for score, _, entity, name, edits in sorted(hits, key=lambda h: (-h[0], h[1], h[2])):
            if any(c.entity == entity for c in result):
                continue  # an entity under two names (label and alias)
            result.append(LinkCandidate(mention, entity, self.table.label(entity), round(score - 0.01 * same_name[name], 4),
                                        f"{prefix}: fuzzy match, {edits} edit{'' if edits == 1 else 's'} from {name!r}"))
            same_name[name] += 1
            if len(result) >= limit:
                break
        return result

    @cached_property
    def fuzzy_names(self) -> FuzzyNames:
        """The trigram index of the table's normalised names and aliases, built at first use
        (the best-connected FUZZY_MAX_NAMES names of a larger table)."""
        by_name = self.table.normalised_names()
        names = [name for name in by_name if len(name) >= FUZZY_MIN_CHARS - FUZZY_MAX_EDITS]
        if len(names) > FUZZY_MAX_NAMES:
            degrees = self.table.degrees
            top = {name: max(degrees[row] for row in by_name[name]) for name in names}
            names = sorted(names, key=lambda n: (-top[n], n))[:FUZZY_MAX_NAMES]
        return FuzzyNames(names)

    def _by_embedding(self, mentions: list[str], prefix: str, limit: int) -> list[LinkCandidate]:
        if self.label_index is None or not mentions:
            return []
        vectors = self.embedder.encode(mentions)
        result = []
        for mention, hits in zip(mentions, self.label_index.search(vectors, max(limit * 3, 5)), strict=True):
            seen = set()
            for entity, name, score in hits:
                if score < self.threshold or entity in seen:
                    continue
                seen.add(entity)
                result.append(LinkCandidate(mention, entity, self.table.label(entity), round(score, 4),
                                            f"{prefix}: label embedding similarity {score:.3f} to {name!r}"))
                if len(seen) >= limit:
                    break
        return result

    @cached_property
    def embedder(self) -> Embedder:
        if self._embedder is not None:
            return self._embedder
        if self._paths is None:
            raise IndexError_("label-embedding linking needs an embedder or an index with vectors")
        from engine.access.documents import ParquetDocumentStore

        return ParquetDocumentStore(self._paths).embedder


def _best_first(candidates: list[LinkCandidate]) -> list[LinkCandidate]:
    seen: set[tuple[str, str]] = set()
    unique = []
    for c in sorted(candidates, key=lambda c: -c.score):
        if (c.mention, c.entity) not in seen:
            seen.add((c.mention, c.entity))
            unique.append(c)
    return unique
