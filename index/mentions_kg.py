"""A KG made from the documents of an index that has none (`index --kg-from-docs mentions`).

ToG-2's authors suggest such a graph for document-only corpora (AdvHotpotQA's paragraphs, a
folder of reports). Every entity of the index's title entity table (made by the documents stage:
each document title, each entity a document names) is a node labelled with its name, and the
fact `<document's entity> mentions <other entity>` is added for every other entity name that
the document's text mentions. Followed backwards (`mentions (reverse)`), an edge reads
"mentioned in".

Matching rules (deterministic; `MentionRules`):
- a name matches whole tokens only (word boundaries): the text is split into words (`\\w+`)
  and single punctuation marks, and a name matches a run of tokens whose text equals it, any
  run of whitespace between tokens counting as one space ("Oksana Baiul's" mentions
  "Oksana Baiul"; "Baiulx" does not);
- case-sensitive (`mentions`), or case-insensitive (`mentions-ignore-case`);
- HTML character references in a name are read as the characters they stand for
  (AdvHotpotQA's title "Merck &amp; Co." matches "Merck & Co.");
- leftmost-longest, without overlaps: "Ukraine at the 2014 Winter Olympics" is one mention,
  not also "Ukraine";
- a name ending in a parenthetical ("Mercury (planet)") is also matched by the text before it
  ("Mercury"), unless that text is itself a name or the short form of another name;
- names that are not matched (skipped, counted by reason in the build summary): shorter than
  3 characters, a single English stop word ("Her", "Them"), without a letter ("1993"), and
  ambiguous ones (one match text for several entities, e.g. two short forms "Mercury");
- no edge from an entity to itself; documents without an entity (untitled ones, AdvHotpotQA's
  "added" distractors, the `web` collection) give no edge.

The matcher is a dictionary lookup: for each token, the lengths (in tokens) of the names that
start with it, longest first; the cost is linear in the text, whatever the number of names.
"""

from __future__ import annotations

import html
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pyoxigraph as ox
from bm25s.stopwords import STOPWORDS_EN_PLUS

from index.kg_stage import write_relation_table
from index.paths import IndexPaths
from ingest.base.errors import InputError
from ingest.base.progress import console
from ingest.terms import META_GRAPH, RDFS_LABEL, mint_relation

# `--kg-from-docs` values: none, or how titles are matched in the text.
KG_FROM_DOCS = ("none", "mentions", "mentions-ignore-case")
MENTIONS = mint_relation("mentions")
# Bumped when the matching rules change, so indexes built with the old rules rebuild this stage.
RULES_VERSION = 2

_TOKEN = re.compile(r"(\s*)(\w+|[^\w\s])")
_PARENTHETICAL = re.compile(r"^(.*\S)\s+\([^()]*\)$")
_LETTER = re.compile(r"[^\W\d_]")
_STOPWORDS = frozenset(STOPWORDS_EN_PLUS)
_QUADS_PER_WRITE = 100_000
_EXAMPLES = 5

SKIP_SHORT = "shorter than 3 characters"
SKIP_STOPWORD = "a stop word"
SKIP_NO_LETTER = "no letter"
SKIP_AMBIGUOUS = "ambiguous"


@dataclass(frozen=True)
class MentionRules:
    """How names are matched in text (see the module docstring)."""

    case_sensitive: bool = True
    min_chars: int = 3

    @classmethod
    def of(cls, mode: str) -> MentionRules:
        if mode not in KG_FROM_DOCS or mode == "none":
            raise InputError(f"--kg-from-docs must be one of {', '.join(KG_FROM_DOCS)} (got {mode!r})")
        return cls(case_sensitive=mode == "mentions")


def _tokens(text: str) -> tuple[list[str], list[str]]:
    """(tokens, pieces): each token, and the token as a name's text continues with it (a space
    before it when whitespace precedes it)."""
    pairs = _TOKEN.findall(text)
    return [t for _, t in pairs], [(" " + t) if gap else t for gap, t in pairs]


