"""A benchmark's SUMMARY-<name>.md beside its JSON, written the same way by each bench's `main`."""

from __future__ import annotations

import platform
import time
from pathlib import Path


def write_summary(results: Path, name: str, title: str, command: str, markdown: str) -> None:
    """`results/SUMMARY-<name>.md`: a title, the command that produced it, the machine and date,
    then the bench's markdown (its raw numbers are `results/<name with _>.json`)."""
    raw = name.replace("-", "_") + ".json"
    (results / f"SUMMARY-{name}.md").write_text(
        f"# {title}\n\nProduced by `{command.strip()}` on {platform.machine()}, "
        f"{time.strftime('%Y-%m-%d')}. Raw numbers: bench/results/{raw}.\n\n{markdown}\n",
        encoding="utf-8")
