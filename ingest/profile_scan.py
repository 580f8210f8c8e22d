"""Wikidata truthy and Freebase N-Triples routed with Arrow kernels and left for the store to parse.

The rules of WikidataProfile and FreebaseProfile (ingest/kg_profiles.py), applied to whole
columns of a batch cut into terms (ingest/line_terms.py) instead of quad by quad. Each line gets
one route: a fact (the line goes to the store's `bulk_load` as it is), a metadata row (the line
rewritten as the N-Quad that the KG stage writes for parsed metadata: a plain literal in the
metadata graph), a filter reason (counted; the line is checked, see
`line_terms.unparsed_lines_parse`), or Python (parsed and routed by the profile itself: a
sitelink whose title needs percent-decoding, which is one line per entity at most).

The tables, counts and rejects are those of the Python path ($LOCALKG_KG_PARSER=python): a batch
the cut or a check declines is parsed in Python whole, and one the store rejects is parsed
again line by line (`KgBatch.reparse`, with the profile as it was before the batch: Wikidata
learns its external-identifier properties as it reads).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyoxigraph as ox

from ingest.kg_batch import ALIAS, DESCRIPTION, LABEL, KgBatch
from ingest.kg_profiles import (
    _META_PREDICATES,
    FREEBASE_META,
    FreebaseProfile,
    Profile,
    WikidataProfile,
    _lang_ok,
)
from ingest.line_terms import LineTerms, TermCache, cut_lines, unparsed_lines_parse
from ingest.nt_scan import _joined, _value_counts
from ingest.terms import (
    FREEBASE_NS,
    META_GRAPH,
    RDFS_LABEL,
    SCHEMA_ABOUT,
    SCHEMA_DESCRIPTION,
    SCHEMA_NAME,
    SKOS_ALT_LABEL,
    WIKIBASE_EXTERNAL_ID,
    WIKIBASE_PROPERTY_TYPE,
    WIKIDATA_DIRECT,
    WIKIDATA_DIRECT_NORMALIZED,
    WIKIDATA_ENTITY,
    WIKIPEDIA_TITLE,
)

# Routes of a line. A filtered line's route is FILTERED + the place of its reason in the list.
FACT, PYTHON, SITELINK = 0, 1, 2
META_ROUTES = {LABEL: 3, ALIAS: 4, DESCRIPTION: 5}
FILTERED = 8
_META_IRIS = {LABEL: RDFS_LABEL, ALIAS: SKOS_ALT_LABEL, DESCRIPTION: SCHEMA_DESCRIPTION}
_LARGE = pa.large_string()


class ProfileScan(Protocol):
    def scan(self, data: bytes) -> tuple[KgBatch, Profile] | None:
        """The batch left for the store to parse, and the profile that parses it again (as it
        was before this batch); None when the batch must be parsed in Python."""
        ...


def profile_scan(profile: Profile) -> ProfileScan | None:
    """The scan of `profile`'s lines, if it has one."""
    if isinstance(profile, WikidataProfile):
        return WikidataScan(profile)
    if isinstance(profile, FreebaseProfile):
        return FreebaseScan(profile)
    return None


@dataclass
class _Routes:
    """A route per line, given rule by rule: a rule only routes lines no earlier rule took."""

    code: np.ndarray
    reasons: list[str] = field(default_factory=list)

    def give(self, mask: np.ndarray, route: int) -> None:
        self.code[mask & (self.code < 0)] = route

    def drop(self, mask: np.ndarray, reason: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)
        self.give(mask, FILTERED + self.reasons.index(reason))

    def open(self) -> np.ndarray:
        return self.code < 0


@dataclass
class _Columns:
    """What the rules read of a batch: per line, numpy masks; per predicate, its IRI."""

    terms: LineTerms
    iris: list[str]  # per distinct predicate term, its IRI
    lang_ok: np.ndarray  # per line: a literal whose language is none or a chosen one

    def predicate_is(self, test: Callable[[str], bool]) -> np.ndarray:
        """Per line: whether its predicate's IRI passes `test`."""
        return np.array([test(iri) for iri in self.iris], dtype=bool)[self.terms.predicate_index]

    def subject_starts(self, *prefixes: str) -> np.ndarray:
        return _starts(self.terms.subject, prefixes)

    def object_starts(self, *prefixes: str) -> np.ndarray:
        return _starts(self.terms.obj, prefixes) & ~self.terms.literal