class TitleMatcher:
    """Finds the entities whose names a text mentions, by token n-gram dictionary lookup."""

    def __init__(self, names: Iterable[tuple[str, str]], rules: MentionRules = MentionRules()) -> None:
        """`names`: (entity id, name) pairs, e.g. every row of the title entity table."""
        self.rules = rules
        self.skipped: Counter[str] = Counter()
        self.skipped_examples: dict[str, list[str]] = defaultdict(list)
        exact: dict[str, set[str]] = defaultdict(set)
        short: dict[str, set[str]] = defaultdict(set)
        labels: dict[str, str] = {}
        for entity, name in names:
            name = " ".join(html.unescape(name or "").split())
            if not name:
                continue
            labels.setdefault(entity, name)
            reason = self._unmatchable(name)
            if reason:
                self._skip(reason, name)
                continue
            exact[self._fold(name)].add(entity)
            base = _PARENTHETICAL.match(name)
            if base and not self._unmatchable(base.group(1)):
                short[self._fold(base.group(1))].add(entity)
        self._keys: dict[str, str] = {}
        for key, entities in exact.items():
            if len(entities) == 1:
                self._keys[key] = next(iter(entities))
            else:
                for entity in sorted(entities):
                    self._skip(SKIP_AMBIGUOUS, labels[entity])
        for key, entities in short.items():
            # a short form never takes the place of a name, and one shared by two names is dropped
            if len(entities) == 1 and key not in exact:
                self._keys[key] = next(iter(entities))
        lengths: dict[str, set[int]] = defaultdict(set)
        for key in self._keys:
            tokens, _ = _tokens(key)
            lengths[tokens[0]].add(len(tokens))
        self._lengths = {first: sorted(found, reverse=True) for first, found in lengths.items()}

    def _fold(self, text: str) -> str:
        return text if self.rules.case_sensitive else text.casefold()

    def _unmatchable(self, name: str) -> str | None:
        if len(name) < self.rules.min_chars:
            return SKIP_SHORT
        if not _LETTER.search(name):
            return SKIP_NO_LETTER
        if name.casefold() in _STOPWORDS:
            return SKIP_STOPWORD
        return None

    def _skip(self, reason: str, name: str) -> None:
        self.skipped[reason] += 1
        if len(self.skipped_examples[reason]) < _EXAMPLES:
            self.skipped_examples[reason].append(name)

    def __len__(self) -> int:
        """How many match texts (names and short forms) the matcher looks for."""
        return len(self._keys)

    def find(self, text: str) -> list[str]:
        """The entities `text` mentions, in order of first mention, each once."""
        tokens, pieces = _tokens(self._fold(text))
        found: dict[str, None] = {}
        i, count = 0, len(tokens)
        while i < count:
            lengths = self._lengths.get(tokens[i])
            step = 1
            if lengths is not None:
                for n in lengths:
                    if i + n > count:
                        continue
                    entity = self._keys.get(tokens[i] + "".join(pieces[i + 1 : i + n]))
                    if entity is not None:
                        found.setdefault(entity)
                        step = n
                        break
            i += step
        return list(found)


