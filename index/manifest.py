"""`manifest.json`: what an index was built from, with which options, and what it holds."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from index.paths import SCHEMA_VERSION, IndexPaths
from ingest.base.errors import IndexError_


def stable_hash(obj: Any) -> str:
    """A short content hash of a JSON-serialisable object (stage and config fingerprints)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def read_manifest(paths: IndexPaths) -> dict[str, Any]:
    """The manifest of an index folder; a clear error when the folder is not an index."""
    if not paths.root.exists():
        raise IndexError_(f"{paths.root}: no such index (build it with `python cli.py index --out {paths.root} ...`)")
    if not paths.manifest.exists():
        raise IndexError_(f"{paths.root}: not an index folder (no manifest.json)")
    try:
        manifest = json.loads(paths.manifest.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise IndexError_(f"{paths.manifest}: unreadable manifest ({exc})") from exc
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise IndexError_(
            f"{paths.manifest}: schema version {manifest.get('schema_version')} is not {SCHEMA_VERSION}; rebuild the index"
        )
    return manifest


def write_manifest(paths: IndexPaths, manifest: dict[str, Any]) -> None:
    """Write atomically (temp file + rename) so a reader never sees half a manifest."""
    tmp = paths.manifest.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str), encoding="utf-8")
    os.replace(tmp, paths.manifest)


def index_fingerprint(manifest: dict[str, Any]) -> str:
    """Identifies an index's content for run records: the hash of its stage fingerprints."""
    return stable_hash({name: stage.get("fingerprint") for name, stage in manifest.get("stages", {}).items()})


def kg_stats(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """What `kg stats` reports of a manifest: fact triples, entities, relations, rejects (of the
    KG sources; the documents' apart), filtered facts and per-source counts; None without a KG.
    A KG made from the documents (--kg-from-docs) is the `mentions` stage's."""
    stages = manifest.get("stages", {})
    stage = stages.get("kg") or stages.get("mentions")
    if stage is None:
        return None
    counts = stage["counts"]
    stats = {
        "triples": counts["triples"],
        "entities": counts["entities"],
        "relations": counts["relations"],
        "rejects": sum(source.get("rejects", 0) for source in counts.get("sources", [])),
        "document_rejects": stages.get("docs", {}).get("counts", {}).get("doc_rejects", 0),
        "filtered": counts.get("filtered", {}),
        "sources": counts.get("sources", []),
    }
    if "kg_keep" in counts:
        stats["kg_keep"] = counts["kg_keep"]
    if "from_docs" in counts:
        stats["from_docs"] = counts["from_docs"] | {"mention_edges": counts["mention_edges"],
                                                    "skipped_titles": counts["skipped_titles"]}
    return stats


def kg_counts(manifest: dict[str, Any]) -> dict[str, Any]:
    """The raw counts of the KG stage (or the mentions stage), for the per-source summary lines."""
    stages = manifest.get("stages", {})
    stage = stages.get("kg") or stages.get("mentions") or {}
    return dict(stage.get("counts", {}))
