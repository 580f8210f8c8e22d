"""Replay run folders from the LLM response cache and check that nothing changed.

For each RUN folder: its `run.json` command runs again into a temporary folder (same index,
questions, sample, methods, settings and model; the response cache on), then every record of
every method is compared with the original: the same questions, predictions and replies, and
every LLM call a cache hit (a miss means a prompt changed). This is the check behind "answers
unchanged" for a change that should not move answers (decoding, threads, refactoring).

Usage:
    python -m bench.replay_check data/runs/chains/metaqa-1-hop [RUN ...] [--keep DIR]
Exit status 0 when every run replays the same, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from engine.runs.run_folder import latest_records, read_run, record_files
from engine.runs.transcripts import read_transcripts, transcript_methods

REPO = Path(__file__).resolve().parents[1]


def _records(run: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """method -> question id -> its last record (a resumed run may hold earlier tries)."""
    return {path.stem: latest_records(path) for path in record_files(run)}


def _calls(run: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """method -> question id -> its LLM calls (reply, cache_hit) from the run's transcripts."""
    return {method: {qid: line.get("calls") or [] for qid, line in read_transcripts(run, method).items()}
            for method in transcript_methods(run)}


def replay(run: Path, out: Path) -> dict[str, Any]:
    """Run `run`'s command again into `out`; compare. Returns the counts."""
    command = (read_run(run) or {})["command"]
    args = list(command[1:]) if command and command[0].endswith("cli.py") else list(command)
    args = [a for a in args if a != "--restart"]
    args[args.index("--out") + 1] = str(out)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, str(REPO / "cli.py"), *args], cwd=REPO, env=env,
                          capture_output=True, text=True)
    result: dict[str, Any] = {"run": str(run), "exit": done.returncode, "records": 0, "different": [],
                              "missing": [], "calls": 0, "cache_misses": 0}
    if done.returncode != 0:
        result["stderr"] = done.stderr[-800:]
        return result
    before, after = _records(run), _records(out)
    calls_before, calls_after = _calls(run), _calls(out)
    for method, records in before.items():
        for qid, old in records.items():
            new = after.get(method, {}).get(qid)
            if new is None:
                result["missing"].append(f"{method}/{qid}")
                continue
            result["records"] += 1
            replies_old = [c.get("reply") for c in calls_before.get(method, {}).get(qid, [])]
            new_calls = calls_after.get(method, {}).get(qid, [])
            replies_new = [c.get("reply") for c in new_calls]
            result["calls"] += len(new_calls)
            result["cache_misses"] += sum(1 for c in new_calls if not c.get("cache_hit"))
            if (old.get("prediction"), old.get("predictions")) != (new.get("prediction"), new.get("predictions")) \
                    or replies_old != replies_new:
                result["different"].append(f"{method}/{qid}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replay_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--keep", type=Path, default=None, help="write the replays here (default: a temp folder)")
    args = parser.parse_args(argv)
    ok = True
    with tempfile.TemporaryDirectory(prefix="replay-") as tmp:
        base = args.keep or Path(tmp)
        for i, run in enumerate(args.runs):
            result = replay(run, base / f"{i}-{run.name}")
            same = result["exit"] == 0 and not result["different"] and not result["missing"] and not result["cache_misses"]
            ok &= same
            print(f"{'SAME' if same else 'CHANGED'} {run}: {result['records']} records, "
                  f"{len(result['different'])} different, {len(result['missing'])} missing, "
                  f"{result['calls']} calls, {result['cache_misses']} cache misses"
                  + (f"; exit {result['exit']}: {result.get('stderr', '')}" if result["exit"] else "")
                  + (f"; first different: {result['different'][:3]}" if result["different"] else ""), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
