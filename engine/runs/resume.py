"""Resuming a run folder: compare its run.json with this command's setup and decide.

When the questions, index, model or a method's config differ from the folder's run:
- the run is complete: refused (one folder never mixes configs), unless `restart` (start
  again) or `force_config` (continue anyway; the change is recorded in the history);
- the run is not complete (failed, interrupted, killed): it starts again by itself, since its
  inputs were fixed. Either way a restart moves the old records and run.json aside into
  `previous-<UTC time>/` in the run folder (nothing is deleted) and says what changed.
A new method may join an existing run; a folder never changes shard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.runs.handout import BatchError
from engine.runs.run_folder import move_aside, record_path, utc_now, write_run
from ingest.base.progress import console


def identity_changes(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """What differs between a run folder's recorded identity and this command's: the changes
    that concern every record, and those of single methods (method -> what changed)."""
    changes = []
    old_q, new_q = old.get("questions", {}), new["questions"]
    for key in ("sha256", "format", "limit", "sample", "seed"):
        if old_q.get(key) != new_q.get(key):
            what = "questions file content" if key == "sha256" else f"questions {key}"
            changes.append(f"{what} ({old_q.get(key)!r} -> {new_q.get(key)!r})")
    if old.get("index", {}).get("fingerprint") != new["index"]["fingerprint"]:
        changes.append(f"index fingerprint ({old.get('index', {}).get('fingerprint')} -> {new['index']['fingerprint']})")
    if old.get("index", {}).get("kg_endpoint") != new["index"].get("kg_endpoint"):
        changes.append(f"KG endpoint ({old.get('index', {}).get('kg_endpoint')} -> {new['index'].get('kg_endpoint')})")
    if old.get("model", {}).get("fingerprint") != new["model"]["fingerprint"]:
        changes.append(f"model ({old.get('model', {}).get('fingerprint')} -> {new['model']['fingerprint']})")
    per_method = {}
    for method, entry in new["methods"].items():
        before = old.get("methods", {}).get(method)
        if before is not None and before.get("config_hash") != entry["config_hash"]:
            changed = sorted(k for k in set(before.get("config", {})) | set(entry["config"])
                             if before.get("config", {}).get(k) != entry["config"].get(k))
            what = ", ".join(f"{k} {before.get('config', {}).get(k)!r} -> {entry['config'].get(k)!r}" for k in changed)
            per_method[method] = f"{method} config ({what or 'hash'})"
    return changes, per_method


def _has_records(out: Path, run: dict[str, Any], method: str) -> bool:
    """Whether the folder holds at least one record line of `method`."""
    try:
        with record_path(out, method, run).open("rb") as handle:
            return any(line.strip() for line in handle)
    except FileNotFoundError:
        return False


def restart_if_changed(identity: dict[str, Any], out: Path, previous: dict[str, Any], *, restart: bool,
                       force_config: bool) -> tuple[dict[str, Any] | None, list[str], Path | None]:
    """Compare the folder's run with this command's setup. Returns the run to continue (None:
    start afresh), the changes that made it start again, and where the old records went."""
    changes, per_method = identity_changes(previous, identity)
    # A method whose records were all moved aside (or never written) has nothing to mix with.
    per_method = {m: why for m, why in per_method.items() if _has_records(out, previous, m)}
    everything = [*changes, *per_method.values()]
    if not everything and restart:
        changes = everything = ["none (--restart)"]
    if not everything:
        return previous, [], None
    if force_config:
        history = [*previous.get("history", []), {"at": utc_now(), "forced": everything}]
        return {**previous, "history": history}, [], None
    status = previous.get("status")
    if status == "complete" and not restart:
        raise BatchError(
            f"{out} holds a complete run with a different setup: {'; '.join(everything)}. A resumed run must "
            f"not mix configs: use --restart to move its records aside (into {out}/previous-<time>/) and start "
            f"again, a new --out, or --force-config to continue anyway"
        )
    why = "--restart" if status == "complete" else f"the last run is {status}, so it starts again"
    # A change of questions, index or model voids every record; a method's config only its own.
    backup = move_aside(out, previous, None if changes else list(per_method))
    console.print(f"[yellow]{out}[/]: setup changed: {'; '.join(everything)}; {why}; "
                  f"the old records are in {backup}")
    entry = {"at": utc_now(), "restarted": everything, "previous_status": status, "backup": str(backup)}
    history = [*previous.get("history", []), entry]
    if changes:
        return {"history": history}, everything, backup
    methods = {m: v for m, v in previous.get("methods", {}).items() if m not in per_method}
    return {**previous, "methods": methods, "history": history}, everything, backup


def _shard_text(shard: dict[str, Any] | None) -> str:
    return "an unsharded run" if not shard else f"shard {shard.get('index')}/{shard.get('count')} of a run"


def refuse_other_shard(out: Path, previous: dict[str, Any], shard: dict[str, Any] | None) -> None:
    """A folder holds one shard (or the unsharded run) for good: its records are that shard's
    questions, so another --shard there would mix runs; even --restart does not change it."""
    before = previous.get("shard")
    same = (before or {}).get("index") == (shard or {}).get("index") and \
        (before or {}).get("count") == (shard or {}).get("count")
    if not same:
        asked = "no --shard" if not shard else f"--shard {shard['index']}/{shard['count']}"
        raise BatchError(f"{out} holds {_shard_text(before)}, and this command asks for {asked}: give each "
                         f"shard its own --out (e.g. {out.parent / 'shard-K-of-N'})")


def mark_stale(out: Path, previous: dict[str, Any]) -> dict[str, Any]:
    """Called with the folder's lock held: a "running" run.json was left by a killed writer."""
    writer = previous.get("writer") or {}
    note = f"pid {writer.get('pid')} on {writer.get('host')} was killed while running"
    previous = {**previous, "status": "interrupted", "updated": utc_now(),
                "history": [*previous.get("history", []), {"at": utc_now(), "stale": note}]}
    write_run(out, previous)
    console.print(f"[yellow]{out}[/]: the last run ended without a word ({note}); recorded as interrupted")
    return previous
