"""Progress bars for long work: rich on a terminal, quiet when not (CI logs, pipes)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)


class Reporter(Protocol):
    """What long-running work reports to: `advance` by units, with an optional status text."""

    def advance(self, amount: float = 1, status: str | None = None) -> None: ...


class _RichReporter:
    def __init__(self, progress: Progress, task: Any) -> None:
        self._progress = progress
        self._task = task

    def advance(self, amount: float = 1, status: str | None = None) -> None:
        if status is None:
            self._progress.update(self._task, advance=amount)
        else:
            self._progress.update(self._task, advance=amount, status=status)


class NullReporter:
    """A reporter that shows nothing (tests, non-interactive runs)."""

    def advance(self, amount: float = 1, status: str | None = None) -> None:
        return None


def _enabled() -> bool:
    return console.is_terminal and sys.stderr.isatty()


@contextmanager
def progress_bar(description: str, total: float | None, unit: str = "items") -> Iterator[Reporter]:
    """A progress bar with rate and ETA; `unit="bytes"` shows bytes read out of the file size."""
    if not _enabled():
        yield NullReporter()
        return
    amount_column = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        amount_column,
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
    ]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(description, total=total, status="")
        yield _RichReporter(progress, task)
