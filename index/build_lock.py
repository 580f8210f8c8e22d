"""One build per index (a lock file beside it that names its holder), and the cleanup of what
killed builds left beside an index (temp folders, lock files).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

from ingest.base.errors import IndexError_


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