def _starts(terms: pa.Array, prefixes: tuple[str, ...]) -> np.ndarray:
    hit = pc.starts_with(terms, prefixes[0])
    for prefix in prefixes[1:]:
        hit = pc.or_(hit, pc.starts_with(terms, prefix))
    return hit.to_numpy(zero_copy_only=False)


def _columns(terms: LineTerms, cache: TermCache, languages: frozenset[str]) -> _Columns | None:
    """The predicates' IRIs and each literal's language test; None when one is not valid."""
    iris = [cache.predicate(term) for term in terms.predicates]
    literals = [cache.suffix(suffix) for suffix in terms.suffixes]
    if None in iris or None in literals:
        return None
    lang_ok = np.zeros(len(terms), dtype=bool)
    ok = np.array([_lang_ok(lit, languages) for lit in literals if lit is not None], dtype=bool)
    lang_ok[terms.literal_rows] = ok[terms.suffix_index] if len(ok) else False
    return _Columns(terms, [iri for iri in iris if iri is not None], lang_ok)


def _route_metadata(cols: _Columns, routes: _Routes, kinds: np.ndarray, kind: str) -> None:
    """Lines whose predicate is `kind` metadata (`kinds`): a literal in a chosen language is a
    metadata row, anything else other-language metadata."""
    routes.give(kinds & cols.lang_ok, META_ROUTES[kind])
    routes.drop(kinds, "other-language metadata")


