"""Whole-speculation limits: one control group for all of a speculation's commands.

Per-process rlimits let a command's children each take the full memory and CPU limits;
a control group bounds them together. The sandbox helper (one per worker, so one per
speculation) makes a leaf group the first time it runs a command; every command's
process joins it before anything else (``join``, in the clone's child), so all of them
and everything they start count against one ``memory``, ``pids`` and ``cpu`` limit:

* memory: ``commandMemoryMb`` for the whole tree (the kernel's OOM killer ends a process
  in the group, never outside it);
* pids: ``commandProcesses`` live tasks (processes and threads) at once;
* cpu: a lower weight than the service's own work (only matters when CPUs are busy).

Where a group can be made: cgroup v2 when the controllers are offered there (a group
beside our own, as root or in a delegated user slice); on a hybrid machine whose v2
hierarchy lacks them, the v1 hierarchies that have them (root only). Elsewhere nothing
is made and the status says that only per-process limits hold.

A leaf is named after its helper (``<pid>-<start time>``) under ``specrun-<uid>``. The
helper removes it when it exits; a helper that was killed (an aborted speculation) leaves
an empty one, removed (``sweep``) by the next group made, the next helper's start, the
fork server's exit (the service stopped) or the service's next start.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from protocol.wire.work import CommandLimits

CONTROLLERS = ("memory", "pids", "cpu")
_V2_WEIGHT = 50  # of 100, the default
_V1_SHARES = 512  # of 1024


@dataclass(frozen=True)
class Base:
    """A directory under which speculation groups are made, and what it controls."""

    path: str  # .../specrun-<uid>
    version: int
    controllers: tuple[str, ...]


@dataclass(frozen=True)
class Group:
    """One helper's leaf group (one directory per hierarchy it spans)."""

    dirs: tuple[tuple[str, int, tuple[str, ...]], ...]  # (path, version, controllers)

    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d, _v, _c in self.dirs]


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fstype, super options) of every cgroup file system we can see."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as info:
        for line in info:
            before, _, after = line.partition(" - ")
            fields, rest = before.split(), after.split()
            if len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                found.append((fields[4], rest[0], set(rest[2].split(","))))
    return found


def _own_paths() -> tuple[str | None, dict[str, str]]:
    """Our cgroup v2 path and our v1 path per controller, from /proc/self/cgroup."""
    v2: str | None = None
    v1: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if number == "0" and not controllers:
            v2 = path
        else:
            for name in controllers.split(","):
                v1[name] = path
    return v2, v1


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _writable(path: str) -> bool:
    return os.access(path, os.W_OK | os.X_OK)


@functools.cache
def bases() -> tuple[Base, ...]:
    """Where this process can make groups, covering as many of ``CONTROLLERS`` as it can.
    Empty when it can make none (no delegation, not root): per-process limits only."""
    try:
        mounts = _mounts()
        v2_path, v1_paths = _own_paths()
    except (OSError, ValueError):
        return ()
    found: list[Base] = []
    missing = list(CONTROLLERS)
    v2_mount = next((m for m, kind, _o in mounts if kind == "cgroup2"), None)
    if v2_mount is not None and v2_path is not None:
        own = os.path.normpath(v2_mount + v2_path)
        # A group beside ours: v2 allows no processes in a group that hands controllers
        # down, so ours (with the service in it) cannot be the parent, except the root.
        parent = own if v2_path == "/" else os.path.dirname(own)
        offered = set(_read(os.path.join(parent, "cgroup.controllers")).split())
        have = tuple(c for c in missing if c in offered)
        if have and _writable(parent):
            found.append(Base(os.path.join(parent, f"specrun-{os.geteuid()}"), 2, have))
            missing = [c for c in missing if c not in have]
    for mount, kind, options in mounts:
        have = tuple(c for c in missing if kind == "cgroup" and c in options)
        if not have:
            continue
        own = os.path.normpath(mount + v1_paths.get(have[0], "/"))
        if _writable(own):
            found.append(Base(os.path.join(own, f"specrun-{os.geteuid()}"), 1, have))
            missing = [c for c in missing if c not in have]
    return tuple(found)


def describe() -> str:
    """One line for the status: what bounds a speculation as a whole here."""
    made = bases()
    if not made:
        return (
            "per-process limits only: no control group can be made here (needs root or a "
            "delegated cgroup v2 slice)"
        )
    parts = [f"{', '.join(b.controllers)} (cgroup v{b.version})" for b in made]
    absent = [c for c in CONTROLLERS if not any(c in b.controllers for b in made)]
    tail = f"; no {', '.join(absent)} group here" if absent else ""
    return f"whole-speculation limits: {'; '.join(parts)}{tail}"


def covers(controller: str) -> bool:
    return any(controller in b.controllers for b in bases())


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name: state first, start time at index 19."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def _start_time(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return None if fields is None else fields[19]


