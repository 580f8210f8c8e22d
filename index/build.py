"""Build or update an index folder: atomic (temp folder + rename) and incremental (a stage whose
inputs are unchanged is reused as it is).

Stages and what their fingerprint covers:
  kg       KG sources (content) + KG options            -> kg/, entities.parquet, relations.parquet
  docs     document sources + chunking + the kg stage   -> documents.parquet, chunks.parquet, bm25/
  mentions the docs stage + --kg-from-docs              -> kg/, relations.parquet, entities.parquet
           (only with --kg-from-docs, in an index without --kg)  (degrees)
  vectors  the docs stage + embedding model (content)   -> vectors/, embeddings/
           + FAISS kind + which chunks (--vectors all|linked; not built with --vectors none)

How options not given are resolved and what each stage's fingerprint is made of:
index/build_inputs.py.

The temp folder starts as a hard-link copy of the outputs of the stages that are reused (never
of a stage that runs or that no longer exists); a stage that runs writes new files there, so the
live index is never modified in place.

The swap: readers always find a complete index at the path. On Linux the finished temp folder
and the live one are exchanged in one renameat2(RENAME_EXCHANGE) call; where that is not
supported, the live index is renamed to `.NAME.old` before the temp folder takes its place, and
readers that find no index at the path open `.NAME.old` (`IndexPaths`), which the next build
renames back if the swap never finished. A failed build removes its temp folder and lock file,
and so does one stopped by SIGTERM (index/sigterm.py: the CLI then exits 143); one killed
outright (SIGKILL) leaves them, and the next build in the same folder removes those whose
owner process is gone (see `_clean_stale` in index/build_lock.py). Readers open an index through
`index.paths.open_index`, which repeats an open that a swap overlapped.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import os
import shutil
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from index.build_inputs import (
    _absolute_model,
    _build_options,
    _check_kg_from_docs,
    _check_readable,
    _doc_entry,
    _doc_options,
    _has_docs,
    _kg_entry,
    _merge,
    _model_fingerprint,
    _recorded,
    _resolve_options,
    _stage_fingerprints,
)
from index.build_lock import _build_lock, _clean_stale
from index.kg_stage import KgSource, build_kg, remove_doc_ids
from index.manifest import read_manifest, write_manifest
from index.paths import SCHEMA_VERSION, IndexPaths, previous_root
from index.sigterm import terminate_cleanly
from ingest.base.errors import IndexError_, InputError
from ingest.kg_readers import KgOptions
from ingest.rejects import RejectLog

STAGE_OUTPUTS: dict[str, tuple[str, ...]] = {
    "kg": ("kg", "entities.parquet", "relations.parquet", "dropped_docs.jsonl", ".rejects-kg.jsonl"),
    # entities.parquet: in an index without a KG, the entities made from its documents
    "docs": ("documents.parquet", "chunks.parquet", "bm25", ".rejects-docs.jsonl", "entities.parquet"),
    # the KG made from the documents (--kg-from-docs) and the entities' degrees in it
    "mentions": ("kg", "relations.parquet", "entities.parquet"),
    "vectors": ("vectors", "embeddings"),
}


@dataclass
class BuildReport:
    """What a build did: stages run, skipped and removed, counts, and where the index is."""

    root: Path
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # stages of the previous build that no longer exist
    counts: dict[str, Any] = field(default_factory=dict)
    rejects: int = 0
    seconds: float = 0.0
    # options taken from the previous build (not given, and not the defaults): name -> value
    inherited: dict[str, Any] = field(default_factory=dict)
    # counts of each stage of the index (those that ran and those reused): stage -> counts
    stage_counts: dict[str, Any] = field(default_factory=dict)

    @property
    def up_to_date(self) -> bool:
        return not self.ran and not self.removed


def build_index(
    out: Path,
    kg_sources: list[KgSource],
    doc_sources: list[Any],
    kg_options: KgOptions | Mapping[str, Any] | None = None,
    doc_options: Any | Mapping[str, Any] | None = None,
    *,
    replace_sources: bool = False,
    rebuild: bool = False,
    recipe: Mapping[str, Any] | None = None,
) -> BuildReport:
    """Create or update the index at `out` from the given sources.

    Sources already recorded in the manifest are kept (a source given again with the same path
    replaces its entry). A KgOptions / DocOptions object is used as it is; a mapping gives only
    the options to change, and None changes none: every other option is the one recorded by the
    last build, else its default. `replace_sources` forgets the recorded sources and options:
    the index is made of what is given now (a stage whose inputs are unchanged is still reused).
    `rebuild` runs every stage. `recipe` ({path, sha256} of an `index --config` file) is
    recorded in the manifest of the index this build writes.
    """
    out = out.resolve()
    started = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    with terminate_cleanly(out) as sigterm, _build_lock(out):  # SIGTERM: clean up, see index/sigterm.py
        _recover(out)
        _clean_stale(out)
        old = _read_previous(out)
        report = BuildReport(root=out)
        plan = _plan(old, kg_sources, doc_sources, kg_options, doc_options, replace_sources, rebuild, report)
        if _unchanged(old, plan, report):
            return report
        _check_readable(plan.kg_entries, plan.doc_entries, plan.to_run)
        report.removed = [name for name in plan.old_stages if plan.fingerprints.get(name) is None]
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        manifest, stages = _build_in(tmp, out, old, plan, report, recipe)
        _publish(tmp, out, sigterm)
        report.counts = manifest["counts"]
        report.stage_counts = {name: stage.get("counts", {}) for name, stage in stages.items()}
        report.seconds = time.monotonic() - started
        return report


@dataclass
class _Plan:
    """What a build works from: the merged sources, the resolved options, each stage's
    fingerprint, and which stages run and which are reused from the previous build."""

    kg_entries: list[dict[str, Any]]
    doc_entries: list[dict[str, Any]]
    kg_options: KgOptions
    doc_options: Any
    fingerprints: dict[str, Any]
    old_stages: dict[str, Any]
    to_run: list[str]
    reused: list[str]
    build_options: dict[str, Any]


def _read_previous(out: Path) -> dict[str, Any] | None:
    """The manifest of the index at `out`, None where there is none yet; a folder that is not
    an index and not empty is refused."""
    old = read_manifest(IndexPaths(out)) if (out / "manifest.json").exists() else None
    if out.exists() and old is None and any(out.iterdir()):
        raise IndexError_(f"{out}: exists, is not empty and is not an index; choose another --out")
    return old


def _plan(
    old: dict[str, Any] | None,
    kg_sources: list[KgSource],
    doc_sources: list[Any],
    kg_options: KgOptions | Mapping[str, Any] | None,
    doc_options: Any | Mapping[str, Any] | None,
    replace_sources: bool,
    rebuild: bool,
    report: BuildReport,
) -> _Plan:
    """Merge the sources with those recorded, resolve the options (those inherited go to
    `report.inherited`) and fingerprint each stage to decide which run."""
    forget = old is None or replace_sources
    recorded_kg, recorded_docs = ([], []) if forget else _recorded(old)
    kg_entries = _merge(recorded_kg, [_kg_entry(s) for s in kg_sources])
    doc_entries = _merge(recorded_docs, [_doc_entry(s) for s in doc_sources])
    if not kg_entries and not doc_entries:
        raise InputError("nothing to index: give at least one --kg or --docs source")
    recorded_options = {} if forget else (old or {}).get("build_options") or {}
    kg_options, doc_options, has_docs = _options(
        kg_entries, doc_entries, kg_options, doc_options, recorded_options, report.inherited
    )
    wants_vectors = has_docs and doc_options is not None and doc_options.vectors
    model_fp = _model_fingerprint(doc_options) if wants_vectors else None
    fingerprints = _stage_fingerprints(kg_entries, doc_entries, kg_options, doc_options, model_fp)
    old_stages = (old or {}).get("stages", {})
    to_run = [
        name
        for name, fp in fingerprints.items()
        if fp is not None and (rebuild or old_stages.get(name, {}).get("fingerprint") != fp)
    ]
    reused = [name for name, fp in fingerprints.items() if fp is not None and name not in to_run]
    build_options = _build_options(kg_options, doc_options)
    return _Plan(
        kg_entries, doc_entries, kg_options, doc_options, fingerprints, old_stages, to_run, reused, build_options
    )


def _options(
    kg_entries: list[dict[str, Any]],
    doc_entries: list[dict[str, Any]],
    kg_options: KgOptions | Mapping[str, Any] | None,
    doc_options: Any | Mapping[str, Any] | None,
    recorded_options: dict[str, Any],
    inherited: dict[str, Any],
) -> tuple[KgOptions, Any, bool]:
    """The KG and document options this build uses, and whether the index has documents."""
    kg_options = _resolve_options(KgOptions, kg_options, recorded_options.get("kg"), inherited)
    has_docs = _has_docs(kg_entries, doc_entries, kg_options)
    recorded_docs_options = recorded_options.get("docs")
    if recorded_docs_options and "embed_backend" not in recorded_docs_options:
        # built before embedding backends existed: with torch, whatever the default is now
        recorded_docs_options = {**recorded_docs_options, "embed_backend": "torch"}
    doc_options = _doc_options(doc_options, recorded_docs_options, has_docs, inherited)
    if doc_options is not None:
        doc_options = _absolute_model(doc_options)
    _check_kg_from_docs(kg_entries, doc_options)
    return kg_options, doc_options, has_docs


def _unchanged(old: dict[str, Any] | None, plan: _Plan, report: BuildReport) -> bool:
    """True (and `report` filled from the previous build) where nothing is to run, no stage is
    removed and the options are the same: the index is up to date."""
    if (
        not plan.to_run
        and old is not None
        and set(plan.old_stages) == set(plan.reused)
        and old.get("build_options") == plan.build_options
    ):
        report.skipped = list(plan.old_stages)
        report.counts = old.get("counts", {})
        report.stage_counts = {name: stage.get("counts", {}) for name, stage in plan.old_stages.items()}
        return True
    return False


def _build_in(
    tmp: Path,
    out: Path,
    old: dict[str, Any] | None,
    plan: _Plan,
    report: BuildReport,
    recipe: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Write the new index in the temp folder `tmp`: reused outputs hard-linked from `out`, the
    stages that run, the merged rejects and the manifest. Returns (manifest, stages); on any
    failure the temp folder is removed."""
    paths = IndexPaths(tmp)
    stages: dict[str, Any] = {}
    try:
        _hardlink_copy(out, tmp, keep=[p for name in plan.reused for p in STAGE_OUTPUTS[name]])
        _forget_dropped(paths, plan, report)
        _run_stages(paths, plan, out, stages, report)
        report.rejects = _merge_rejects(paths)
        manifest = _manifest(old, stages, plan.kg_entries, plan.doc_entries, plan.build_options, report.rejects)
        if recipe is not None:
            manifest["recipe"] = dict(recipe)
        write_manifest(paths, manifest)
    except BaseException as exc:
        # The traceback's frames still hold the half-built store open; release it first.
        traceback.clear_frames(exc.__traceback__)
        gc.collect()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest, stages


