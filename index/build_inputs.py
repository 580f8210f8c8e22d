"""The inputs of an index build: its options (resolved against the ones the index was last
built with), its source entries and their fingerprints, and the fingerprint of each stage.

Options not given are those the index was last built with (`build_options` in its manifest),
else the defaults; a given option overrides, and the stages it affects rebuild.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from index.kg_stage import KgSource
from index.manifest import stable_hash
from ingest.base.errors import InputError
from ingest.base.progress import console
from ingest.freebase import FREEBASE_DROP_PREFIXES
from ingest.kg_readers import KgOptions
from ingest.sources import fingerprint, same_content

_Options = TypeVar("_Options")


def _resolve_options(
    cls: type[_Options], given: Any, recorded: Mapping[str, Any] | None, inherited: dict[str, Any]
) -> _Options:
    """`given` itself when it is a `cls`; otherwise the recorded options (unknown names are
    ignored) updated with the mapping `given`. Recorded values that differ from the defaults
    and were not given are added to `inherited`."""
    if isinstance(given, cls):
        return given
    default = cls()
    names = {f.name for f in fields(default)}
    overrides = dict(given or {})
    if unknown := sorted(set(overrides) - names):
        raise ValueError(f"unknown {cls.__name__} option(s): {', '.join(unknown)}")
    base = {
        name: tuple(value) if isinstance(getattr(default, name), tuple) and value is not None else value
        for name, value in (recorded or {}).items()
        if name in names
    }
    options = cls(**(base | overrides))
    inherited.update(
        {name: value for name, value in base.items() if name not in overrides and value != getattr(default, name)}
    )
    return options


def _doc_options(given: Any, recorded: Mapping[str, Any] | None, has_docs: bool, inherited: dict[str, Any]) -> Any:
    """The DocOptions of this build: None when there are no documents and no options were
    given or recorded (so that a KG-only build does not import the documents stage)."""
    if not given and not recorded and not has_docs:
        return None
    from index.doc_options import DocOptions  # documents stage, imported lazily (heavy deps)

    return _resolve_options(DocOptions, given, recorded, inherited)


def _absolute_model(doc_options: Any) -> Any:
    """`doc_options` with `embed_model` as an absolute path when it names a folder (so that the
    manifest does not depend on the folder a build ran in); None and other names are kept."""
    model = doc_options.embed_model
    if model is None or not Path(model).expanduser().is_dir():
        return doc_options
    return replace(doc_options, embed_model=str(Path(model).expanduser().resolve()))


def _model_fingerprint(doc_options: Any) -> str:
    """The fingerprint of the embedding model on its backend (ModelError when it cannot be found
    or its server does not answer); torch's is the model folder's content fingerprint."""
    from index.embed_backends import open_embedder

    # loads no model: local backends hash the folder's files, a server is asked its model's name
    return open_embedder(doc_options.embed_model, doc_options.embed_backend, doc_options.embed_server).fingerprint


def _build_options(kg_options: KgOptions, doc_options: Any) -> dict[str, Any]:
    """The options as the manifest records them (JSON types, so they compare with a read one)."""
    options = {"kg": asdict(kg_options), "docs": asdict(doc_options) if doc_options is not None else None}
    return dict(json.loads(json.dumps(options, default=str)))


def _has_docs(kg_entries: list[dict[str, Any]], doc_entries: list[dict[str, Any]], kg_options: KgOptions) -> bool:
    """Whether the index gets documents: document sources, or documents rendered from KG facts."""
    derived = kg_options.kg_as_docs or (kg_options.dropped_as_docs and kg_options.keep_fraction < 1.0)
    return bool(doc_entries) or bool(kg_entries and derived)


def _stage_fingerprints(
    kg_entries: list[dict[str, Any]],
    doc_entries: list[dict[str, Any]],
    kg_options: KgOptions,
    doc_options: Any,
    model_fingerprint: str | None,
) -> dict[str, str | None]:
    """Stage name -> fingerprint of everything its outputs depend on (None: no such stage)."""
    def content(entries: list[dict[str, Any]]) -> list[Any]:
        return [
            {k: e[k] for k in ("path", "format", "collection") if k in e}
            | {"content": e["fingerprint"].get("sha256") or [e["fingerprint"].get("size"), e["fingerprint"].get("mtime")]}
            for e in entries
        ]

    kg_values = asdict(kg_options)
    if kg_options.freebase_drop == FREEBASE_DROP_PREFIXES:
        # the default list is left out: indexes built before the option existed stay valid
        del kg_values["freebase_drop"]
    # options added later are left out at their defaults (indexes built before them stay valid);
    # allow_empty is a check, not an output
    for name in ("keep_external_ids", "tsv_header", "tsv_delimiter", "allow_empty"):
        if name == "allow_empty" or kg_values[name] == getattr(KgOptions(), name):
            del kg_values[name]
    kg_fp = stable_hash([content(kg_entries), kg_values]) if kg_entries else None
    has_docs = _has_docs(kg_entries, doc_entries, kg_options)
    options = asdict(doc_options) if doc_options is not None else {}
    chunking = {k: options.get(k) for k in ("chunk_size", "chunk_overlap")}
    if options.get("docs_map"):  # the maps by content (no key without maps: older indexes stay valid)
        chunking["docs_map"] = [_fingerprint_or_error(Path(p)).get("sha256") for p in options["docs_map"]]
    if options.get("sparse", "bm25s") != "bm25s":  # --sparse tantivy (the default leaves older indexes valid)
        chunking["sparse"] = options["sparse"]
    # Without a KG the documents stage makes the entity table from the documents: a docs-only
    # index built before it did rebuilds its documents stage once.
    kg_part = kg_fp if kg_fp is not None or not doc_entries else "entities from documents"
    docs_fp = stable_hash([content(doc_entries), chunking, kg_part]) if has_docs else None
    # The model by its content, not its path (a copied or moved model folder embeds the same);
    # batch and shard sizes change how vectors are computed, not what they are.
    embedding = {k: options.get(k) for k in ("faiss_kind", "entity_vectors")} | {"model": model_fingerprint}
    if options.get("vector_chunks", "all") != "all":  # --vectors linked: only chunks of linked documents
        embedding["vector_chunks"] = options["vector_chunks"]
    # --vectors none (--no-vectors): no whole-corpus vectors (chunks and BM25 only)
    vectors_fp = stable_hash([docs_fp, embedding]) if has_docs and options.get("vectors", True) else None
    # --kg-from-docs: a KG made from the documents (index/mentions_kg.py); none: no such stage
    from_docs = options.get("kg_from_docs") or "none"
    mentions_fp = None
    if docs_fp is not None and kg_fp is None and from_docs != "none":
        from index.mentions_kg import RULES_VERSION

        mentions_fp = stable_hash([docs_fp, {"kg_from_docs": from_docs, "rules": RULES_VERSION}])
    return {"kg": kg_fp, "docs": docs_fp, "mentions": mentions_fp, "vectors": vectors_fp}


def _check_kg_from_docs(kg_entries: list[dict[str, Any]], doc_options: Any) -> None:
    """--kg-from-docs builds the KG of an index that has documents and no KG source."""
    mode = getattr(doc_options, "kg_from_docs", "none")
    if mode == "none":
        return
    from index.mentions_kg import KG_FROM_DOCS

    if mode not in KG_FROM_DOCS:
        raise InputError(f"--kg-from-docs must be one of {', '.join(KG_FROM_DOCS)} (got {mode!r})")
    if kg_entries:
        raise InputError(
            f"--kg-from-docs {mode} makes the KG of an index without --kg sources, and this one has "
            f"{', '.join(e['path'] for e in kg_entries)}; give --kg-from-docs none, or build another index"
        )


def _kg_entry(source: KgSource) -> dict[str, Any]:
    path = source.path.resolve()
    return {"path": str(path), "format": source.format, "fingerprint": _fingerprint_or_error(path)}


def _doc_entry(source: Any) -> dict[str, Any]:
    path = Path(source.path).resolve()
    return {
        "path": str(path),
        "format": source.format,
        "collection": source.collection,
        "fingerprint": _fingerprint_or_error(path),
    }


def _fingerprint_or_error(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise InputError(f"{path}: no such file")
    return fingerprint(path)


def _recorded(manifest: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Sources recorded by the last build, re-fingerprinted where the file still exists."""
    result: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    for kind, target in (("kg", result[0]), ("docs", result[1])):
        for entry in manifest.get("sources", {}).get(kind, []):
            path = Path(entry["path"])
            if path.exists():
                new = fingerprint(path)
                if not same_content(entry["fingerprint"], new):
                    console.print(f"[yellow]changed[/] {path}: will rebuild what depends on it")
                    entry = entry | {"fingerprint": new}
                else:
                    entry = entry | {"fingerprint": entry["fingerprint"]}
            else:
                entry = entry | {"missing": True}
            target.append(entry)
    return result


def _merge(recorded: list[dict[str, Any]], given: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_path = {e["path"]: e for e in recorded}
    for entry in given:
        by_path[entry["path"]] = entry
    return list(by_path.values())


def _check_readable(kg_entries: list[dict[str, Any]], doc_entries: list[dict[str, Any]], to_run: list[str]) -> None:
    needs = {"kg": kg_entries, "docs": doc_entries}
    for stage, entries in needs.items():
        if stage in to_run:
            for entry in entries:
                if entry.get("missing"):
                    raise InputError(
                        f"{entry['path']}: recorded source no longer exists and the {stage} stage must be rebuilt; "
                        "restore the file or rebuild with --replace and the sources you have"
                    )
