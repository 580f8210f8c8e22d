"""How many CPU threads llama.cpp gets: a default that stays out of llama.cpp's waiting trap.

llama.cpp's threads meet at a barrier after every operation of every token and spin while they
wait. When one of them loses its core to another process, the others spin until it runs again:
two threads on two cores that another job keeps busy can be ten times slower than one. So,
unless `$LOCALKG_LLM_THREADS` (or `n_threads=`) fixes the number, a model gets

    threads = max(1, min(cpus // users, cpus - busy))

- `cpus`: the CPUs this process may run on (`os.sched_getaffinity`);
- `users`: the models on this machine that compute at the same time: the larger of
  `$LOCALKG_LLM_WORKERS` (`batch --workers N` tells each worker N) and the count in the
  machine's register of active models (`ActiveModels`: every llama.cpp model of every localkg
  process, including Ray actors and batches started by hand side by side, holds a locked file
  there and touches it at each call; a file whose holder died, or untouched for `ACTIVE_S`,
  does not count). Two batches started at the same moment see each other from their first call
  instead of both taking every CPU of a machine that looked idle;
- `busy`: the CPUs other processes keep busy, rounded to the nearest whole CPU (half a CPU of
  other work costs two threads more than one thread loses): sampled from /proc/stat while the
  model loads (at least `PROBE_S`), minus this process's own CPU time; `os.getloadavg()` where
  /proc/stat cannot be read.

The register is read before every call (a directory listing). The LLM measures `busy` again
between calls (every `RECHECK_S` seconds at most, from the
/proc/stat counters since the last look, so no waiting), and changes its thread count when the
answer changes: a run that began on a quiet machine steps down when another job starts, and
back up when it ends. A thread count does not change replies (each value is computed by one
thread, whatever the count).
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

THREADS_ENV = "LOCALKG_LLM_THREADS"
WORKERS_ENV = "LOCALKG_LLM_WORKERS"
REGISTER_ENV = "LOCALKG_LLM_REGISTER"  # the register's folder (default: per user, in /dev/shm or the temp folder)
PROBE_S = 0.2  # /proc/stat sample when a model opens
RECHECK_S = 2.0  # at most this often between calls
ACTIVE_S = 30.0  # a registered model untouched this long is idle (between runs of a notebook)


def choose_threads(cpus: int, busy: float, users: int = 1) -> int:
    """The thread count for one of `users` models on `cpus` CPUs while other processes keep
    `busy` CPUs busy (see the module docstring). Pure: the policy, without measuring."""
    cpus, users = max(1, int(cpus)), max(1, int(users))
    taken = max(0, math.floor(max(0.0, busy) + 0.5 - 1e-9))  # 0.5 -> 0, 0.51 -> 1, 1.4 -> 1
    return max(1, min(cpus // users, cpus - taken))


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_override() -> int | None:
    """`$LOCALKG_LLM_THREADS` as a positive integer, else None (the policy decides)."""
    value = os.environ.get(THREADS_ENV, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def model_users() -> int:
    """`$LOCALKG_LLM_WORKERS`: how many models of this process tree compute at once (1)."""
    value = os.environ.get(WORKERS_ENV, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 1


def register_folder() -> Path:
    """Where the active models of this user on this machine hold their files."""
    configured = os.environ.get(REGISTER_ENV, "").strip()
    if configured:
        return Path(configured)
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    return base / f"localkg-llm-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


class ActiveModels:
    """This machine's register of llama.cpp models in use (see the module docstring).

    `join()` creates `<pid>-<n>` in the folder and holds an exclusive `flock` on it for the
    model's life; `touch()` marks it active; `count()` counts the files that are locked (their
    holder lives: the kernel drops a dead process's locks) and were touched within `ACTIVE_S`,
    and removes the files of dead holders. Without a usable folder every method is a no-op
    and `count()` is 0 (the policy then falls back to `$LOCALKG_LLM_WORKERS` and the load).
    """

    _serial = 0

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or register_folder()
        self._fd: int | None = None
        self.path: Path | None = None

    def join(self) -> None:
        if self._fd is not None:
            return
        ActiveModels._serial += 1
        path = self.folder / f"{os.getpid()}-{ActiveModels._serial}"
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # left by a dead process whose pid came back
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return
        self._fd, self.path = fd, path

    def touch(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.utime(self._fd)

    def leave(self) -> None:
        fd, path, self._fd, self.path = self._fd, self.path, None, None
        if fd is None or path is None:
            return
        with contextlib.suppress(OSError):
            path.unlink()
        with contextlib.suppress(OSError):
            os.close(fd)

    def count(self) -> int:
        """Active models on this machine (this one included when it is active)."""
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return 0
        now, active = time.time(), 0
        for entry in entries:
            if entry.path == str(self.path):
                active += now - entry.stat().st_mtime <= ACTIVE_S
                continue
            try:
                fd = os.open(entry.path, os.O_RDONLY)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:  # locked: its holder lives
                with contextlib.suppress(OSError):
                    active += now - os.fstat(fd).st_mtime <= ACTIVE_S
            else:  # nobody holds it: a process that died without leaving
                with contextlib.suppress(OSError):
                    if os.stat(entry.path).st_ino == os.fstat(fd).st_ino:  # not a new file of that name
                        os.unlink(entry.path)
            finally:
                os.close(fd)
        return active

    def __del__(self) -> None:
        self.leave()


@dataclass
class _Sample:
    wall: float
    busy_s: float  # all CPUs' busy seconds since boot (machine-wide)
    own_s: float  # this process's CPU seconds


def _read_sample() -> _Sample | None:
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 8:
        return None
    # user nice system idle iowait irq softirq [steal ...]: busy is what is neither idle nor
    # waiting for I/O, nor stolen by a hypervisor (not other processes here)
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    ticks = os.sysconf("SC_CLK_TCK") or 100
    own = os.times()
    return _Sample(time.monotonic(), (user + nice + system + irq + softirq) / ticks, own.user + own.system)


class LoadMonitor:
    """How many CPUs other processes keep busy, from the /proc/stat counters between two looks
    (minus this process's own CPU time); the 1-minute load average where /proc/stat is missing."""

    def __init__(self) -> None:
        self._last = _read_sample()

    @property
    def exact(self) -> bool:
        """Whether it reads /proc/stat (else the load average, which counts this process too)."""
        return self._last is not None

    def others_busy(self, *, wait_s: float = 0.0) -> float:
        """Busy CPUs of other processes since the previous look (`wait_s`: look again after
        sleeping this long first, for a measurement right now)."""
        if self._last is None:
            try:
                return max(0.0, os.getloadavg()[0])
            except OSError:
                return 0.0
        if wait_s > 0:
            time.sleep(wait_s)
        now = _read_sample()
        if now is None:
            return 0.0
        last, self._last = self._last, now
        elapsed = now.wall - last.wall
        if elapsed <= 0:
            return 0.0
        machine_cpus = os.cpu_count() or 1
        others = ((now.busy_s - last.busy_s) - (now.own_s - last.own_s)) / elapsed
        # machine-wide busy CPUs, scaled to the CPUs this process may use
        return max(0.0, others) * usable_cpus() / machine_cpus

    def seconds_since_look(self) -> float:
        return time.monotonic() - self._last.wall if self._last is not None else math.inf


class ThreadPolicy:
    """The policy for one model over its life: `start()` before it loads (joins the register),
    `loaded()` after (the load measured while the model loaded), `before_call()` before each call (touches its register
    file, counts the active models, looks at the load again after `RECHECK_S`), `stop()` when
    it closes. Both return the thread count the model should use now."""

    def __init__(self, register: ActiveModels | None = None) -> None:
        self.monitor = LoadMonitor()
        self.register = register or ActiveModels()
        self.busy = 0.0

    def _threads(self) -> int:
        return choose_threads(usable_cpus(), self.busy, max(model_users(), self.register.count()))

    def start(self) -> int:
        """Join the register; the thread count to load the model with (the load is not yet
        measured: `loaded()` corrects it)."""
        self.register.join()
        self.register.touch()
        return self._threads()

    def loaded(self) -> int:
        """The thread count for the first call: the load measured over the model's loading
        (at least `PROBE_S`, so a model that loads faster waits the rest)."""
        self.busy = self.monitor.others_busy(wait_s=max(0.0, PROBE_S - self.monitor.seconds_since_look()))
        return self._threads()

    def before_call(self) -> int:
        self.register.touch()
        if self.monitor.exact and self.monitor.seconds_since_look() >= RECHECK_S:
            self.busy = self.monitor.others_busy()
        return self._threads()

    def stop(self) -> None:
        self.register.leave()


def default_threads(monitor: LoadMonitor | None = None, *, wait_s: float = PROBE_S) -> int:
    """`$LOCALKG_LLM_THREADS`, else the policy (`choose_threads`) on this machine now."""
    override = thread_override()
    if override is not None:
        return override
    monitor = monitor or LoadMonitor()
    return choose_threads(usable_cpus(), monitor.others_busy(wait_s=wait_s), model_users())
