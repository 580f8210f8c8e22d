"""Make the calling process unable to open a socket, for good (Linux seccomp, x86_64 / aarch64).

`forbid_network()` installs a seccomp filter on every thread of the process (and, by the kernel's
rules, on every thread and child it will ever start; it can never be removed):
- `socket()` kills the process with SIGSYS. Every network request starts with a socket: Oxigraph's
  HTTP client (SERVICE), DNS lookups, any library. Killing (not failing) means a `SERVICE SILENT`
  cannot swallow the refusal, and the parent sees a distinct signal;
- `io_uring_setup` fails (ENOSYS): io_uring could open and connect sockets without `socket()`;
- `ptrace`, `process_vm_writev` and `pidfd_getfd` fail (EPERM): no borrowing a socket or making
  another process open one;
- a system call of another ABI (i386, x32) kills the process, so no other numbering slips past.
The process starts with no socket to inherit (the sandbox passes only pipes).
"""

from __future__ import annotations

import ctypes
import errno
import platform
import sys
from pathlib import Path

_ARCHES = {  # machine: (AUDIT_ARCH, {name: syscall number}, seccomp's own number)
    "x86_64": (0xC000003E, {"socket": 41, "io_uring_setup": 425, "ptrace": 101,
                            "process_vm_writev": 311, "pidfd_getfd": 438}, 317),
    "aarch64": (0xC00000B7, {"socket": 198, "io_uring_setup": 425, "ptrace": 117,
                             "process_vm_writev": 271, "pidfd_getfd": 438}, 277),
}
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000
_ALLOW = 0x7FFF0000
_X32_BIT = 0x40000000
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1


class NetworkSandboxUnavailable(OSError):
    """This system cannot forbid sockets (not Linux, another CPU, or seccomp refused)."""


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def _program(arch: int, numbers: dict[str, int]) -> list[tuple[int, int, int, int]]:
    """The BPF program: (code, jump-if-true, jump-if-false, constant) rows."""
    denied = [(numbers["socket"], _KILL_PROCESS),
              (numbers["io_uring_setup"], _ERRNO | errno.ENOSYS),
              *((numbers[name], _ERRNO | errno.EPERM)
                for name in ("ptrace", "process_vm_writev", "pidfd_getfd"))]
    rows = [(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
            (_JEQ_K, 1, 0, arch), (_RET_K, 0, 0, _KILL_PROCESS),
            (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
            (_JGE_K, 0, 1, _X32_BIT), (_RET_K, 0, 0, _KILL_PROCESS)]
    for number, action in denied:
        rows += [(_JEQ_K, 0, 1, number), (_RET_K, 0, 0, action)]
    return [*rows, (_RET_K, 0, 0, _ALLOW)]


def network_forbidden() -> bool:
    """True when this process runs under a seccomp filter (as `forbid_network` leaves it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Seccomp:"):
            return line.split()[1] == "2"
    return False


def forbid_network() -> None:
    """Install the filter (see the module docstring); NetworkSandboxUnavailable when it cannot
    be installed, so that the caller refuses to go on instead of running unprotected."""
    machine = platform.machine()
    if not sys.platform.startswith("linux") or machine not in _ARCHES:
        raise NetworkSandboxUnavailable(f"no seccomp sandbox for {sys.platform}/{machine} "
                                        "(Linux on x86_64 or aarch64 is needed)")
    arch, numbers, seccomp_nr = _ARCHES[machine]
    rows = _program(arch, numbers)
    table = (_Filter * len(rows))(*(_Filter(*row) for row in rows))
    program = _Program(len(rows), table)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise NetworkSandboxUnavailable(f"prctl(NO_NEW_PRIVS) failed: {errno.errorcode.get(ctypes.get_errno())}")
    done = libc.syscall(ctypes.c_long(seccomp_nr), ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
                        ctypes.c_long(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(program))
    if done != 0 or not network_forbidden():
        raise NetworkSandboxUnavailable(f"seccomp refused the filter: {errno.errorcode.get(ctypes.get_errno())}")