class WikidataScan:
    """WikidataProfile's rules on columns; it learns external-identifier properties as the
    profile does, line by line in file order (a `wdt:` statement of a property is a fact before
    the line that makes it known, filtered after)."""

    def __init__(self, profile: WikidataProfile) -> None:
        self.profile, self.cache = profile, TermCache()

    def scan(self, data: bytes) -> tuple[KgBatch, Profile] | None:
        terms = cut_lines(data)
        cols = None if terms is None else _columns(terms, self.cache, self.profile.languages)
        if terms is None or cols is None:
            return None
        routed = self._routes(cols)
        if routed is None:
            return None
        routes, learned = routed
        before = WikidataProfile(self.profile.languages, self.profile.keep_external_ids, set(self.profile.external_ids))
        batch = _assemble(data, cols, routes, self.profile)
        if batch is None:
            return None
        self.profile.external_ids |= learned
        batch.external_id_properties = learned
        return batch, before

    def _routes(self, cols: _Columns) -> tuple[_Routes, set[str]] | None:
        terms, ent = cols.terms, f"<{WIKIDATA_ENTITY}"
        routes = _Routes(np.full(len(terms), -1, dtype=np.int16))
        about = cols.predicate_is(lambda iri: iri == SCHEMA_ABOUT)
        if about.any():
            self._route_sitelinks(cols, routes, about)
        routes.drop(~cols.subject_starts(ent), "non-entity subject")
        for kind, iri in _META_IRIS.items():
            _route_metadata(cols, routes, cols.predicate_is(lambda p, iri=iri: p == iri), kind)
        named = cols.predicate_is(lambda iri: iri == SCHEMA_NAME) & routes.open()
        if named.any():
            named[named] = _is_property(pc.filter(terms.subject, named))
            _route_metadata(cols, routes, named, LABEL)  # a property's name is its label
        learned = self._learn(cols, routes)
        if learned is None:
            return None
        known, first_learned = learned
        routes.drop(~cols.predicate_is(lambda iri: iri.startswith(WIKIDATA_DIRECT)), "non-truthy predicate")
        if not self.profile.keep_external_ids:
            rows = np.arange(len(terms))
            index = terms.predicate_index
            external = np.array([iri in self.profile.external_ids for iri in cols.iris], dtype=bool)[index]
            routes.drop(external | (first_learned[index] < rows), "external-id statement")
        routes.give(cols.lang_ok, FACT)
        routes.drop(terms.literal, "other-language literal")
        routes.give(cols.object_starts(ent), FACT)
        routes.drop(routes.open(), "non-entity object")
        return routes, known

    def _route_sitelinks(self, cols: _Columns, routes: _Routes, about: np.ndarray) -> None:
        """`<https://LANG.wikipedia.org/wiki/T> schema:about wd:Q`: a sitelink row for a chosen
        language (in Python when T holds a percent escape or the object is a literal)."""
        sites = tuple(f"<https://{lang}.wikipedia.org/wiki/" for lang in sorted(self.profile.languages))
        ours = about & (cols.subject_starts(*sites) if sites else np.zeros(len(about), dtype=bool))
        entity = cols.object_starts(f"<{WIKIDATA_ENTITY}")
        escaped = pc.match_substring(cols.terms.subject, "%").to_numpy(zero_copy_only=False)
        routes.give(ours & entity & ~escaped, SITELINK)
        routes.give(ours & (entity | cols.terms.literal), PYTHON)
        routes.drop(about, "other sitelink")

    def _learn(self, cols: _Columns, routes: _Routes) -> tuple[set[str], np.ndarray] | None:
        """The external-identifier properties this batch makes known (`wdtn:` values, property
        declarations), routing those lines; and per predicate, the first line after which it is
        known (len(lines) if never). None when a declaration is not read here."""
        terms, n = cols.terms, len(cols.terms)
        declared = cols.predicate_is(lambda iri: iri == WIKIBASE_PROPERTY_TYPE) & routes.open()
        normalized = cols.predicate_is(lambda iri: iri.startswith(WIKIDATA_DIRECT_NORMALIZED)) & routes.open()
        events: list[tuple[int, str]] = []
        rows = np.flatnonzero(declared)
        if len(rows):
            if terms.literal[rows].any():
                return None  # a literal whose text is the ExternalId IRI would count: Python decides
            external = np.flatnonzero(pc.equal(pc.take(terms.obj, rows), f"<{WIKIBASE_EXTERNAL_ID}>").to_numpy(zero_copy_only=False))
            subjects = pc.take(terms.subject, rows[external])
            for row, subject, is_prop in zip(rows[external], subjects.to_pylist(), _is_property(subjects), strict=True):
                if is_prop:
                    events.append((int(row), WIKIDATA_DIRECT + subject[len(WIKIDATA_ENTITY) + 1 : -1]))
        first_row = np.full(len(cols.iris), n, dtype=np.int64)
        rows = np.flatnonzero(normalized)
        np.minimum.at(first_row, terms.predicate_index[rows], rows)
        for place in np.flatnonzero(first_row < n):
            events.append((int(first_row[place]), WIKIDATA_DIRECT + cols.iris[place][len(WIKIDATA_DIRECT_NORMALIZED) :]))
        routes.drop(declared, "property declaration")
        routes.drop(normalized, "normalised external-id value")
        first_learned = np.full(len(cols.iris), n, dtype=np.int64)
        places: dict[str, list[int]] = {}
        for place, iri in enumerate(cols.iris):
            places.setdefault(iri, []).append(place)
        for row, iri in events:
            for place in places.get(iri, []):
                first_learned[place] = min(first_learned[place], row)
        return {iri for _, iri in events}, first_learned


def _is_property(subjects: pa.Array) -> np.ndarray:
    pattern = f"^<{WIKIDATA_ENTITY.replace('.', '[.]')}P[0-9]+>$"
    return pc.match_substring_regex(subjects, pattern).to_numpy(zero_copy_only=False)


class FreebaseScan:
    """FreebaseProfile's rules on columns (they depend on no earlier line)."""

    def __init__(self, profile: FreebaseProfile) -> None:
        self.profile, self.cache = profile, TermCache()
        self._kinds: dict[str, str | None] = {}

    def scan(self, data: bytes) -> tuple[KgBatch, Profile] | None:
        terms = cut_lines(data)
        cols = None if terms is None else _columns(terms, self.cache, self.profile.languages)
        if terms is None or cols is None:
            return None
        ns = f"<{FREEBASE_NS}"
        routes = _Routes(np.full(len(terms), -1, dtype=np.int16))
        routes.drop(~cols.subject_starts(ns + "m.", ns + "g."), "non-entity subject")
        kinds = [self._kind(iri) for iri in cols.iris]
        for kind in META_ROUTES:
            _route_metadata(cols, routes, np.array([k == kind for k in kinds], dtype=bool)[terms.predicate_index], kind)
        routes.drop(np.array([k == "dropped" for k in kinds], dtype=bool)[terms.predicate_index], "dropped predicate")
        routes.give(cols.lang_ok, FACT)
        routes.drop(terms.literal, "other-language literal")
        routes.give(cols.object_starts(ns + "m.", ns + "g."), FACT)
        routes.drop(routes.open(), "non-entity object")
        batch = _assemble(data, cols, routes, self.profile)
        return None if batch is None else (batch, self.profile)

    def _kind(self, iri: str) -> str | None:
        """A predicate's metadata kind, "dropped", or None (a fact predicate)."""
        if iri not in self._kinds:
            local = iri[len(FREEBASE_NS) :] if iri.startswith(FREEBASE_NS) else iri
            kind = FREEBASE_META.get(local) or _META_PREDICATES.get(iri)
            self._kinds[iri] = kind or ("dropped" if local.startswith(self.profile.drop_prefixes) else None)
        return self._kinds[iri]


