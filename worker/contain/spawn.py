"""Starting one command inside the containment profile.

From the sandbox helper (``worker.contain.helper``: single-threaded, already in its own
user namespace with the commands' root prepared):

    helper ── clone ──▶ init, pid 1 of new mount, network, IPC, UTS and PID namespaces:
                        new session, the speculation's control group, its mounts and
                        pivot, limits, no privileges, Landlock, seccomp
                          └─ fork ──▶ the command (exec bash)

The init only reaps: it waits for the command and exits as it did (a signal N as 128+N,
which the helper turns back into -N). The kernel ignores default-action signals sent to
a namespace's init, so the command must not be pid 1 itself, or a CPU-limit SIGXCPU would
be lost. Each process dies with its parent (PR_SET_PDEATHSIG), and when the init exits
the kernel kills everything else in its PID namespace, so nothing the command started
outlives it, not even a process that left the session.

A layer that cannot be set up is never skipped: the child reports which one failed on a
status pipe (closed by a successful exec) and the command does not run
(``ContainmentUnavailable``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from overlay.kernel import libc
from protocol.wire.work import CommandLimits
from worker.contain import cgroup, landlock, limits, mounts, seccomp, session
from worker.contain.mounts import View
from worker.shell.runner import ShellResult, check_run_arguments, collect

SETUP_FAILED_EXIT = 126


@dataclass(frozen=True)
class Layers:
    """Which layers a command gets. Production code always uses every layer; tests switch
    single layers off to show that each of the others holds on its own. There is no
    setting or wire field that reaches this."""

    filesystem: bool = True
    network: bool = True
    pid: bool = True
    landlock: bool = True
    seccomp: bool = True
    limits: bool = True
    privileges: bool = True

    def only(self, *names: str) -> Layers:
        """Every layer off except ``names``."""
        return Layers(**{name: name in names for name in self.__dataclass_fields__})


ALL_LAYERS = Layers()


@dataclass(frozen=True)
class Profile:
    view: View
    mount_point: str
    limits: CommandLimits = field(default_factory=CommandLimits)
    layers: Layers = ALL_LAYERS
    # the helper's empty network namespace (``mounts.empty_network_namespace``)
    network_namespace: int | None = None
    # the speculation's control group (``cgroup.open_joiners``): the command joins it first
    group_fds: tuple[int, ...] = ()
    # its pids.max bounds the live tasks; without one, a pid_max per PID namespace does
    pids_by_group: bool = False
    # its memory limit bounds what the commands use; without one, RLIMIT_AS does
    memory_by_group: bool = False
    # a test's stand-in for a machine without this layer (``WorkerSeams.broken_layer``):
    # its set-up fails, so the command does not run
    broken_layer: str | None = None


class ContainmentUnavailable(RuntimeError):
    """A layer of the profile could not be set up, so the command was not run."""

    def __init__(self, layer: str, detail: str) -> None:
        super().__init__(f"the {layer} layer of the sandbox is unavailable: {detail}")
        self.layer = layer
        self.detail = detail


def prepare() -> None:
    """Everything a command's child would otherwise compute after the fork (where every
    Python object it touches costs a copied page): done once, in the helper."""
    seccomp.prepare()
    limits.last_capability()
    landlock.abi()


def _die_with_parent() -> None:
    with contextlib.suppress(OSError):  # cannot fail for a valid signal
        libc.prctl(libc.PR_SET_PDEATHSIG, signal.SIGKILL)


def _readable(profile: Profile) -> list[Path]:
    paths = [Path(p) for p in mounts.SYSTEM_DIRS]
    paths += [Path(f"/dev/{name}") for name in mounts.DEVICES]
    paths += [Path("/proc"), Path(profile.view.project)]
    paths += [Path(p) for p in profile.view.toolchains]  # read and execute, never write
    if not profile.layers.filesystem and profile.view.overlay_dir is not None:
        paths.append(Path(profile.view.overlay_dir))
    return paths


def _writable(profile: Profile) -> list[Path]:
    if profile.layers.filesystem:
        paths = [Path("/tmp"), Path("/dev/null"), Path("/dev/shm")]
        if profile.view.session_home is not None:
            paths.append(Path(session.HOME))
    else:
        paths = [Path(profile.view.scratch), Path("/dev/null")]
    # The project is writable only through the capture view's overlayfs: with the file
    # system layer off, the same path is the real tree and stays read-only.
    if profile.view.writable and mounts.is_overlayfs(profile.view.project):
        paths.append(Path(profile.view.project))
    return paths


def _check_broken(profile: Profile, stage: str) -> None:
    if stage == profile.broken_layer:
        raise OSError(f"{stage} made unavailable by a test (WorkerSeams.broken_layer)")


def _enter_command(profile: Profile, report: int) -> None:
    """In the command's process, before exec. Reports the failing layer and exits."""
    layers = profile.layers
    stage = "filesystem"
    try:
        _check_broken(profile, stage)
        if layers.filesystem:
            mounts.enter_root(
                profile.view, profile.mount_point, profile.limits.tmp_bytes, proc=layers.pid
            )
        stage = "limits"
        _check_broken(profile, stage)
        if layers.limits:
            limits.apply_rlimits(profile.limits, address_space=not profile.memory_by_group)
            if layers.pid and not profile.pids_by_group:
                limits.cap_pid_namespace(profile.limits.processes)
        stage = "privileges"
        _check_broken(profile, stage)
        if layers.privileges:
            limits.drop_privileges()
        stage = "landlock"
        _check_broken(profile, stage)
        if layers.landlock:
            landlock.restrict(_readable(profile), _writable(profile))
        stage = "seccomp"
        _check_broken(profile, stage)
        if layers.seccomp:
            seccomp.install()
    except Exception as exc:
        _fail(report, stage, exc)