def _own_name() -> str:
    pid = os.getpid()
    return f"{pid}-{_start_time(pid)}"


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _prepare_base(base: Base) -> None:
    with contextlib.suppress(FileExistsError):
        os.mkdir(base.path, 0o755)
    if base.version == 2:
        parent = os.path.dirname(base.path)
        enable = " ".join(f"+{c}" for c in base.controllers)
        # The root hands nothing down until asked; elsewhere the parent already does
        # (our own group has them). Writing what is already on is harmless.
        with contextlib.suppress(OSError):
            _write(os.path.join(parent, "cgroup.subtree_control"), enable)
        _write(os.path.join(base.path, "cgroup.subtree_control"), enable)


def _set_limits(
    path: str, version: int, controllers: tuple[str, ...], limits: CommandLimits
) -> None:
    if "memory" in controllers:
        if version == 2:
            _write(f"{path}/memory.max", str(limits.memory_bytes))
            with contextlib.suppress(FileNotFoundError):
                _write(f"{path}/memory.swap.max", "0")
        else:
            _set_v1_memory(path, limits.memory_bytes)
    if "pids" in controllers:
        _write(f"{path}/pids.max", str(limits.processes))
    if "cpu" in controllers:
        if version == 2:
            _write(f"{path}/cpu.weight", str(_V2_WEIGHT))
        else:
            _write(f"{path}/cpu.shares", str(_V1_SHARES))


def _set_v1_memory(path: str, value: int) -> None:
    """v1 keeps memory+swap >= memory at every step: raise the pair swap first, lower it
    memory first."""
    memory, both = f"{path}/memory.limit_in_bytes", f"{path}/memory.memsw.limit_in_bytes"
    if not os.path.exists(both):  # no swap accounting: nothing more to cap
        _write(memory, str(value))
        return
    raising = value > int(_read(memory) or 0)
    for target in (both, memory) if raising else (memory, both):
        _write(target, str(value))


def create(limits: CommandLimits) -> Group | None:
    """This helper's leaf group with ``limits`` set, or None where none can be made.
    Raises OSError when a group should be possible here and could not be made."""
    made = bases()
    if not made:
        return None
    sweep()
    dirs = []
    name = _own_name()
    try:
        for base in made:
            _prepare_base(base)
            leaf = os.path.join(base.path, name)
            with contextlib.suppress(FileExistsError):
                os.mkdir(leaf, 0o755)
            dirs.append((leaf, base.version, base.controllers))
            _set_limits(leaf, base.version, base.controllers, limits)
    except OSError:
        remove(Group(tuple(dirs)))
        raise
    return Group(tuple(dirs))


def update(group: Group, limits: CommandLimits) -> None:
    for path, version, controllers in group.dirs:
        _set_limits(path, version, controllers, limits)


def open_joiners(group: Group) -> list[int]:
    """Descriptors a new process writes ``0`` to in order to join (``join``)."""
    return [os.open(p, os.O_WRONLY | os.O_CLOEXEC) for p in group.procs_files()]


def join(fds: list[int]) -> None:
    """Move the calling process into the group (before it starts anything)."""
    for fd in fds:
        os.write(fd, b"0")


def _events(path: str, version: int, controllers: tuple[str, ...]) -> dict[str, int]:
    counts: dict[str, int] = {}
    if "memory" in controllers:
        name = "memory.events" if version == 2 else "memory.oom_control"
        for line in _read(f"{path}/{name}").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                counts["memory"] = int(value)
    if "pids" in controllers:
        for line in _read(f"{path}/pids.events").splitlines():
            key, _, value = line.partition(" ")
            if key == "max":
                counts["processes"] = int(value)
    return counts


def events(group: Group) -> dict[str, int]:
    """How often each limit was hit so far: ``memory`` (OOM kills) and ``processes``
    (refused forks)."""
    counts: dict[str, int] = {}
    for path, version, controllers in group.dirs:
        counts.update(_events(path, version, controllers))
    return counts


def _members(path: str) -> list[int]:
    return [int(p) for p in _read(f"{path}/cgroup.procs").split()]


def _empty_and_remove(path: str, version: int) -> bool:
    """Kill whatever is left in the group and remove it. False if it stayed."""
    if version == 2:
        with contextlib.suppress(OSError):
            _write(f"{path}/cgroup.kill", "1")
    deadline = time.monotonic() + 2.0
    while True:
        for pid in _members(path):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return False
        time.sleep(0.01)


def remove(group: Group) -> None:
    for path, version, _controllers in group.dirs:
        _empty_and_remove(path, version)


def _leaves(base: Base) -> Iterator[tuple[str, str]]:
    try:
        with os.scandir(base.path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and "-" in entry.name:
                    yield entry.name, entry.path
    except OSError:
        return


def _owner_alive(name: str) -> bool:
    """Whether the helper a group is named after still runs: same pid and start time, and
    not a zombie (a killed helper whose parent died waits for init to reap it, which some
    container inits do late)."""
    pid, _, start = name.partition("-")
    fields = _stat_fields(int(pid)) if pid.isdigit() else None
    return fields is not None and fields[19] == start and fields[0] not in ("Z", "X")


def sweep() -> int:
    """Remove the groups of helpers that are gone (killed with their speculation, or with
    a coordinator). Returns how many were removed."""
    removed = 0
    for base in bases():
        for name, path in _leaves(base):
            if not _owner_alive(name) and _empty_and_remove(path, base.version):
                removed += 1
    return removed
