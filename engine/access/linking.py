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

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from index.embedder import Embedder
from index.entities import EntityTable, normalise
from index.paths import IndexPaths
from ingest.errors import IndexError_
from ingest.terms import expand_entity_id

# How much a kind of name match is worth.
MATCH_WEIGHT = {"id": 1.0, "exact": 1.0, "alias": 0.95, "normalised": 0.85}
DEFAULT_THRESHOLD = 0.8
# A dictionary match that is only part of a longer capitalised run counts for less.
PARTIAL_PENALTY = 0.8
MAX_NGRAM = 10
RERANK_FACTOR = 8  # IVF-PQ label search: candidates fetched per wanted result, then re-ranked
# Misspelt names: at most this many character edits (a letter dropped, added, replaced, or two
# swapped); more than that is a variant ("Co" for "Company"), left to label embeddings.
FUZZY_MAX_EDITS = 2
FUZZY_MIN_CHARS = 4  # shorter mentions are too ambiguous to correct
FUZZY_CANDIDATES = 64  # names sharing the most trigrams with a mention, checked by edit distance
# Names in the trigram index: on a larger table, the best-connected ones. A million names keep
# about 55 MB of arrays, take some 7 s and 0.7 GB at the peak to index, 4 ms a search.
FUZZY_MAX_NAMES = 1_000_000
# Function words and question vocabulary: never a mention on their own.
_STOPWORD_TEXT = """a an the of in on at to for from by with about as into onto over under after before between
    during without within and or but nor not no yes is are was were be been being am do does did done
    has have had having can could will would shall should may might must it its it's this that these
    those there here what which who whom whose when where why how whats who's i me my we our you your
    he him his she her they them their one ones some any all each every other another such same than
    then so too very just also only also both either neither if else s t did also much many more most
    less least few film films movie movies show shows book books year years release released releases
    star stars starred starring act acted acts actor actors actress direct directed director directors
    write wrote written writer writers genre genres language languages type types tag tags describe
    described person people name names known famous kind sort main whose also appear appeared appears
    work works working worked play played plays"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_TOKEN = re.compile(r"\w+(?:[-'’.&]\w+)*\.?|[^\w\s]", re.UNICODE)
_BRACKETED = re.compile(r"\[([^\[\]]+)\]")
_NAME_RUN = re.compile(r"[A-Z0-9][\w'’.&-]*(?:\s+(?:(?:of|the|de|du|da|van|von|der|la|le|and|&)\s+)*[A-Z0-9][\w'’.&-]*)*")


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


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    tokens: int
    text: str


class LabelIndex:
    """Nearest entity names by embedding (the index's entity-label FAISS index and its ids)."""

    def __init__(self, paths: IndexPaths) -> None:
        import faiss
        import pyarrow.parquet as pq

        ids_path = paths.vector_ids("entities")
        if not ids_path.exists():
            raise IndexError_(f"{paths.root}: index has no entity-label vectors")
        table = pq.read_table(ids_path, columns=["entity", "name"]).to_pydict()
        self.entities: list[str] = table["entity"]
        self.names: list[str] = table["name"]
        self.index = faiss.read_index(str(paths.faiss_index("entities")))
        meta_path = paths.vector_meta
        meta = json.loads(meta_path.read_text()).get("entities", {}) if meta_path.exists() else {}
        if "nprobe" in meta:
            faiss.extract_index_ivf(self.index).nprobe = meta["nprobe"]
        if "ef_search" in meta:
            self.index.hnsw.efSearch = meta["ef_search"]
        # IVF-PQ scores are approximate and are compared with a threshold: re-rank with the
        # stored float16 vectors (same rows as the FAISS index), as ParquetDocumentStore does.
        self._exact: np.ndarray | None = None
        exact_path = paths.stored_vectors("entities")
        if meta.get("kind") == "ivfpq" and exact_path.exists():
            self._exact = np.load(exact_path, mmap_mode="r")

    def search(self, vectors: np.ndarray, k: int) -> list[list[tuple[str, str, float]]]:
        """For each query vector, up to `k` (entity, name, cosine) best first."""
        queries = np.ascontiguousarray(vectors, dtype=np.float32)
        fetch = max(k * RERANK_FACTOR, 64) if self._exact is not None else k
        scores, rows = self.index.search(queries, fetch)
        result = []
        for query, row, score in zip(queries, rows, scores, strict=True):
            found = [(int(r), float(s)) for r, s in zip(row, score, strict=True) if r >= 0]
            if self._exact is not None and found:
                ids = np.array(sorted(r for r, _ in found))
                exact = np.asarray(self._exact[ids], dtype=np.float32) @ query
                found = sorted(zip(ids.tolist(), exact.tolist(), strict=True), key=lambda item: -item[1])
            result.append([(self.entities[r], self.names[r], s) for r, s in found[:k]])
        return result


class FuzzyNames:
    """Names close in spelling to a mention: a character-trigram index (CSR arrays: each trigram's
    sorted rows) over normalised names, whose best-sharing names are checked by edit distance.

    Built in memory from the entity table at first use (nothing is written to the index folder);
    deterministic: trigrams are exact code-point triples, not hashes, and ties go to the row order.
    """

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        codes, rows = _trigram_codes(self.names)
        order = np.argsort(codes, kind="stable")  # stable: rows stay ascending within a trigram
        codes, rows = codes[order], rows[order]
        first = np.ones(len(codes), dtype=bool)
        first[1:] = (codes[1:] != codes[:-1]) | (rows[1:] != rows[:-1])  # a trigram twice in a name counts once
        codes, self._rows = codes[first], rows[first]
        self._grams, starts = np.unique(codes, return_index=True)
        self._starts = np.append(starts, len(codes))
        self._lengths = np.fromiter((len(n) for n in self.names), dtype=np.int32, count=len(self.names))

    def search(self, name: str, max_edits: int = FUZZY_MAX_EDITS) -> list[tuple[str, int]]:
        """(indexed name, edits) within `max_edits` of `name` (normalised), fewest edits first."""
        grams = np.unique(_trigram_codes([name])[0])
        at = np.searchsorted(self._grams, grams)
        found = at < len(self._grams)
        at = at[found][self._grams[at[found]] == grams[found]]
        if not len(at):
            return []
        rows, shared = np.unique(np.concatenate([self._rows[self._starts[i]:self._starts[i + 1]] for i in at]),
                                 return_counts=True)
        near = np.abs(self._lengths[rows] - len(name)) <= max_edits  # more would take more edits
        rows, shared = rows[near], shared[near]
        best = rows[np.lexsort((rows, -shared))[:FUZZY_CANDIDATES]]
        hits = [(int(row), edits) for row in best.tolist()
                if (edits := _edit_distance(name, self.names[row], max_edits)) <= max_edits]
        return [(self.names[row], edits) for row, edits in sorted(hits, key=lambda h: (h[1], h[0]))]


def _trigram_codes(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(trigram code, row) for every trigram of every name padded with one space on each side;
    a code packs three 21-bit code points into one uint64, so no two trigrams share one."""
    padded = [f" {n} " for n in names]
    lengths = np.fromiter((len(p) for p in padded), dtype=np.int64, count=len(padded))
    chars = np.frombuffer("".join(padded).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    counts = np.maximum(lengths - 2, 0)
    rows = np.repeat(np.arange(len(names), dtype=np.int32), counts)
    first_char = np.cumsum(lengths) - lengths
    first_gram = np.cumsum(counts) - counts
    starts = np.repeat(first_char, counts) + (np.arange(int(counts.sum())) - np.repeat(first_gram, counts))
    codes = (chars[starts] << np.uint64(42)) | (chars[starts + 1] << np.uint64(21)) | chars[starts + 2]
    return codes, rows


def _edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal-string-alignment distance (a swap of neighbours is one edit), or limit + 1 as soon
    as it must exceed `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before: list[int] | None = None
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = ca != cb
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if before is not None and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        before, previous = previous, current
    return previous[-1]


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


def _spans(question: str, max_ngram: int) -> list[_Span]:
    tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(question)]
    spans = []
    for i in range(len(tokens)):
        for j in range(i, min(len(tokens), i + max_ngram)):
            start, end = tokens[i][0], tokens[j][1]
            text = question[start:end]
            if not (text[0].isalnum() and (text[-1].isalnum() or text[-1] in ".)!?'")):
                continue
            spans.append(_Span(start, end, j - i + 1, text))
            bare = text.rstrip(".!?'")  # "Motors?" at the end of a question; "Inc." stays too
            if bare != text and bare and bare[-1].isalnum():
                spans.append(_Span(start, start + len(bare), j - i + 1, bare))
    return spans


def _words(text: str) -> list[str]:
    return re.findall(r"\w+(?:['’]\w+)?", text.lower())


def _is_stop_span(text: str) -> bool:
    words = _words(text)
    return not words or all(w in STOPWORDS for w in words) or (len(words) == 1 and len(words[0]) < 2)


def _shape_weight(text: str) -> float:
    """Names are usually capitalised or numeric, though they may hold short lower-case words
    ("van", "of", "de"); a lone lower-case word rarely is a name."""
    words = re.findall(r"\w+(?:['’]\w+)*", text)
    content = [w for w in words if not (w.islower() and (len(w) <= 3 or w in STOPWORDS))]
    if content and all(w[0].isupper() or w[0].isdigit() for w in content):
        return 1.0
    return 0.7 if len(words) > 1 else 0.4


def _capitalised_runs(question: str) -> list[_Span]:
    """Runs of capitalised words (joined by "of", "the", "de", ...), without leading or trailing
    function words: the name-like parts of a question."""
    spans = []
    for match in _NAME_RUN.finditer(question):
        words = list(re.finditer(r"\S+", match.group(0)))
        while words and _is_stop_span(words[0].group(0)):
            words.pop(0)
        while words and _is_stop_span(words[-1].group(0)):
            words.pop()
        if not words:
            continue
        start, end = match.start() + words[0].start(), match.start() + words[-1].end()
        text = question[start:end].rstrip(".,;:!?")
        spans.append(_Span(start, start + len(text), len(words), text))
    return spans


def _overlaps_not_within(match: _Span, span: _Span) -> bool:
    """Whether `match` overlaps `span` other than strictly inside it (the same span, a wider
    one, or across an edge)."""
    inside = span.start <= match.start and match.end <= span.end and (match.start, match.end) != (span.start, span.end)
    return match.start < span.end and span.start < match.end and not inside


def _cuts(span: _Span, run: _Span) -> bool:
    """Whether `span` takes part of `run` but not all of it."""
    return span.start < run.end and run.start < span.end and not (span.start <= run.start and run.end <= span.end)


def _best_first(candidates: list[LinkCandidate]) -> list[LinkCandidate]:
    seen: set[tuple[str, str]] = set()
    unique = []
    for c in sorted(candidates, key=lambda c: -c.score):
        if (c.mention, c.entity) not in seen:
            seen.add((c.mention, c.entity))
            unique.append(c)
    return unique
