"""``specrun sandbox --verify``: prove the containment profile live on this machine.

A fresh sandbox helper runs one probe command per escape inside the full profile (the
classifier is not asked: these commands are hostile on purpose) against real targets
made for the occasion: a project file, a file in ``$HOME``, a loopback TCP listener, a
unix socket in the specrun runtime directory, this process as a signal target; and one
main-chat command behind its kernel backstop (``worker.contain.backstop``) against a
throw-away git repository. Each
check says what was tried and what happened; any layer missing or any escape that got
through makes the verification fail.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from protocol.wire.work import CommandLimits, WriteGuard
from worker.contain import backstop, cgroup, probe
from worker.contain.helper import Request, SandboxHelper
from worker.contain.limits import pid_namespace_cap
from worker.contain.spawn import ContainmentUnavailable
from worker.shell.runner import ShellResult


@dataclass(frozen=True)
class Check:
    layer: str
    tried: str
    happened: str
    held: bool


class ConnectionRecorder:
    """A listening socket (loopback TCP, or a unix socket at a path) that records every
    connection made to it: the target of an escape that must never arrive."""

    def __init__(self, server: socket.socket, name: str) -> None:
        self.server = server
        self.name = name
        self.connections: list[str] = []
        self._stop = threading.Event()
        server.settimeout(0.1)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @classmethod
    def tcp(cls) -> ConnectionRecorder:
        return cls(socket.create_server(("127.0.0.1", 0)), "tcp")

    @classmethod
    def unix(cls, path: Path) -> ConnectionRecorder:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        server.listen(8)
        return cls(server, "unix socket")

    @property
    def port(self) -> int:
        return int(self.server.getsockname()[1])

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            self.connections.append(self.name)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.server.close()


class _Targets:
    """Things an escape would touch, made for the verification and removed after it."""

    def __init__(self, runtime_dir: Path) -> None:
        token = secrets.token_hex(4)
        self.base = Path(tempfile.mkdtemp(prefix="specrun-verify-"))
        self.project = self.base / "project"
        self.project.mkdir()
        self.file = self.project / "file.txt"
        self.file.write_text("original\n")
        self.home_secret = Path.home() / f".specrun-verify-{token}"
        self.home_secret.write_text(f"secret-{token}\n")
        self.home_planted = Path.home() / f".specrun-verify-planted-{token}"
        self.tmp_planted = Path(tempfile.gettempdir()) / f"specrun-verify-planted-{token}"
        runtime_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.unix_path = runtime_dir / f"verify-{token}.sock"
        self.unix = ConnectionRecorder.unix(self.unix_path)
        self.tcp = ConnectionRecorder.tcp()
        self.port = self.tcp.port

    def backstop(self) -> tuple[bool, str]:
        """A main-chat command behind the backstop, in a throw-away git repository, that
        writes a hook through a path it computes and adds ``core.hooksPath`` to git's
        config: the hook must not appear, the config must be as it was."""
        repo = self.base / "repo"
        made = subprocess.run(["git", "init", "-q", str(repo)], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, check=False)
        if made.returncode != 0:
            return False, f"git init failed: {made.stderr.strip() or made.returncode}"
        hooks = repo / ".git" / "hooks"
        hooks.mkdir(exist_ok=True)
        config = repo / ".git" / "config"
        before = config.read_bytes()
        run = backstop.guarded_runner(WriteGuard(os.path.realpath(repo)))
        result = run(f'd=.git/hooks; echo "touch {self.base}/ran" > "$d/pre-commit"; '
                     f"c=config; git $c core.hooksPath {self.base}", repo, 20.0, 8192)
        hook = (hooks / "pre-commit").exists()
        restored = config.read_bytes() == before
        escaped = [what for what, got_through in (
            ("the hook was written", hook),
            ("core.hooksPath stayed in git's config", not restored)) if got_through]
        if escaped:
            return False, "; ".join(escaped)
        put_back = any("put" in note and "back" in note for note in result.notes)
        return True, f"{_first_error(result)}; git's config " + (
            "put back" if put_back else "unchanged")

    @property
    def connections(self) -> list[str]:
        return self.tcp.connections + self.unix.connections

    def close(self) -> None:
        self.tcp.close()
        self.unix.close()
        for path in (self.home_secret, self.home_planted, self.tmp_planted, self.unix_path):
            with contextlib.suppress(OSError):
                path.unlink()
        shutil.rmtree(self.base, ignore_errors=True)


@contextlib.contextmanager
def _catching_usr1(received: list[int]) -> Iterator[None]:
    previous = signal.signal(signal.SIGUSR1, lambda sig, _frame: received.append(sig))
    try:
        yield
    finally:
        signal.signal(signal.SIGUSR1, previous)


def _metadata(path: Path) -> tuple[int, int, bytes]:
    info = path.stat()
    return stat.S_IMODE(info.st_mode), info.st_mtime_ns, path.read_bytes()


def verify(
    runtime_dir: Path, on_check: Callable[[Check], None] | None = None
) -> tuple[list[Check], bool]:
    """Run every probe; returns the checks and whether all layers held. ``on_check``
    hears each check as it ends (the probes take seconds: a person sees them come)."""
    helper = SandboxHelper.start()
    targets = _Targets(runtime_dir)
    checks: list[Check] = []
    try:
        for layer in helper.layers:
            if not layer.active:
                checks.append(Check(layer.name, "set up the layer", layer.detail, False))
                if on_check is not None:
                    on_check(checks[-1])
        if all(layer.active for layer in probe.of_speculations(helper.layers)):
            checks += _probes(helper, targets, on_check)
        if backstop.unavailable() is None:
            checks.append(_check("chat_backstop", BACKSTOP_TRIED, targets.backstop))
            if on_check is not None:
                on_check(checks[-1])
    finally:
        helper.close()
        targets.close()
    return checks, all(check.held for check in checks)


Attempt = Callable[[], tuple[bool, str]]  # runs one escape: (held, what happened)
BACKSTOP_TRIED = "a main-chat command writes a git hook and sets core.hooksPath"


def _probes(
    helper: SandboxHelper, t: _Targets, on_check: Callable[[Check], None] | None = None
) -> list[Check]:
    p = _Prober(helper, t)
    attempts: list[tuple[str, str, Attempt]] = [
        ("filesystem", "chmod, touch and append to a project file", p.metadata_write),
        ("filesystem", f"read {t.home_secret.name} in $HOME", p.home_read),
        ("filesystem", "write a file in $HOME and in the host's /tmp", p.home_and_tmp_write),
        ("network", f"TCP connect to 127.0.0.1:{t.port}", p.tcp),
        (
            "network",
            "create a vsock socket (the hypervisor on a VM)",
            lambda: p.socket_family("vsock"),
        ),
        ("network", "create raw and packet sockets", lambda: p.socket_family("raw packet")),
        ("ipc_signals", "connect to a unix socket in the runtime directory", p.unix),
        ("ipc_signals", "SIGUSR1 to the verifying process", p.signals),
        ("limits", "busy loop with a 1 s CPU limit", p.cpu),
        ("limits", "write 4 MB with a 1 MB file size limit", p.file_size),
        (
            "limits",
            "400 processes one after another, then 4 at once, then 400 at once, "
            "with a limit of 8",
            p.processes,
        ),
        ("privileges", "read the capability sets", p.privileges),
    ]
    done: list[Check] = []
    for layer, tried, attempt in attempts:
        done.append(_check(layer, tried, attempt))
        if on_check is not None:
            on_check(done[-1])
    return done


def _check(layer: str, tried: str, attempt: Attempt) -> Check:
    try:
        held, happened = attempt()
    except ContainmentUnavailable as exc:
        held, happened = False, str(exc)
    return Check(layer, tried, happened, held)


class _Prober:
    """The escape attempts, each one command in the full profile against ``t``'s targets."""

    def __init__(self, helper: SandboxHelper, t: _Targets) -> None:
        self.helper = helper
        self.t = t

    def run(self, command: str, limits: CommandLimits | None = None) -> ShellResult:
        request = Request(
            command=command,
            cwd=str(self.t.project),
            project=str(self.t.project),
            timeout_s=20.0,
            output_cap=8192,
            mode="verify",
            limits=limits or CommandLimits(),
        )
        return self.helper.run(request)

    def metadata_write(self) -> tuple[bool, str]:
        file = self.t.file
        before = _metadata(file)
        result = self.run(f"chmod 600 {file}; touch -d 2001-01-01 {file}; echo x >> {file}")
        held = _metadata(file) == before
        return held, _first_error(result) if held else "the project file changed"

    def home_read(self) -> tuple[bool, str]:
        result = self.run(f"cat {self.t.home_secret}")
        held = "secret-" not in result.stdout
        return held, _first_error(result) if held else "the file was read"

    def home_and_tmp_write(self) -> tuple[bool, str]:
        t = self.t
        result = self.run(f"echo x > {t.home_planted}; echo x > {t.tmp_planted}")
        held = not t.home_planted.exists() and not t.tmp_planted.exists()
        return held, _first_error(result) if held else "a file appeared outside"

    def tcp(self) -> tuple[bool, str]:
        result = self.run(f"echo x > /dev/tcp/127.0.0.1/{self.t.port}")
        time.sleep(0.2)
        held = "tcp" not in self.t.connections
        return held, _first_error(result) if held else "the listener was reached"

    def unix(self) -> tuple[bool, str]:
        code = f"import socket; socket.socket(socket.AF_UNIX).connect('{self.t.unix_path}')"
        result = self.run(f'python3 -c "{code}" 2>&1 | tail -n 1')
        time.sleep(0.2)
        held = "unix socket" not in self.t.connections
        detail = result.stdout.strip() or _first_error(result)
        return held, detail if held else "the socket was reached"

    def socket_family(self, families: str) -> tuple[bool, str]:
        result = self.run(f'python3 -c "{SOCKETS}" {families}')
        lines = result.stdout.strip().splitlines()
        held = result.exit_code == 0 and len(lines) == len(families.split()) and all(
            "refused" in line for line in lines
        )
        return held, "; ".join(lines) or _first_error(result)

    def signals(self) -> tuple[bool, str]:
        received: list[int] = []
        with _catching_usr1(received):
            result = self.run(f"kill -USR1 {os.getpid()}")
            time.sleep(0.1)
        held = not received
        return held, _first_error(result) if held else "the signal arrived"

    def cpu(self) -> tuple[bool, str]:
        result = self.run("while :; do :; done", CommandLimits(cpu_s=1))
        held = result.exit_code in (-signal.SIGXCPU, -signal.SIGKILL) and not result.timed_out
        return held, f"ended after {result.duration:.1f} s (exit {result.exit_code})"

    def file_size(self) -> tuple[bool, str]:
        limits = CommandLimits(file_size_bytes=1 << 20)
        result = self.run("head -c 4000000 /dev/zero > /tmp/big", limits)
        held = result.exit_code != 0
        return held, f"exit {result.exit_code}" + (f": {_first_error(result)}" if held else "")

    def processes(self) -> tuple[bool, str]:
        limits = CommandLimits(processes=8)
        return process_check(lambda command: self.run(command, limits), limits.processes)

    def privileges(self) -> tuple[bool, str]:
        result = self.run("grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")
        fields = dict(
            line.split(":", 1) for line in result.stdout.strip().splitlines() if ":" in line
        )
        held = int(fields.get("CapEff", "1").strip(), 16) == 0 and fields.get(
            "NoNewPrivs", ""
        ).strip() == "1"
        return held, " ".join(result.stdout.split())


