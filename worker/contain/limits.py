"""Resource limits and privilege for one contained command.

Limits are plain rlimits (CPU seconds, address space unless a group bounds memory, file
size, open files, processes) per process; the whole speculation's commands together are
bounded by its control group where one can be made (``worker.contain.cgroup``: memory,
live tasks, CPU weight).
Without a group, live tasks are bounded by RLIMIT_NPROC (not enforced for the real root
user) and, where the kernel allows it (Linux >= 6.14), a ``pid_max`` of the command's own
PID namespace, which holds for root too. That cap is a pid *number*: the kernel hands out
pids cyclically and, after the first wrap, from 300 up, so it is set to the limit plus
those 300 reserved numbers: live tasks stay below limit + 300, and any number of
processes may come and go one after another.

Privilege: the command runs with no capabilities in any namespace (bounding set emptied,
ambient set cleared, and the "root is special" rules switched off and locked, so an
exec as uid 0 inside the namespace gains nothing), and with no_new_privs (a set-uid
program gains nothing either).
"""

from __future__ import annotations

import functools
import resource
import signal
from pathlib import Path

from overlay.kernel import libc
from protocol.wire.work import CommandLimits
from worker.shell.runner import ShellResult

# NOROOT, NO_SETUID_FIXUP, KEEP_CAPS and NO_CAP_AMBIENT_RAISE, each with its lock bit.
_SECUREBITS_LOCKED_DOWN = (
    (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5) | (1 << 6) | (1 << 7)
)


class LimitError(OSError):
    """A limit or privilege drop could not be applied."""


def _set(kind: int, value: int) -> None:
    _soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def apply_rlimits(limits: CommandLimits, *, address_space: bool = True) -> None:
    """``address_space``: bound each process's address space by ``memory_bytes``, the only
    memory bound where no control group is. Where the speculation's group bounds memory
    it is left off: the group counts what is used, by every process together, while an
    address-space cap refuses mere reservations, which are not memory: V8 reserves 8 GiB
    or more for each WebAssembly instance (vitest 4 failed to start under the 4 GiB cap:
    "WebAssembly.instantiate(): Out of memory"), sanitizers and some runtimes more."""
    try:
        # CPU: the soft limit sends SIGXCPU, the hard one a second later SIGKILL.
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        if address_space:
            _set(resource.RLIMIT_AS, limits.memory_bytes)
        _set(resource.RLIMIT_FSIZE, limits.file_size_bytes)
        _set(resource.RLIMIT_NOFILE, limits.open_files)
        _set(resource.RLIMIT_NPROC, limits.processes)
        _set(resource.RLIMIT_CORE, 0)
    except (ValueError, OSError) as exc:
        raise LimitError(0, f"setting resource limits failed: {exc}") from exc


RESERVED_PIDS = 300  # after the first wrap the kernel hands out pids from 300 up


def pid_namespace_cap(processes: int) -> int:
    return processes + RESERVED_PIDS + 1


def cap_pid_namespace(processes: int) -> bool:
    """Keep live tasks in this (new) PID namespace below ``processes`` + 300 (see the
    module's note). Needs the namespace's CAP_SYS_ADMIN and Linux >= 6.14; returns False
    where the kernel's pid_max is still global."""
    try:
        with open("/proc/sys/kernel/pid_max", "w") as sysctl:
            sysctl.write(str(pid_namespace_cap(processes)))
    except OSError:
        return False
    return True


@functools.cache
def last_capability() -> int:
    return int(Path("/proc/sys/kernel/cap_last_cap").read_text())


def drop_privileges() -> None:
    """No capabilities from here on, also across exec; no_new_privs."""
    last = last_capability()
    libc.prctl(
        libc.PR_SET_SECUREBITS, _SECUREBITS_LOCKED_DOWN, what="prctl(PR_SET_SECUREBITS)"
    )
    for cap in range(last + 1):
        libc.prctl(libc.PR_CAPBSET_DROP, cap, what=f"dropping capability {cap}")
    libc.prctl(
        libc.PR_CAP_AMBIENT, libc.PR_CAP_AMBIENT_CLEAR_ALL, what="clearing ambient capabilities"
    )
    libc.set_no_new_privs()


# What a command's failure says when a limit stopped it (bash's and libc's own words).
_LIMIT_SIGNS = (
    ("memory", ("Cannot allocate memory", "MemoryError", "memory exhausted", "out of memory")),
    ("processes", ("fork: retry", "fork: Resource temporarily unavailable")),
    ("open_files", ("Too many open files",)),
    ("file_size", ("File too large",)),
    ("tmp_space", ("No space left on device",)),
)


def limit_reached(result: ShellResult) -> str | None:
    """Which limit ended ``result`` (``timeout``, ``cpu_time``, ``file_size``, ``memory``,
    ``processes``, ``open_files``, ``tmp_space``), or None."""
    if result.limit is not None:  # the speculation's control group said so
        return result.limit
    if result.timed_out:
        return "timeout"
    if result.exit_code == -signal.SIGXCPU:
        return "cpu_time"
    if result.exit_code == -signal.SIGXFSZ:
        return "file_size"
    for name, signs in _LIMIT_SIGNS:
        if any(sign in result.stderr for sign in signs):
            return name
    return None
