"""The cost of the model integrity check (issue 10): sha256 of each installed registry model on
its first use per file identity, and the cost of a later use (a stat and one small JSON file).

`python -m bench.run_all modelcheck` writes bench/results/model_check.json. The check records go
to a temp folder, never the user's models folder. Each file is hashed `REPEATS` times; the first
read may come from disk, later ones from the page cache (both are reported).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.llm import model_checksums, model_registry, models

REPEATS = 3


def _time(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def measure(path: Path, repair: str) -> dict[str, Any]:
    """Seconds of a first-use check (header + sha256) and of a remembered one, for one file."""
    first = [_time(lambda: model_checksums.file_sha256(path, repair=repair, force=True)) for _ in range(REPEATS)]
    remembered = [_time(lambda: model_checksums.file_sha256(path, repair=repair)) for _ in range(20)]
    size = path.stat().st_size
    return {
        "path": str(path), "bytes": size,
        "first_use_seconds": [round(s, 3) for s in first],
        "first_use_seconds_median": round(statistics.median(first), 3),
        "mb_per_second_median": round(size / 1e6 / statistics.median(first), 1),
        "remembered_seconds_median": round(statistics.median(remembered), 6),
    }


def run(results_dir: Path) -> dict[str, Any]:
    results: dict[str, Any] = {
        "command": "python -m bench.run_all modelcheck",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_average_at_start": round(os.getloadavg()[0], 2)},
        "repeats": REPEATS, "models": {}, "skipped": {},
    }
    with tempfile.TemporaryDirectory() as records:
        original = model_checksums._record_path
        model_checksums._record_path = lambda p: Path(records) / (original(p).name)  # type: ignore[assignment]
        try:
            for name, spec in model_registry.REGISTRY.items():
                path = models.model_path(spec)
                if not path.is_file():
                    results["skipped"][name] = f"not installed ({path})"
                    continue
                results["models"][name] = measure(path, f"run `python cli.py models install {name}`")
        finally:
            model_checksums._record_path = original  # type: ignore[assignment]
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "model_check.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    lines = ["| model | size | first use (sha256, median of 3) | later use (identity unchanged) |",
             "|---|---|---|---|"]
    for name, row in results["models"].items():
        lines.append(f"| {name} | {row['bytes'] / 1e6:.0f} MB | {row['first_use_seconds_median']:.2f} s "
                     f"({row['mb_per_second_median']:.0f} MB/s) | {row['remembered_seconds_median'] * 1e3:.2f} ms |")
    results["markdown"] = "\n".join(lines)
    return results
