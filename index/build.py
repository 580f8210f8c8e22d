"""Build or update an index folder: atomic (temp folder + rename) and incremental (a stage whose
inputs are unchanged is reused as it is).

Stages and what their fingerprint covers:
  kg       KG sources (content) + KG options            -> kg/, entities.parquet, relations.parquet
  docs     document sources + chunking + the kg stage   -> documents.parquet, chunks.parquet, bm25/
  vectors  the docs stage + embedding model + FAISS kind -> vectors/

The temp folder starts as a hard-link copy of the current index; a stage that runs deletes its
outputs there first and writes new files, so the live index is never modified in place.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import shutil
import time
import traceback
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from index.kg_stage import KgSource, build_kg
from index.manifest import read_manifest, stable_hash, write_manifest
from index.paths import SCHEMA_VERSION, IndexPaths
from ingest.errors import IndexError_, InputError
from ingest.kg_readers import KgOptions
from ingest.progress import console
from ingest.rejects import RejectLog
from ingest.sources import fingerprint, same_content

STAGE_OUTPUTS: dict[str, tuple[str, ...]] = {
    "kg": ("kg", "entities.parquet", "relations.parquet", "dropped_docs.jsonl", ".rejects-kg.jsonl"),
    "docs": ("documents.parquet", "chunks.parquet", "bm25", ".rejects-docs.jsonl"),
    "vectors": ("vectors",),
}


@dataclass
class BuildReport:
    """What a build did: stages run and skipped, counts, and where the index is."""

    root: Path
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    rejects: int = 0
    seconds: float = 0.0

    @property
    def up_to_date(self) -> bool:
        return not self.ran


def build_index(
    out: Path,
    kg_sources: list[KgSource],
    doc_sources: list[Any],
    kg_options: KgOptions | None = None,
    doc_options: Any | None = None,
    *,
    replace_sources: bool = False,
    rebuild: bool = False,
) -> BuildReport:
    """Create or update the index at `out` from the given sources.

    Sources already recorded in the manifest are kept (a source given again with the same path
    replaces its entry), unless `replace_sources`. `rebuild` runs every stage.
    """
    kg_options = kg_options or KgOptions()
    out = out.resolve()
    started = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(out):
        _recover(out)
        old = read_manifest(IndexPaths(out)) if (out / "manifest.json").exists() else None
        if out.exists() and old is None and any(out.iterdir()):
            raise IndexError_(f"{out}: exists, is not empty and is not an index; choose another --out")
        recorded_kg, recorded_docs = ([], []) if (old is None or replace_sources) else _recorded(old)
        kg_entries = _merge(recorded_kg, [_kg_entry(s) for s in kg_sources])
        doc_entries = _merge(recorded_docs, [_doc_entry(s) for s in doc_sources])
        if not kg_entries and not doc_entries:
            raise InputError("nothing to index: give at least one --kg or --docs source")
        if doc_options is None and (doc_entries or kg_options.dropped_as_docs or kg_options.kg_as_docs):
            from index.doc_stage import DocOptions  # documents stage, imported lazily (heavy deps)

            doc_options = DocOptions()
        fingerprints = _stage_fingerprints(kg_entries, doc_entries, kg_options, doc_options)
        old_stages = (old or {}).get("stages", {})
        to_run = [
            name
            for name, fp in fingerprints.items()
            if fp is not None and (rebuild or old_stages.get(name, {}).get("fingerprint") != fp)
        ]
        report = BuildReport(root=out)
        if not to_run and old is not None and set(old_stages) == {k for k, v in fingerprints.items() if v}:
            report.skipped = list(old_stages)
            report.counts = old.get("counts", {})
            return report
        _check_readable(kg_entries, doc_entries, to_run)
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        _hardlink_copy(out, tmp, skip=[p for name in to_run for p in STAGE_OUTPUTS[name]])
        paths = IndexPaths(tmp)
        stages: dict[str, Any] = {}
        try:
            for name, fp in fingerprints.items():
                if fp is None:
                    continue
                if name not in to_run:
                    stages[name] = old_stages[name]
                    report.skipped.append(name)
                    continue
                counts = _run_stage(name, paths, kg_entries, doc_entries, kg_options, doc_options, out)
                stages[name] = {"fingerprint": fp, "counts": counts, "built": time.time()}
                report.ran.append(name)
            report.rejects = _merge_rejects(paths)
            manifest = _manifest(old, stages, kg_entries, doc_entries, kg_options, doc_options, report.rejects)
            write_manifest(paths, manifest)
        except BaseException as exc:
            # The traceback's frames still hold the half-built store open; release it first.
            traceback.clear_frames(exc.__traceback__)
            gc.collect()
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _swap(tmp, out)
        shutil.rmtree(_cache_dir(out), ignore_errors=True)
        report.counts = manifest["counts"]
        report.seconds = time.monotonic() - started
        return report


def _run_stage(
    name: str,
    paths: IndexPaths,
    kg_entries: list[dict[str, Any]],
    doc_entries: list[dict[str, Any]],
    kg_options: KgOptions,
    doc_options: Any,
    out: Path,
) -> dict[str, Any]:
    if name == "kg":
        rejects = RejectLog(paths.root / ".rejects-kg.jsonl")
        try:
            sources = [KgSource(Path(e["path"]), e["format"]) for e in kg_entries]
            return build_kg(paths, sources, kg_options, rejects)
        finally:
            rejects.close()
    from index.doc_stage import DocSource, build_documents, build_vectors

    if name == "docs":
        rejects = RejectLog(paths.root / ".rejects-docs.jsonl")
        try:
            sources = [DocSource(Path(e["path"]), e["format"], e["collection"]) for e in doc_entries]
            return build_documents(paths, sources, doc_options, rejects)
        finally:
            rejects.close()
    if name == "vectors":
        return build_vectors(paths, doc_options, _cache_dir(out))
    raise AssertionError(name)


def _stage_fingerprints(
    kg_entries: list[dict[str, Any]], doc_entries: list[dict[str, Any]], kg_options: KgOptions, doc_options: Any
) -> dict[str, str | None]:
    def content(entries: list[dict[str, Any]]) -> list[Any]:
        return [
            {k: e[k] for k in ("path", "format", "collection") if k in e}
            | {"content": e["fingerprint"].get("sha256") or [e["fingerprint"].get("size"), e["fingerprint"].get("mtime")]}
            for e in entries
        ]

    kg_fp = stable_hash([content(kg_entries), asdict(kg_options)]) if kg_entries else None
    derived = kg_options.kg_as_docs or (kg_options.dropped_as_docs and kg_options.keep_fraction < 1.0)
    has_docs = bool(doc_entries) or bool(kg_entries and derived)
    options = asdict(doc_options) if doc_options is not None else {}
    chunking = {k: options.get(k) for k in ("chunk_size", "chunk_overlap")}
    docs_fp = stable_hash([content(doc_entries), chunking, kg_fp]) if has_docs else None
    # batch and shard sizes change how vectors are computed, not what they are
    embedding = {k: options.get(k) for k in ("embed_model", "faiss_kind", "entity_vectors")}
    vectors_fp = stable_hash([docs_fp, embedding]) if has_docs else None
    return {"kg": kg_fp, "docs": docs_fp, "vectors": vectors_fp}


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


def _manifest(
    old: dict[str, Any] | None,
    stages: dict[str, Any],
    kg_entries: list[dict[str, Any]],
    doc_entries: list[dict[str, Any]],
    kg_options: KgOptions,
    doc_options: Any,
    rejects: int,
) -> dict[str, Any]:
    counts: dict[str, Any] = {"rejects": rejects}
    for name in ("kg", "docs"):
        stage_counts = stages.get(name, {}).get("counts", {})
        counts.update({k: v for k, v in stage_counts.items() if isinstance(v, int | float)})
    strip = [{k: v for k, v in e.items() if k != "missing"} for e in kg_entries]
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "created": (old or {}).get("created", time.time()),
        "updated": time.time(),
        "sources": {"kg": strip, "docs": doc_entries},
        "stages": stages,
        "counts": counts,
        "build_options": {"kg": asdict(kg_options), "docs": asdict(doc_options) if doc_options else None},
    }
    if "vectors" in stages:
        manifest["embedding"] = {
            k: stages["vectors"]["counts"].get(k) for k in ("model", "dim", "model_fingerprint") if k in stages["vectors"]["counts"]
        }
    return manifest


def _merge_rejects(paths: IndexPaths) -> int:
    """rejects.jsonl is rewritten from the per-stage files on every build (never appended in place)."""
    total = 0
    tmp = paths.rejects.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for stage in ("kg", "docs"):
            part = paths.root / f".rejects-{stage}.jsonl"
            if part.exists():
                with part.open(encoding="utf-8") as fh:
                    for line in fh:
                        out.write(line)
                        total += 1
    if paths.rejects.exists():
        paths.rejects.unlink()
    os.replace(tmp, paths.rejects)
    return total


def _hardlink_copy(src: Path, dst: Path, skip: list[str]) -> None:
    dst.mkdir(parents=True)
    if not src.exists():
        return
    for child in src.iterdir():
        if child.name in skip or child.name in ("manifest.json", "rejects.jsonl"):
            continue
        if child.is_dir():
            shutil.copytree(child, dst / child.name, copy_function=os.link)
        else:
            os.link(child, dst / child.name)


def _cache_dir(out: Path) -> Path:
    """Survives a crashed build (resumable embedding shards); removed after a successful one."""
    return out.parent / f".{out.name}.cache"


def _swap(tmp: Path, out: Path) -> None:
    old = out.parent / f".{out.name}.old"
    if out.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.rename(out, old)
    os.rename(tmp, out)
    shutil.rmtree(old, ignore_errors=True)


def _recover(out: Path) -> None:
    """Finish or undo a swap that a crash interrupted, and drop temp folders of dead builds."""
    old = out.parent / f".{out.name}.old"
    if old.exists():
        if out.exists():
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(old, out)
    for tmp in out.parent.glob(f".{out.name}.tmp-*"):
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _build_lock(out: Path) -> Iterator[None]:
    lock_path = out.parent / f".{out.name}.lock"
    with lock_path.open("w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise IndexError_(f"{out}: another build of this index is running") from exc
        yield