def build_mentions_kg(paths: IndexPaths, mode: str) -> dict[str, Any]:
    """Write kg/ (the mention facts and every entity's label), relations.parquet and the
    degrees of entities.parquet from documents.parquet and the title entity table; return
    counts for the manifest."""
    rules = MentionRules.of(mode)
    if not paths.documents.exists() or not paths.entities.exists():
        raise InputError(f"{paths.root}: --kg-from-docs needs the documents stage's documents and entity table")
    entities = pq.read_table(paths.entities, columns=["id", "label"]).to_pydict()
    names = list(zip(entities["id"], entities["label"], strict=True))
    matcher = TitleMatcher(names, rules)
    console.print(f"[dim]kg from documents: matching {len(matcher):,} names in the documents...[/]")
    store = ox.Store(str(paths.kg))
    label = ox.NamedNode(RDFS_LABEL)
    meta = ox.NamedNode(META_GRAPH)
    relation = ox.NamedNode(MENTIONS)
    store.bulk_extend([ox.Quad(relation, label, ox.Literal("mentions"), meta)])
    store.bulk_extend(
        ox.Quad(ox.NamedNode(entity), label, ox.Literal(name), meta) for entity, name in names if name
    )
    scanned = without_entity = mentions = 0
    batch: list[ox.Quad] = []
    for entity, text in _documents(paths.documents):
        if entity is None:
            without_entity += 1
            continue
        scanned += 1
        head = ox.NamedNode(entity)
        for tail in matcher.find(text):
            if tail != entity:
                batch.append(ox.Quad(head, relation, ox.NamedNode(tail)))
                mentions += 1
        if len(batch) >= _QUADS_PER_WRITE:
            store.bulk_extend(batch)
            batch = []
    store.bulk_extend(batch)
    store.flush()
    degree, edges = _degrees(store)
    write_relation_table(store, paths.relations)
    del store
    _write_degrees(paths.entities, degree)
    return {
        "triples": edges,
        "entities": len(names),
        "relations": 1 if edges else 0,
        "mention_edges": edges,
        "skipped_titles": sum(matcher.skipped.values()),
        "from_docs": {
            "mode": mode,
            "rules_version": RULES_VERSION,
            "documents_scanned": scanned,
            "documents_without_entity": without_entity,
            "mentions": mentions,  # before merging the documents of one entity
            "entities_with_edges": len(degree),
            "skipped": dict(matcher.skipped.most_common()),
            "skipped_examples": {k: v for k, v in sorted(matcher.skipped_examples.items())},
        },
        "sources": [],
        "filtered": {},
    }


def _documents(documents: Path) -> Iterator[tuple[str | None, str]]:
    """(entity, text) of every document, in the order of documents.parquet."""
    for batch in pq.ParquetFile(documents).iter_batches(batch_size=4096, columns=["entity", "text"]):
        yield from zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True)


def _degrees(store: ox.Store) -> tuple[Counter[str], int]:
    """Facts per entity (as head or tail) and the number of facts (the store keeps each once)."""
    degree: Counter[str] = Counter()
    edges = 0
    for quad in store.quads_for_pattern(None, None, None, ox.DefaultGraph()):
        degree[quad.subject.value] += 1
        degree[quad.object.value] += 1
        edges += 1
    return degree, edges


def _write_degrees(entities: Path, degree: Counter[str]) -> None:
    """entities.parquet with each entity's fact count as its degree (temp file + rename: the
    old file may be hard-linked into the live index and must not change)."""
    table = pq.read_table(entities)
    ids = table.column("id").to_pylist()
    column = pa.array([degree.get(i, 0) for i in ids], pa.int64())
    table = table.set_column(table.schema.get_field_index("degree"), "degree", column)
    tmp = entities.with_name(entities.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, entities)


def reset_degrees(entities: Path) -> None:
    """Degrees back to 0 (an index whose mentions KG was turned off keeps its title entities)."""
    if entities.exists():
        _write_degrees(entities, Counter())


def mentions_summary_lines(counts: dict[str, Any]) -> list[str]:
    """Plain lines for the build summary and `kg stats` of a KG made from documents."""
    info = counts.get("from_docs")
    if not info:
        return []
    skipped = ", ".join(f"{reason} {n:,}" for reason, n in info["skipped"].items()) or "none"
    lines = [
        f"  kg from documents ({info['mode']}): {counts['entities']:,} entities, {counts['mention_edges']:,} mention edges "
        f"from {info['documents_scanned']:,} documents ({info['documents_without_entity']:,} without an entity give none)",
        f"    titles not matched: {counts['skipped_titles']:,} ({skipped})",
    ]
    for reason, examples in info.get("skipped_examples", {}).items():
        lines.append(f"      {reason}: {', '.join(repr(e) for e in examples)}")
    return lines