def _fail(report: int, layer: str, exc: BaseException) -> NoReturn:
    with contextlib.suppress(OSError):
        os.write(report, f"{layer}\t{exc}".encode(errors="replace"))
    os._exit(SETUP_FAILED_EXIT)


def _clone_into_namespaces(layers: Layers) -> int:
    """fork(2) that puts the child straight into new mount, IPC and UTS namespaces (and a
    PID one), the child being pid 1 of its PID namespace. Like ``os.fork``
    it returns 0 in the child; the child only runs this module's setup code and then
    forks or execs (Python's own after-fork hooks are not needed for that in a
    single-threaded process)."""
    flags = libc.CLONE_NEWNS | libc.CLONE_NEWIPC | libc.CLONE_NEWUTS | signal.SIGCHLD
    if layers.pid:
        flags |= libc.CLONE_NEWPID
    try:
        return libc.clone(flags)
    except OSError as exc:
        raise ContainmentUnavailable("namespaces", str(exc.strerror)) from None


def _child(
    argv: list[str], env: Mapping[str, str], cwd: str, profile: Profile, out: int, err: int,
    report: int,
) -> NoReturn:
    """The command's process after the clone, until exec. Never returns."""
    try:
        os.setsid()
        _die_with_parent()
        _forget_command_line()
        if profile.layers.limits and profile.group_fds:
            try:  # first, so everything it does and starts counts against the group
                cgroup.join(list(profile.group_fds))
            except OSError as exc:
                _fail(report, "limits", exc)
        if profile.layers.network:
            try:
                if profile.network_namespace is None:
                    raise OSError("the helper has no network namespace")
                mounts.join_network_namespace(profile.network_namespace)
            except OSError as exc:
                _fail(report, "network", exc)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.closerange(3, report)
        os.closerange(report + 1, 1 << 16)
        _enter_command(profile, report)
        os.chdir(cwd)
        if profile.layers.pid:
            _become_init(report)
        os.execve(argv[0], argv, dict(env))
    except BaseException as exc:  # exec failed, or a bug: say so, never run uncontained
        _fail(report, "exec", exc)


