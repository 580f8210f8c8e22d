"""How many CPU threads llama.cpp gets: a default that stays out of llama.cpp's waiting trap.

llama.cpp's threads meet at a barrier after every operation of every token and spin while they
wait. When one of them loses its core to another process, the others spin until it runs again:
two threads on two cores that another job keeps busy can be ten times slower than one. So,
unless `$LOCALKG_LLM_THREADS` (or `n_threads=`) fixes the number, a model gets

    threads = max(1, min(cpus // users, cpus - busy))

- `cpus`: the CPUs this process may run on (`os.sched_getaffinity`);
- `users`: the models of this process tree that compute at the same time: `batch --workers N`
  tells each worker N (`$LOCALKG_LLM_WORKERS`, which a user running several processes by hand
  may set too);
- `busy`: the CPUs other processes keep busy, rounded to the nearest whole CPU (half a CPU of
  other work costs two threads more than one thread loses): sampled from /proc/stat over
  `PROBE_S` when the model opens, minus this process's own CPU time; `os.getloadavg()` where
  /proc/stat cannot be read.

The LLM measures `busy` again between calls (every `RECHECK_S` seconds at most, from the
/proc/stat counters since the last look, so no waiting), and changes its thread count when the
answer changes: a run that began on a quiet machine steps down when another job starts, and
back up when it ends. A thread count does not change replies (each value is computed by one
thread, whatever the count).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

THREADS_ENV = "LOCALKG_LLM_THREADS"
WORKERS_ENV = "LOCALKG_LLM_WORKERS"
PROBE_S = 0.2  # /proc/stat sample when a model opens
RECHECK_S = 2.0  # at most this often between calls


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


def default_threads(monitor: LoadMonitor | None = None, *, wait_s: float = PROBE_S) -> int:
    """`$LOCALKG_LLM_THREADS`, else the policy (`choose_threads`) on this machine now."""
    override = thread_override()
    if override is not None:
        return override
    monitor = monitor or LoadMonitor()
    return choose_threads(usable_cpus(), monitor.others_busy(wait_s=wait_s), model_users())