# The process limit must cap live tasks, never pid numbers: 400 children one after
# another (each reaped before the next), then 4 alive at once, must work; then children
# that stay alive until the end are started until a fork is refused (bash would retry a
# refused fork for seconds, so Python forks). Prints one line per step.
PROCESSES = (
    "import os\n"
    "for n in range(400):\n"
    "    try:\n"
    "        pid = os.fork()\n"
    "    except OSError as e:\n"
    "        print('SEQUENTIAL refused after', n, e.strerror); raise SystemExit\n"
    "    if pid == 0: os._exit(0)\n"
    "    os.waitpid(pid, 0)\n"
    "print('SEQUENTIAL 400')\n"
    "r, w = os.pipe()\n"
    "def hold(count):\n"
    "    for n in range(count):\n"
    "        try:\n"
    "            if os.fork() == 0:\n"
    "                os.close(w); os.read(r, 1); os._exit(0)\n"
    "        except OSError as e:\n"
    "            return n, e.strerror\n"
    "    return count, ''\n"
    "started, why = hold(4)\n"
    "print('CONCURRENT', started, why)\n"
    "more, why = hold(400)\n"
    "print('LIMIT refused after', started + more, why)"
)


def process_bound(limit: int) -> tuple[int, str]:
    """How many live tasks a command with the process ``limit`` can have at most here,
    and what enforces it."""
    if cgroup.covers("pids"):
        return limit, "the group's pids.max"
    if os.geteuid() != 0:
        return limit, "RLIMIT_NPROC"
    return pid_namespace_cap(limit) - 1, "the PID namespace's pid_max (limit + 300)"


