"""One entry point for every KG input format: `read_kg(path, format)` yields KgBatches."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyoxigraph as ox

from ingest.base.errors import InputError
from ingest.freebase import FREEBASE_DROP_PREFIXES, mend_freebase_line
from ingest.kg_batch import KgBatch
from ingest.kg_profiles import FreebaseProfile, GenericProfile, WikidataProfile
from ingest.rdf_reader import read_line_rdf, read_turtle
from ingest.sources import STREAM_ERRORS, check_text, open_input
from ingest.tsv import HEADER_CHOICES, read_metaqa, read_tsv, tsv_delimiter
from ingest.wikidata_json import read_wikidata_json

# Who parses plain N-Triples facts (ntriples, and the wikidata and freebase N-Triples dumps): the
# store ("store", the default: ingest/nt_scan.py and ingest/profile_scan.py read what the tables
# need from the bytes) or Python ("python": every line parsed into objects and routed first).
PARSER_ENV = "LOCALKG_KG_PARSER"
KG_FORMATS = ("auto", "ntriples", "nquads", "turtle", "freebase", "wikidata", "wikidata-json", "tsv", "metaqa")


@dataclass(frozen=True)
class KgOptions:
    """Options that change what the KG stage produces (part of its fingerprint)."""

    languages: tuple[str, ...] = ("en",)
    keep_fraction: float = 1.0
    seed: int = 0
    dropped_as_docs: bool = False
    # Render every fact as a sentence in a document about its head entity (a text-only view of
    # the KG: the corpus of the `rag` baseline on KG-only benchmarks such as MetaQA).
    kg_as_docs: bool = False
    # Freebase predicates dropped by local-name prefix (the `freebase` format only).
    freebase_drop: tuple[str, ...] = FREEBASE_DROP_PREFIXES
    # Wikidata: keep the statements of external-identifier properties (VIAF, GND... ids) as facts.
    keep_external_ids: bool = False
    # TSV/CSV: a header row is "auto"-detected, always present ("yes") or absent ("no");
    # fields are split on `tsv_delimiter` ("auto": comma for .csv, else tab).
    tsv_header: str = "auto"
    tsv_delimiter: str = "auto"
    # Build even when a source yields no fact and no metadata (the build fails otherwise).
    # A check, not an output: left out of the stage fingerprint.
    allow_empty: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.keep_fraction <= 1.0:
            raise InputError(f"--kg-keep must be between 0 and 1 (got {self.keep_fraction})")
        if any(not prefix.strip() for prefix in self.freebase_drop):
            raise InputError("--freebase-drop: a prefix must not be empty (it would drop every predicate)")
        if self.tsv_header not in HEADER_CHOICES:
            raise InputError(f"--header: must be one of {', '.join(HEADER_CHOICES)} (got {self.tsv_header!r})")
        tsv_delimiter(Path("x.tsv"), self.tsv_delimiter)  # raises InputError on a bad delimiter


def _base_suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes if s.lower() not in (".gz", ".bz2")]
    return suffixes[-1].lstrip(".") if suffixes else ""


def detect_kg_format(path: Path) -> str:
    """Guess a KG format from the file name and its first bytes."""
    if path.is_dir():
        if (path / "entities.dict").exists() and (path / "relations.dict").exists():
            return "metaqa"
        raise InputError(f"{path}: is a directory and not a MetaQA KB folder; pass a file or --kg-format")
    check_text(path)
    suffix = _base_suffix(path)
    stream, _ = open_input(path)
    try:
        head = stream.read(4096)
    except STREAM_ERRORS as exc:
        raise InputError(f"{path}: compressed stream is truncated or corrupt ({exc})") from exc
    finally:
        stream.close()
    if b"http://rdf.freebase.com/ns/" in head and suffix in ("nt", "", "rdf"):
        return "freebase"
    if suffix == "json" or head.lstrip().startswith(b"["):
        return "wikidata-json"
    if suffix in ("ttl", "turtle"):
        return "wikidata" if b"wikiba.se/ontology" in head or b"wikidata.org/prop/direct" in head else "turtle"
    if suffix == "nq":
        return "nquads"
    if suffix == "nt":
        return "wikidata" if b"www.wikidata.org/prop/direct/" in head else "ntriples"
    if suffix in ("tsv", "csv", "txt"):
        return "tsv"
    raise InputError(f"{path}: cannot guess the KG format from its name; pass --kg-format")


def read_kg(path: Path, fmt: str, options: KgOptions) -> Iterator[KgBatch]:
    """Stream `path` as KgBatches; `fmt` is one of KG_FORMATS."""
    languages = frozenset(options.languages)
    if fmt == "auto":
        fmt = detect_kg_format(path)
    if fmt == "metaqa":
        return read_metaqa(path)
    check_text(path)
    if fmt == "tsv":
        return read_tsv(path, options.tsv_header, options.tsv_delimiter)
    if fmt == "wikidata-json":
        return read_wikidata_json(path, options.languages, options.keep_external_ids)  # order = label priority
    # --kg-keep samples parsed facts, so it needs them in Python.
    unparsed = options.keep_fraction >= 1.0 and fmt in ("ntriples", "freebase", "wikidata") and store_parses()
    if fmt == "ntriples":
        return read_line_rdf(path, ox.RdfFormat.N_TRIPLES, GenericProfile(languages), unparsed=unparsed)
    if fmt == "nquads":
        return read_line_rdf(path, ox.RdfFormat.N_QUADS, GenericProfile(languages))
    if fmt == "freebase":
        profile = FreebaseProfile(languages, options.freebase_drop)
        return read_line_rdf(path, ox.RdfFormat.N_TRIPLES, profile, mend=mend_freebase_line, unparsed=unparsed)
    if fmt == "turtle":
        return read_turtle(path, GenericProfile(languages))
    if fmt == "wikidata":
        wikidata = WikidataProfile(languages, options.keep_external_ids)
        if _base_suffix(path) in ("nt", "nq"):
            return read_line_rdf(path, ox.RdfFormat.N_TRIPLES, wikidata, unparsed=unparsed)
        return read_turtle(path, wikidata)
    raise InputError(f"{path}: unknown KG format {fmt!r}; choose one of {', '.join(KG_FORMATS)}")


def store_parses() -> bool:
    """Whether N-Triples lines are left for the store to parse (`$LOCALKG_KG_PARSER`)."""
    parser = os.environ.get(PARSER_ENV, "store")
    if parser not in ("store", "python"):
        raise InputError(f"${PARSER_ENV}: must be 'store' or 'python' (got {parser!r})")
    return parser == "store"


def resolved_format(path: Path, fmt: str) -> str:
    return detect_kg_format(path) if fmt == "auto" else fmt