def _forget_command_line() -> None:
    """Blank the memory that ``/proc/<pid>/cmdline`` (and ``environ``) read for this
    process. It was forked from the service without an exec, so it still holds the
    service's command line (``serve --base-url https://user:password@host/v1``...), and as
    the namespace's init it is the one process outside its own tree that a command can
    read there. The command itself execs and gets its own."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/stat", "rb") as status:
            fields = status.read().rpartition(b")")[2].split()
        # fields[0] is the stat file's field 3: arg_start..env_end are its fields 48-51.
        arg_start, arg_end, env_start, env_end = (int(fields[n - 3]) for n in (48, 49, 50, 51))
        for low, high in ((arg_start, arg_end), (env_start, env_end)):
            if 0 < low < high:
                ctypes.memset(low, 0, high - low)


def _become_init(report: int) -> None:
    """As pid 1 of the namespace, fork the command and stay behind as its init: the
    kernel ignores default-action signals sent to a namespace's init (a CPU-limit
    SIGXCPU, a SIGPIPE), so the command itself must not be pid 1. Returns in the child."""
    child = os.fork()
    if child == 0:
        return
    os.close(report)
    os.dup2(0, 1)  # fd 0 is /dev/null: the pipes belong to the command
    os.dup2(0, 2)
    while True:  # reap orphans until the command ends; then the namespace dies with us
        try:
            pid, status = os.wait()
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(SETUP_FAILED_EXIT)
        if pid == child:
            break
    if os.WIFSIGNALED(status):
        # A signal cannot be re-raised on a namespace's init; report it the way a shell
        # would, and the reaper below turns 128+N back into -N.
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _read_report(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _reaper(pid: int, *, through_init: bool) -> Callable[[], int]:
    """Reap the command's process. Through our init (``_become_init``) a command killed
    by signal N arrives as exit code 128+N, as a shell would report it: made -N again."""

    def reap() -> int:
        while True:
            try:
                _pid, status = os.waitpid(pid, 0)
            except InterruptedError:
                continue
            except ChildProcessError:
                return -signal.SIGKILL
            code = os.waitstatus_to_exitcode(status)
            if through_init and 128 < code < 128 + signal.NSIG:
                return 128 - code
            return code

    return reap


def run_contained(
    argv: list[str],
    cwd: str,
    env: Mapping[str, str],
    profile: Profile,
    timeout_s: float,
    output_cap: int,
) -> ShellResult:
    """Run ``argv`` (an absolute program path first) in ``cwd`` inside ``profile``.

    Single-threaded callers only (it forks and runs Python in the child). Raises
    ``ContainmentUnavailable`` when a layer could not be set up (nothing ran)."""
    check_run_arguments(timeout_s, output_cap)
    start = time.monotonic()
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    report_r, report_w = os.pipe2(os.O_CLOEXEC)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = _clone_into_namespaces(profile.layers)
    except BaseException:
        for fd in (out_r, out_w, err_r, err_w, report_r, report_w):
            os.close(fd)
        raise
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        os.close(report_r)
        _child(argv, env, cwd, profile, out_w, err_w, report_w)
    for fd in (out_w, err_w, report_w):
        os.close(fd)
    try:
        failure = _read_report(report_r)
    finally:
        os.close(report_r)
    if failure:
        os.close(out_r)
        os.close(err_r)
        _reaper(pid, through_init=False)()
        layer, _, detail = failure.decode(errors="replace").partition("\t")
        raise ContainmentUnavailable(layer, detail or "unknown error")
    try:
        reap = _reaper(pid, through_init=profile.layers.pid)
        return collect(pid, out_r, err_r, reap, start, timeout_s, output_cap)
    finally:
        os.close(out_r)
        os.close(err_r)
