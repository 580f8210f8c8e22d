"""A benchmark's SUMMARY-<name>.md beside its JSON, written the same way by each bench's `main`,
and a value put into a results JSON at a key path (`--json` of chain_rank and trace_stats)."""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def write_summary(results: Path, name: str, title: str, command: str, markdown: str) -> None:
    """`results/SUMMARY-<name>.md`: a title, the command that produced it, the machine and date,
    then the bench's markdown (its raw numbers are `results/<name with _>.json`)."""
    raw = name.replace("-", "_") + ".json"
    (results / f"SUMMARY-{name}.md").write_text(
        f"# {title}\n\nProduced by `{command.strip()}` on {platform.machine()}, "
        f"{time.strftime('%Y-%m-%d')}. Raw numbers: bench/results/{raw}.\n\n{markdown}\n",
        encoding="utf-8")


def missing_input(model: str, index: Path, builds_it: str) -> str | None:
    """Why a bench that needs the registry model `model` and the index at `index` cannot run
    (reported as skipped, not as a failure), or None when both are there. The index's reason
    wins, as each bench reported it before."""
    from engine.llm.model_registry import REGISTRY
    from engine.llm.models import verify_model
    from ingest.base.errors import ModelError

    if not (index / "manifest.json").exists():
        return f"{index} is missing: {builds_it}"
    try:
        verify_model(REGISTRY[model])
    except ModelError as exc:
        return str(exc)
    return None


def skipped_lines(results: dict[str, Any]) -> list[str]:
    """The markdown lines naming what a bench skipped, and why."""
    return [f"\nSkipped ({name}): {why}" for name, why in results["skipped"].items()]


def add_to_json(path: Path, keys: Sequence[str], value: dict[str, Any]) -> None:
    """Put `value` at `keys` in the JSON file at `path` (made if missing), keeping the rest."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    node = data
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
