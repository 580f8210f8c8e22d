"""SIGTERM during a build: the build cleans up after itself instead of dying where it stands.

By default SIGTERM kills the process on the spot, which leaves the build's temp folder
(`.NAME.tmp-PID`) and lock file (`.NAME.lock`) behind until the next build removes them. While
`terminate_cleanly` is active, SIGTERM raises `BuildTerminated` in the main thread instead: the
build's own cleanup runs (the temp folder is removed, then the lock), and the CLI prints the
message and exits 143 (128 + SIGTERM, what a shell reports for a process that SIGTERM ended,
so supervisors read it the same way). Inside `deferred()` (the swap and the removal of the
previous index) the signal waits until the section ends, so the swap is never cut in half.
A second SIGTERM while the first is being handled is ignored; SIGKILL still kills outright.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType


class BuildTerminated(KeyboardInterrupt):
    """A build stopped by SIGTERM. A KeyboardInterrupt, so that no `except Exception` on the
    way swallows it; `exit_code` is what the CLI exits with."""

    exit_code = 128 + signal.SIGTERM


class _Sigterm:
    """The handler: raises BuildTerminated, or notes the signal inside a deferred section."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.fired = False
        self.critical = False
        self.pending = False
        self.done = False  # the new index is in place

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.fired:
            return
        if self.critical:
            self.pending = True
            return
        self.fired = True
        raise BuildTerminated(self.message())

    def message(self) -> str:
        if self.done:
            return (f"{self.out}: stopped by SIGTERM after the new index was put in place; "
                    "nothing of the build is left behind")
        return (f"{self.out}: build stopped by SIGTERM; its temp folder and lock were removed and the "
                "index at the path is as it was (run the same command again to build it)")

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """A section SIGTERM does not cut: a signal received inside it is raised at its end."""
        self.critical = True
        try:
            yield
        finally:
            self.critical = False
        if self.pending and not self.fired:
            self.fired = True
            raise BuildTerminated(self.message())


@contextlib.contextmanager
def terminate_cleanly(out: Path) -> Iterator[_Sigterm]:
    """SIGTERM raises BuildTerminated while the block runs. Only in the main thread and only
    where SIGTERM still has its default action (a program with its own handler keeps it);
    elsewhere the handler object is returned but not installed."""
    guard = _Sigterm(out)
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield guard
        return
    signal.signal(signal.SIGTERM, guard)
    try:
        yield guard
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
