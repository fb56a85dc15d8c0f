"""Running shell commands without leaking processes.

Both entry points run ``bash -c`` in a new session (its own process group), with stdin from
``/dev/null``, capture stdout and stderr up to a cap each, and always finish by sending SIGKILL to
the whole process group and reaping the shell. The group is killed while the shell is still
unreaped, so its process-group id cannot have been reused by an unrelated process.

* :func:`run_read_only` is for commands :func:`~worker.shell.classifier.classify` proved read-only
  (it checks again and refuses others). The environment is built from a small allow list —
  ``PATH`` fixed to system directories, ``HOME``, ``LANG``/``LC_ALL``, ``TERM=dumb`` — so
  ``PAGER``, ``GIT_*``, ``LESSOPEN``, ``LD_PRELOAD``, ``BASH_ENV`` and the like never reach it.
  ``git`` is a shell function (imported through ``BASH_FUNC_git%%``) that adds
  ``-c core.fsmonitor=false --no-pager --no-optional-locks`` and a few more neutralising
  options (see :data:`GIT_WRAPPER_OPTIONS`).
* :func:`run_shell` is the main chat's full shell (after the user said yes): same mechanics, the
  caller's environment.

Background processes the command leaves behind may keep writing for
:data:`AFTER_EXIT_GRACE_S` after the shell exits; then the group is killed. A process that moves
itself to another session (``setsid``) escapes the group kill; the read-only classifier never
allows one to be started.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from worker.shell.classifier import ShellVerdict, classify
from worker.shell.git_config import (
    HARDENED_GIT_ENV,
    HARDENED_GIT_OPTIONS,
    HARDENED_SUBCOMMAND_OPTIONS,
)

READ_ONLY_PATH = "/usr/local/bin:/usr/bin:/bin"
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_OUTPUT_CAP = 64 * 1024
AFTER_EXIT_GRACE_S = 1.0
# Options every read-only git call gets (``worker.shell.git_config``: no system or global
# config, no fsmonitor, hooks, pager, network), plus the default signature programs instead
# of configured ones.
GIT_WRAPPER_OPTIONS = (
    *HARDENED_GIT_OPTIONS,
    "-c", "gpg.program=gpg",
    "-c", "gpg.ssh.program=ssh-keygen",
    "-c", "gpg.x509.program=gpgsm",
    "--no-optional-locks",
)


def _subcommand_case() -> str:
    arms = [
        f"{name}) __fix=({' '.join(options)});;"
        for name, options in sorted(HARDENED_SUBCOMMAND_OPTIONS.items())
    ]
    return 'case "${1-}" in ' + " ".join(arms) + " esac; "


# A bash function (exported to the shell as BASH_FUNC_git%%). It keeps git's global options in
# front, and gives diff/log/show --no-ext-diff --no-textconv and blame/grep --no-textconv, so
# that external diff drivers and textconv programs from git config are not run.
_GIT_FUNCTION = (
    "() { local -a __pre=() __fix=(); "
    'while [ "$#" -gt 0 ]; do case "$1" in '
    '-C) __pre+=("$1" "${2-}"); shift; [ "$#" -gt 0 ] && shift;; '
    '-*) __pre+=("$1"); shift;; '
    "*) break;; esac; done; "
    + _subcommand_case()
    + 'if [ "$#" -gt 0 ]; then command git ' + " ".join(GIT_WRAPPER_OPTIONS)
    + ' "${__pre[@]}" "$1" "${__fix[@]}" "${@:2}"; '
    "else command git " + " ".join(GIT_WRAPPER_OPTIONS) + ' "${__pre[@]}"; fi; }'
)
_READ_CHUNK = 65536


@dataclass(frozen=True)
class ShellResult:
    """What a shell run produced. ``exit_code`` is negative (-signal) when it was killed."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    duration: float
    # lines about where it ran, shown after its output (``worker.contain.captured_env``)
    notes: tuple[str, ...] = ()
    # a whole-speculation limit (control group) the command's processes ran into:
    # ``memory`` (the OOM killer ended one) or ``processes`` (a fork was refused)
    limit: str | None = None


class ShellNotReadOnlyError(ValueError):
    """:func:`run_read_only` was given a command that is not proven read-only."""

    def __init__(self, verdict: ShellVerdict) -> None:
        super().__init__(f"command is not read-only ({verdict.reason})")
        self.verdict = verdict


def read_only_environment() -> dict[str, str]:
    """The whole environment of a read-only command (nothing inherited but ``HOME``)."""
    home = os.environ.get("HOME") or "/"
    return {
        "PATH": READ_ONLY_PATH,
        "HOME": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "BASH_FUNC_git%%": _GIT_FUNCTION,
        **HARDENED_GIT_ENV,
    }


def _bash(path: str | None) -> str:
    found = shutil.which("bash", path=path)
    if found is None:
        raise FileNotFoundError("bash not found")
    return found


def run_read_only(
    command: str,
    cwd: str | os.PathLike[str],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    preexec: Callable[[], None] | None = None,
) -> ShellResult:
    """Run a proven read-only ``command`` in ``cwd`` with a clean environment.

    Raises :class:`ShellNotReadOnlyError` if :func:`classify` does not prove it read-only.
    ``preexec`` runs in the child before exec (only from a single-threaded process: the
    speculation's shell helper uses it to give the command its overlay view and sandbox).
    """
    verdict = classify(command)
    if not verdict.read_only:
        raise ShellNotReadOnlyError(verdict)
    argv = [_bash(READ_ONLY_PATH), "--noprofile", "--norc", "-c", command]
    return _execute(argv, cwd, read_only_environment(), timeout_s, output_cap, preexec)


