"""Progress for long work: a rich bar on a terminal; when output is not a terminal (a log file,
a pipe, CI), one plain line every LOCALKG_PROGRESS_SECONDS (default 15) with the stage, done /
total, rate and elapsed time, so that a redirected build shows life.
"""

from __future__ import annotations

import os
import sys
import time
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


class LogReporter:
    """Writes `stage: done/total (pct), rate/s, elapsed` to stderr at most once per `interval`
    seconds, and a last line at the end when the work took longer than one interval."""

    def __init__(self, description: str, total: float | None, unit: str, interval: float) -> None:
        self.description, self.total, self.unit, self.interval = description, total, unit, interval
        self.done = 0.0
        self.status = ""
        self.started = self._last = time.monotonic()
        self.lines = 0

    def advance(self, amount: float = 1, status: str | None = None) -> None:
        self.done += amount
        if status is not None:
            self.status = status
        if time.monotonic() - self._last >= self.interval:
            self._write()

    def finish(self) -> None:
        if time.monotonic() - self.started >= self.interval:
            self._write(final=True)

    def line(self, final: bool = False) -> str:
        """The progress line as it would be written now."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        done, rate = _amount(self.done, self.unit), _amount(self.done / elapsed, self.unit)
        of = f"/{_amount(self.total, self.unit)} ({100 * self.done / self.total:.0f}%)" if self.total else ""
        text = f"{self.description}: {done}{of} {self.unit if self.unit != 'bytes' else ''}".rstrip()
        text += f", {rate}/s, {elapsed:.0f}s elapsed" + (", done" if final else "")
        return text + (f", {self.status}" if self.status else "")

    def _write(self, final: bool = False) -> None:
        print(self.line(final), file=sys.stderr, flush=True)
        self._last = time.monotonic()
        self.lines += 1


def _amount(value: float, unit: str) -> str:
    if unit != "bytes":
        return f"{value:,.0f}"
    for suffix in ("B", "KB", "MB", "GB"):
        if value < 1000:
            return f"{value:.0f} {suffix}" if suffix == "B" else f"{value:.1f} {suffix}"
        value /= 1000
    return f"{value:.1f} TB"


def log_interval() -> float:
    """Seconds between plain progress lines (LOCALKG_PROGRESS_SECONDS; 0 turns them off)."""
    try:
        return float(os.environ.get("LOCALKG_PROGRESS_SECONDS", "15"))
    except ValueError:
        return 15.0


def _enabled() -> bool:
    return console.is_terminal and sys.stderr.isatty()


@contextmanager
def progress_bar(description: str, total: float | None, unit: str = "items") -> Iterator[Reporter]:
    """A progress bar with rate and ETA; `unit="bytes"` shows bytes read out of the file size."""
    if not _enabled():
        interval = log_interval()
        if interval <= 0:
            yield NullReporter()
            return
        reporter = LogReporter(description, total, unit, interval)
        yield reporter
        reporter.finish()
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