def _assemble(data: bytes, cols: _Columns, routes: _Routes, profile: Profile) -> KgBatch | None:
    """The batch of routed lines: facts as bytes, metadata rows as N-Quads, filter counts; None
    when a line that no parser would read is not valid, or a Python-routed line does not parse."""
    terms, code = cols.terms, routes.code
    filtered = code >= FILTERED
    if not unparsed_lines_parse(terms, np.flatnonzero(filtered | (code == SITELINK))):
        return None
    batch = KgBatch()
    python = np.flatnonzero(code == PYTHON)
    if len(python):
        try:
            profile.route(ox.parse("".join(pc.take(terms.lines, python).to_pylist()).encode(), ox.RdfFormat.N_TRIPLES), batch)
        except (SyntaxError, ValueError):
            return None
        if batch.facts or batch.external_id_properties:
            return None  # not a line this scan sends to Python
        batch.not_facts = []
    fact = code == FACT
    facts = data if terms.whole and fact.all() else _joined(pc.filter(terms.lines, fact))
    if facts and not facts.endswith(b"\n"):
        facts += b"\n"  # the file's last line: metadata N-Quads may follow it in the same load
    nodes = pa.concat_arrays([pc.filter(terms.subject, fact), pc.filter(terms.obj, fact & ~terms.literal)])
    quads = [_metadata_quads(cols, np.flatnonzero(code == route), _META_IRIS[kind]) for kind, route in META_ROUTES.items()]
    quads.append(_sitelink_quads(terms, np.flatnonzero(code == SITELINK)))
    counts = np.bincount(code[filtered] - FILTERED, minlength=len(routes.reasons))
    batch.filtered.update({reason: int(n) for reason, n in zip(routes.reasons, counts, strict=True) if n})
    batch.raw, batch.unparsed_facts, batch.degrees = facts, int(fact.sum()), _value_counts(nodes)
    batch.unparsed_meta = b"".join(quads)
    batch.unparsed_meta_count = int(sum((code == route).sum() for route in (*META_ROUTES.values(), SITELINK)))
    return batch


def _metadata_quads(cols: _Columns, rows: np.ndarray, predicate: str) -> bytes:
    """`S <predicate> "text" <meta graph> .` per row: the literal's text as it is written (the
    store decodes its escapes), without its language, as the KG stage writes metadata."""
    if len(rows) == 0:
        return b""
    terms = cols.terms
    body = pc.take(terms.body, np.searchsorted(terms.literal_rows, rows))
    return _joined(pc.binary_join_element_wise(
        pc.take(terms.subject, rows), pa.scalar(f" <{predicate}> ", _LARGE), body,
        pa.scalar(f'" <{META_GRAPH}> .\n', _LARGE), pa.scalar("", _LARGE)))


def _sitelink_quads(terms: LineTerms, rows: np.ndarray) -> bytes:
    """`wd:Q <wikipedia title> "T" <meta graph> .` per sitelink row (no percent escape in T)."""
    if len(rows) == 0:
        return b""
    page = pc.list_element(pc.split_pattern(pc.take(terms.subject, rows), "/wiki/", max_splits=1), 1)
    title = pc.replace_substring(pc.utf8_slice_codeunits(page, 0, -1), "_", " ")
    return _joined(pc.binary_join_element_wise(
        pc.take(terms.obj, rows), pa.scalar(f' <{WIKIPEDIA_TITLE}> "', _LARGE), title,
        pa.scalar(f'" <{META_GRAPH}> .\n', _LARGE), pa.scalar("", _LARGE)))