def run_shell(
    command: str,
    cwd: str | os.PathLike[str],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    env: Mapping[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
) -> ShellResult:
    """Run any ``command`` (already approved by the user, or sandboxed by ``preexec``)
    with the same process hygiene."""
    environment = dict(os.environ if env is None else env)
    argv = [_bash(environment.get("PATH")), "-c", command]
    return _execute(argv, cwd, environment, timeout_s, output_cap, preexec)


class _Capture:
    """A stream's output within ``cap`` bytes: its beginning and, when it is longer, its
    end, the middle dropped. A test run prints its summary and its failures last (pytest's
    short summary, ``cargo test``'s result line, ``ctest``'s percentage), so keeping only
    the beginning showed the model a suite's first tests and never whether it passed."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head_cap = cap // 2
        self.head = bytearray()
        self.tail = bytearray()  # the last ``cap - head_cap`` bytes after the head
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        excess = len(self.tail) - (self.cap - self.head_cap)
        if excess > 0:
            del self.tail[:excess]  # bytearray drops a prefix without copying the rest
            self.dropped += excess

    def text(self) -> str:
        if not self.dropped:
            return (self.head + self.tail).decode("utf-8", errors="replace")
        tail = bytes(self.tail)
        cut = tail.find(b"\n", 0, _TAIL_LINE_SEARCH)
        dropped = self.dropped
        if cut >= 0:  # start the end part at a whole line
            dropped += cut + 1
            tail = tail[cut + 1 :]
        head = self.head.decode("utf-8", errors="replace")
        note = f"[output truncated: {dropped} bytes omitted]"
        if head and not head.endswith("\n"):
            head += "\n"
        if not tail:
            return f"{head}{note}"
        return f"{head}{note}\n{tail.decode('utf-8', errors='replace')}"


_TAIL_LINE_SEARCH = 512


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _exited_without_reaping(pid: int) -> bool:
    """Has ``pid`` exited? Leaves it unreaped (so its pid and group id stay reserved)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _execute(
    argv: list[str],
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    timeout_s: float,
    output_cap: int,
    preexec: Callable[[], None] | None = None,
) -> ShellResult:
    check_run_arguments(timeout_s, output_cap)
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=os.fspath(cwd),
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
        preexec_fn=preexec,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        return collect(
            proc.pid, proc.stdout.fileno(), proc.stderr.fileno(), proc.wait, start, timeout_s,
            output_cap,
        )
    finally:
        proc.stdout.close()
        proc.stderr.close()


def check_run_arguments(timeout_s: float, output_cap: int) -> None:
    if timeout_s <= 0:
        raise ValueError("timeout_s must be positive")
    if output_cap < 0:
        raise ValueError("output_cap must not be negative")


def collect(
    pid: int,
    stdout_fd: int,
    stderr_fd: int,
    reap: Callable[[], int],
    start: float,
    timeout_s: float,
    output_cap: int,
) -> ShellResult:
    """Read a started command's two pipes until it exits (plus a short grace for what it
    left running) or its deadline; then kill its process group and reap it with ``reap``,
    which returns the exit code (negative: killed by that signal). The caller closes the
    pipe descriptors."""
    deadline = start + timeout_s
    stdout = _Capture(output_cap)
    stderr = _Capture(output_cap)
    timed_out = False
    pidfd: int | None = None
    selector = selectors.DefaultSelector()
    exit_code = -1
    try:
        selector.register(stdout_fd, selectors.EVENT_READ, stdout)
        selector.register(stderr_fd, selectors.EVENT_READ, stderr)
        try:
            pidfd = os.pidfd_open(pid)
            selector.register(pidfd, selectors.EVENT_READ, None)
        except (AttributeError, OSError):
            pidfd = None
        exited_at: float | None = None
        while True:
            now = time.monotonic()
            if exited_at is None and pidfd is None and _exited_without_reaping(pid):
                exited_at = now
            limit = deadline if exited_at is None else min(deadline, exited_at + AFTER_EXIT_GRACE_S)
            pipes_open = any(key.data is not None for key in selector.get_map().values())
            if exited_at is not None and not pipes_open:
                break
            if now >= limit:
                timed_out = exited_at is None
                break
            wait = limit - now if pidfd is not None else min(limit - now, 0.05)
            for key, _events in selector.select(timeout=wait):
                if key.data is None:  # the pidfd: the shell exited
                    selector.unregister(key.fd)
                    exited_at = time.monotonic()
                    continue
                data = os.read(key.fd, _READ_CHUNK)
                if data:
                    key.data.feed(data)
                else:
                    selector.unregister(key.fd)
    finally:
        _kill_group(pid)
        exit_code = reap()
        selector.close()
        if pidfd is not None:
            os.close(pidfd)
    return ShellResult(
        exit_code=exit_code,
        stdout=stdout.text(),
        stderr=stderr.text(),
        timed_out=timed_out,
        truncated=bool(stdout.dropped or stderr.dropped),
        duration=time.monotonic() - start,
    )
