"""Build or update an index folder: atomic (temp folder + rename) and incremental (a stage whose
inputs are unchanged is reused as it is).

Stages and what their fingerprint covers:
  kg       KG sources (content) + KG options            -> kg/, entities.parquet, relations.parquet
  docs     document sources + chunking + the kg stage   -> documents.parquet, chunks.parquet, bm25/
  mentions the docs stage + --kg-from-docs              -> kg/, relations.parquet, entities.parquet
           (only with --kg-from-docs, in an index without --kg)  (degrees)
  vectors  the docs stage + embedding model (content)   -> vectors/, embeddings/
           + FAISS kind + which chunks (--vectors all|linked; not built with --vectors none)

Options not given are those the index was last built with (`build_options` in its manifest),
else the defaults; a given option overrides, and the stages it affects rebuild.

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
owner process is gone (see `_clean_stale`). Readers open an index through
`index.paths.open_index`, which repeats an open that a swap overlapped.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import gc
import json
import os
import re
import shutil
import socket
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from index.kg_stage import KgSource, build_kg, remove_doc_ids
from index.manifest import read_manifest, stable_hash, write_manifest
from index.paths import SCHEMA_VERSION, IndexPaths, previous_root
from index.sigterm import terminate_cleanly
from ingest.errors import IndexError_, InputError
from ingest.freebase import FREEBASE_DROP_PREFIXES
from ingest.kg_readers import KgOptions
from ingest.progress import console
from ingest.rejects import RejectLog
from ingest.sources import fingerprint, same_content

STAGE_OUTPUTS: dict[str, tuple[str, ...]] = {
    "kg": ("kg", "entities.parquet", "relations.parquet", "dropped_docs.jsonl", ".rejects-kg.jsonl"),
    # entities.parquet: in an index without a KG, the entities made from its documents
    "docs": ("documents.parquet", "chunks.parquet", "bm25", ".rejects-docs.jsonl", "entities.parquet"),
    # the KG made from the documents (--kg-from-docs) and the entities' degrees in it
    "mentions": ("kg", "relations.parquet", "entities.parquet"),
    "vectors": ("vectors", "embeddings"),
}
_Options = TypeVar("_Options")


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
        old = read_manifest(IndexPaths(out)) if (out / "manifest.json").exists() else None
        if out.exists() and old is None and any(out.iterdir()):
            raise IndexError_(f"{out}: exists, is not empty and is not an index; choose another --out")
        forget = old is None or replace_sources
        recorded_kg, recorded_docs = ([], []) if forget else _recorded(old)
        kg_entries = _merge(recorded_kg, [_kg_entry(s) for s in kg_sources])
        doc_entries = _merge(recorded_docs, [_doc_entry(s) for s in doc_sources])
        if not kg_entries and not doc_entries:
            raise InputError("nothing to index: give at least one --kg or --docs source")
        recorded_options = {} if forget else (old or {}).get("build_options") or {}
        report = BuildReport(root=out)
        kg_options = _resolve_options(KgOptions, kg_options, recorded_options.get("kg"), report.inherited)
        has_docs = _has_docs(kg_entries, doc_entries, kg_options)
        recorded_docs_options = recorded_options.get("docs")
        if recorded_docs_options and "embed_backend" not in recorded_docs_options:
            # built before embedding backends existed: with torch, whatever the default is now
            recorded_docs_options = {**recorded_docs_options, "embed_backend": "torch"}
        doc_options = _doc_options(doc_options, recorded_docs_options, has_docs, report.inherited)
        if doc_options is not None:
            doc_options = _absolute_model(doc_options)
        _check_kg_from_docs(kg_entries, doc_options)
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
        if (
            not to_run
            and old is not None
            and set(old_stages) == set(reused)
            and old.get("build_options") == build_options
        ):
            report.skipped = list(old_stages)
            report.counts = old.get("counts", {})
            report.stage_counts = {name: stage.get("counts", {}) for name, stage in old_stages.items()}
            return report
        _check_readable(kg_entries, doc_entries, to_run)
        report.removed = [name for name in old_stages if fingerprints.get(name) is None]
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        paths = IndexPaths(tmp)
        stages: dict[str, Any] = {}
        try:
            _hardlink_copy(out, tmp, keep=[p for name in reused for p in STAGE_OUTPUTS[name]])
            if "kg" in reused and fingerprints["docs"] is None and paths.entities.exists():
                remove_doc_ids(paths.entities)  # links to documents the index no longer has
            if "mentions" in report.removed and "docs" in reused:
                from index.mentions_kg import reset_degrees

                reset_degrees(paths.entities)  # degrees of the KG the index no longer has
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
            manifest = _manifest(old, stages, kg_entries, doc_entries, build_options, report.rejects)
            if recipe is not None:
                manifest["recipe"] = dict(recipe)
            write_manifest(paths, manifest)
        except BaseException as exc:
            # The traceback's frames still hold the half-built store open; release it first.
            traceback.clear_frames(exc.__traceback__)
            gc.collect()
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        with sigterm.deferred():  # a SIGTERM now waits until the swap and its cleanup are done
            try:
                _swap(tmp, out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)  # after an exchange: the previous index
            sigterm.done = True
            shutil.rmtree(_cache_dir(out), ignore_errors=True)
        report.counts = manifest["counts"]
        report.stage_counts = {name: stage.get("counts", {}) for name, stage in stages.items()}
        report.seconds = time.monotonic() - started
        return report


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
    from index.doc_stage import DocOptions  # documents stage, imported lazily (heavy deps)

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
    if name == "mentions":
        from index.mentions_kg import build_mentions_kg

        return build_mentions_kg(paths, doc_options.kg_from_docs)
    if name == "vectors":
        # texts the live index already embedded with the same model are not embedded again
        return build_vectors(paths, doc_options, _cache_dir(out), previous=out / "embeddings")
    raise AssertionError(name)


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


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (on this host)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _lock_is_free(lock_path: Path) -> bool:
    """Whether nobody holds the build lock at `lock_path` (no file: nobody)."""
    try:
        handle = lock_path.open("r")
    except FileNotFoundError:
        return True
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def _clean_stale(out: Path) -> None:
    """Remove what dead builds left beside `out` (a kill -9 runs no cleanup): temp folders
    `.NAME.tmp-PID` whose process is gone and whose index nobody is building (this build holds
    the lock of `out`), and lock files nobody holds. A live build keeps its lock and its
    process, so it is never touched."""
    parent = out.parent
    for tmp in parent.glob(".*.tmp-*"):
        name, _, pid = tmp.name[1:].rpartition(".tmp-")
        if not pid.isdigit() or not tmp.is_dir():
            continue
        unlocked = name == out.name or _lock_is_free(parent / f".{name}.lock")
        if (int(pid) == os.getpid() or not pid_alive(int(pid))) and unlocked:
            shutil.rmtree(tmp, ignore_errors=True)
    for lock_path in parent.glob(".*.lock"):
        if _is_build_lock(lock_path):
            _remove_free_lock(lock_path)


def _is_build_lock(lock_path: Path) -> bool:
    """Only our own lock files are removed: one that names its holder the way `_build_lock`
    writes it, or an empty one (older builds) beside an index of that name."""
    try:
        text = lock_path.read_text(encoding="utf-8", errors="replace")[:200]
    except OSError:
        return False
    if re.match(r"pid \d+ on ", text):
        return True
    name = lock_path.name[1 : -len(".lock")]
    return text == "" and (lock_path.parent / name / "manifest.json").is_file()


def _remove_free_lock(lock_path: Path) -> None:
    """Unlink a lock file while holding it (a builder that opened it before checks the inode)."""
    try:
        handle = lock_path.open("r")
    except OSError:
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        with contextlib.suppress(OSError):
            if os.fstat(handle.fileno()).st_ino == os.stat(lock_path).st_ino:
                lock_path.unlink()


@contextlib.contextmanager
def _build_lock(out: Path) -> Iterator[None]:
    """One build per index. The lock file says who holds it (pid, host) and is removed when the
    build ends, failed or not; a lock file left by a killed build is free (the kernel drops the
    lock with its process) and is removed by the next build."""
    lock_path = out.parent / f".{out.name}.lock"
    while True:
        fh = lock_path.open("a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            fh.close()
            raise IndexError_(f"{out}: another build of this index is running ({holder})") from exc
        try:
            same = os.fstat(fh.fileno()).st_ino == os.stat(lock_path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        fh.close()  # removed by the build that held it: lock the new file instead
    try:
        fh.truncate(0)
        fh.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        fh.flush()
        yield
    finally:
        with contextlib.suppress(OSError):
            lock_path.unlink()
        fh.close()