def process_check(run: Callable[[str], ShellResult], limit: int) -> tuple[bool, str]:
    """Run ``PROCESSES`` through ``run`` (a command with the process ``limit``): it holds
    when 400 sequential processes and then 4 concurrent ones worked, and the concurrent
    ones beyond the bound were refused."""
    result = run(f'python3 -c "{PROCESSES}"')
    lines = dict(
        line.split(" ", 1) for line in result.stdout.strip().splitlines() if " " in line
    )
    bound, by = process_bound(limit)
    sequential = lines.get("SEQUENTIAL", "") == "400"
    concurrent = lines.get("CONCURRENT", "").split(" ", 1)[0] == "4"
    refused = lines.get("LIMIT", "").split()
    count = int(refused[2]) if len(refused) > 2 and refused[2].isdigit() else None
    # the command itself (and its shell) count as live tasks too
    capped = count is not None and count < 400 and count <= bound
    held = sequential and concurrent and capped
    detail = "; ".join(f"{k.lower()} {v}" for k, v in lines.items()) or _first_error(result)
    return held, f"{detail} (bound {bound}: {by})"


# Tries to create each named kind of socket; one line per kind.
SOCKETS = (
    "import socket, sys\n"
    "kinds = {'vsock': (40, 1, 0), 'raw': (2, 3, 1), 'packet': (17, 3, 0)}\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        socket.socket(*kinds[name]).close()\n"
    "        print(name, 'socket created')\n"
    "    except OSError as e:\n"
    "        print(name, 'refused:', e.strerror)"
)