def _forget_dropped(paths: IndexPaths, plan: _Plan, report: BuildReport) -> None:
    """In the reused outputs, undo what a stage that no longer exists had added to them."""
    if "kg" in plan.reused and plan.fingerprints["docs"] is None and paths.entities.exists():
        remove_doc_ids(paths.entities)  # links to documents the index no longer has
    if "mentions" in report.removed and "docs" in plan.reused:
        from index.mentions_kg import reset_degrees

        reset_degrees(paths.entities)  # degrees of the KG the index no longer has


def _run_stages(
    paths: IndexPaths, plan: _Plan, out: Path, stages: dict[str, Any], report: BuildReport
) -> None:
    """Run the stages to run, in order, and record each stage (run or reused) in `stages`."""
    for name, fp in plan.fingerprints.items():
        if fp is None:
            continue
        if name not in plan.to_run:
            stages[name] = plan.old_stages[name]
            report.skipped.append(name)
            continue
        counts = _run_stage(name, paths, plan.kg_entries, plan.doc_entries, plan.kg_options, plan.doc_options, out)
        stages[name] = {"fingerprint": fp, "counts": counts, "built": time.time()}
        report.ran.append(name)


def _publish(tmp: Path, out: Path, sigterm: Any) -> None:
    """Swap the finished index in, then remove the temp folder and the embedding cache."""
    with sigterm.deferred():  # a SIGTERM now waits until the swap and its cleanup are done
        try:
            _swap(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # after an exchange: the previous index
        sigterm.done = True
        shutil.rmtree(_cache_dir(out), ignore_errors=True)


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
    from index.doc_options import DocSource
    from index.doc_stage import build_documents
    from index.vectors_stage import build_vectors

    if name == "docs":
        rejects = RejectLog(paths.root / ".rejects-docs.jsonl")
        try:
            sources = [DocSource(Path(e["path"]), e["format"], e["collection"]) for e in doc_entries]
            return build_documents(paths, sources, doc_options, rejects)
        finally:
            rejects.close()
    if name == "mentions":
        from index.mentions_kg import build_mentions_kg

        return build_mentions_kg(paths, doc_options.kg_from_docs)
    if name == "vectors":
        # texts the live index already embedded with the same model are not embedded again
        return build_vectors(paths, doc_options, _cache_dir(out), previous=out / "embeddings")
    raise AssertionError(name)


def _manifest(
    old: dict[str, Any] | None,
    stages: dict[str, Any],
    kg_entries: list[dict[str, Any]],
    doc_entries: list[dict[str, Any]],
    build_options: dict[str, Any],
    rejects: int,
) -> dict[str, Any]:
    counts: dict[str, Any] = {"rejects": rejects}
    for name in ("kg", "docs", "mentions"):
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
        "build_options": build_options,
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


def _hardlink_copy(src: Path, dst: Path, keep: list[str]) -> None:
    """Create `dst` with hard links to the entries of `src` named in `keep` (the outputs of the
    reused stages): outputs of a stage that runs or no longer exists are not carried over."""
    dst.mkdir(parents=True)
    for name in dict.fromkeys(keep):  # entities.parquet is an output of two stages
        child = src / name
        if not child.exists():
            continue
        if child.is_dir():
            shutil.copytree(child, dst / child.name, copy_function=os.link)
        else:
            os.link(child, dst / child.name)


def _cache_dir(out: Path) -> Path:
    """Survives a crashed build (resumable embedding shards); removed after a successful one."""
    return out.parent / f".{out.name}.cache"


RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two folders (Linux renameat2 RENAME_EXCHANGE); False where the system
    or the file system does not support it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(code, f"cannot exchange {a} and {b}: {os.strerror(code)}")


def _swap(tmp: Path, out: Path) -> None:
    """Put the finished index `tmp` at `out`. At every instant a reader finds a complete index:
    the new or the previous one at `out`, or (two-rename fallback only) the previous one at
    `.NAME.old`, where `IndexPaths` looks when `out` is missing. After an exchange the previous
    index is at `tmp`, which the caller removes."""
    if not out.exists():
        os.rename(tmp, out)
        return
    if _exchange(tmp, out):
        return
    old = previous_root(out)
    shutil.rmtree(old, ignore_errors=True)
    os.rename(out, old)
    os.rename(tmp, out)
    shutil.rmtree(old, ignore_errors=True)


def _recover(out: Path) -> None:
    """Finish or undo a swap that a crash interrupted."""
    old = previous_root(out)
    if old.exists():
        if out.exists():
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(old, out)