def _first_error(result: ShellResult) -> str:
    for line in result.stderr.splitlines():
        if line.strip():
            return line.strip().split(": ", 1)[-1]
    return f"exit {result.exit_code}"


def main(argv: list[str]) -> int:
    """``python -m worker.contain.verify RUNTIME_DIR [--json] [--layers]``: print one line
    per check (or the layer report only), exit 1 when anything leaked or is missing."""
    import json

    from protocol.wire.endpoints import runtime_base

    as_json = "--json" in argv
    if "--layers" in argv:
        helper = SandboxHelper.start()
        helper.close()
        layers = helper.layers
        ok = all(layer.active for layer in layers)
        if as_json:
            rows = [{"layer": x.name, "active": x.active, "detail": x.detail} for x in layers]
            print(json.dumps({"ok": ok, "layers": rows}))
        else:
            for x in layers:
                print(f"{'active ' if x.active else 'MISSING'}  {x.name:<13} {x.detail}")
        return 0 if ok else 1
    if as_json:
        checks, ok = verify(runtime_base())
        rows = [
            {"layer": c.layer, "tried": c.tried, "happened": c.happened, "held": c.held}
            for c in checks
        ]
        print(json.dumps({"ok": ok, "checks": rows}))
        return 0 if ok else 1

    def say(c: Check) -> None:  # each line as its escape was tried, not all at the end
        mark = "held " if c.held else "LEAK "
        print(f"{mark} {c.layer:<13} {c.tried}: {c.happened}", flush=True)

    print("Trying each escape inside the sandbox, one command at a time (a few seconds) …",
          flush=True)
    started = time.monotonic()
    checks, ok = verify(runtime_base(), say)
    took = f" ({len(checks)} checks in {time.monotonic() - started:.1f} s)"
    print(("every layer held" if ok else "the sandbox is NOT complete on this machine") + took)
    return 0 if ok else 1


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
