"""Each layer of the containment profile holds on its own (design §11).

A real sandbox helper (fresh interpreter) runs hostile commands with the classifier
bypassed (a helper the test builds with ``WorkerSeams(bypass_classifier=True)``) and with
every layer but the one under test switched off, so a pass shows that layer alone stopped
the escape. The last tests run the whole profile against the whole battery.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from protocol.wire.work import CommandLimits
from tests.security.conftest import layers_for, run_in, start_bypassed_helper
from tests.support import containment_unavailable, needs_containment
from worker.contain.helper import SandboxHelper
from worker.contain.landlock import abi
from worker.contain.spawn import ALL_LAYERS, Layers
from worker.contain.verify import ConnectionRecorder, process_bound, process_check
from worker.shell.runner import ShellResult

pytestmark = needs_containment("the kernel has no Landlock" if abi() < 1 else None)


@pytest.fixture(scope="module")
def helper() -> Iterator[SandboxHelper]:
    started = start_bypassed_helper()
    yield started
    started.close()


@pytest.fixture()
def world(tmp_path: Path) -> dict[str, Path]:
    """A project, a secret outside it, and a fake service runtime dir with a socket."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("print('hi')\n")
    os.chmod(project / "src" / "app.py", 0o644)
    (project / ".specrun").mkdir()
    (project / ".specrun" / "settings.json").write_text('{"approvalMode": "default"}\n')
    home = tmp_path / "home"
    home.mkdir()
    (home / "id_rsa").write_text("SECRET-KEY-MATERIAL\n")
    return {"project": project, "home": home, "tmp": tmp_path}


def run(
    helper: SandboxHelper,
    project: Path,
    command: str,
    layers: Layers = ALL_LAYERS,
    limits: CommandLimits | None = None,
    timeout_s: float = 20.0,
) -> ShellResult:
    return run_in(helper, project, command, layers=layers, limits=limits, timeout_s=timeout_s)


def metadata(path: Path) -> tuple[int, int, int, bytes]:
    info = path.stat()
    return (stat.S_IMODE(info.st_mode), info.st_mtime_ns, info.st_size, path.read_bytes())


# --- file system -----------------------------------------------------------------------------


FS_ATTACKS = [
    "chmod 777 src/app.py",
    "touch -d 2001-01-01 src/app.py",
    "echo evil >> src/app.py",
    "rm -f src/app.py",
    "mv src/app.py src/moved.py",
    "ln -s /etc/passwd src/link",
    "mkdir src/newdir",
    "echo x > src/new.py",
]


@pytest.mark.parametrize("attack", FS_ATTACKS)
@pytest.mark.parametrize("only", ["filesystem", "all"])
def test_the_real_tree_is_untouched_contents_and_metadata(
    helper: SandboxHelper, world: dict[str, Path], attack: str, only: str
) -> None:
    project = world["project"]
    layers = layers_for(only)
    before = metadata(project / "src" / "app.py")
    names = sorted(p.name for p in (project / "src").iterdir())
    result = run(helper, project, attack, layers)
    assert result.exit_code != 0, result
    assert "Read-only file system" in result.stderr, result.stderr
    assert metadata(project / "src" / "app.py") == before
    assert sorted(p.name for p in (project / "src").iterdir()) == names


@pytest.mark.parametrize("only", ["landlock", "filesystem"])
def test_contents_outside_the_project_cannot_be_written(
    helper: SandboxHelper, world: dict[str, Path], only: str
) -> None:
    """$HOME, the host's /tmp and the project: no layer alone lets a write through."""
    project, home, tmp = world["project"], world["home"], world["tmp"]
    command = (
        f"echo pwned > {home}/planted; echo pwned > {tmp}/planted; "
        f"echo pwned > /tmp/specrun-host-planted; echo pwned > src/app.py; true"
    )
    run(helper, project, command, ALL_LAYERS.only(only))
    assert not (home / "planted").exists()
    assert not (tmp / "planted").exists()
    assert not Path("/tmp/specrun-host-planted").exists()
    assert (project / "src" / "app.py").read_text() == "print('hi')\n"


@pytest.mark.parametrize("only", ["landlock", "filesystem"])
def test_nothing_outside_the_project_is_readable(
    helper: SandboxHelper, world: dict[str, Path], only: str
) -> None:
    project, home = world["project"], world["home"]
    result = run(helper, project, f"cat {home}/id_rsa; ls {home}", ALL_LAYERS.only(only))
    assert "SECRET-KEY-MATERIAL" not in result.stdout
    assert "id_rsa" not in result.stdout


def test_specrun_state_in_the_project_is_hidden(
    helper: SandboxHelper, world: dict[str, Path]
) -> None:
    result = run(helper, world["project"], "cat .specrun/settings.json; ls -A .specrun")
    assert "approvalMode" not in result.stdout
    assert result.stdout.strip() == ""


def test_the_scratch_tmp_is_private_and_gone_afterwards(
    helper: SandboxHelper, world: dict[str, Path]
) -> None:
    first = run(helper, world["project"], "echo kept > /tmp/note; cat /tmp/note")
    assert first.stdout.strip() == "kept"
    second = run(helper, world["project"], "cat /tmp/note")
    assert second.exit_code != 0  # every command gets a fresh /tmp


# --- network ---------------------------------------------------------------------------------


@pytest.fixture()
def listener() -> Iterator[tuple[int, list[str]]]:
    """A loopback TCP listener that records every connection it gets."""
    recorder = ConnectionRecorder.tcp()
    yield recorder.port, recorder.connections
    recorder.close()


@pytest.mark.parametrize("only", ["network", "landlock", "all"])
def test_no_tcp_connection_leaves(
    helper: SandboxHelper,
    world: dict[str, Path],
    listener: tuple[int, list[str]],
    only: str,
) -> None:
    if only == "landlock" and abi() < 4:
        containment_unavailable("Landlock ABI < 4 has no TCP rules")
    port, seen = listener
    layers = layers_for(only)
    command = (
        f"cat src/app.py > /dev/tcp/127.0.0.1/{port}; "
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)"
        '.sendall(b\'leak\')"'
    )
    run(helper, world["project"], command, layers)
    assert seen == []


# --- IPC and signals -------------------------------------------------------------------------


@pytest.fixture()
def control_socket(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """A unix socket standing for the service's control socket."""
    path = tmp_path / "control.sock"
    recorder = ConnectionRecorder.unix(path)
    yield path, recorder.connections
    recorder.close()


@pytest.mark.parametrize("only", ["seccomp", "filesystem", "all"])
def test_no_specrun_socket_is_reachable(
    helper: SandboxHelper,
    world: dict[str, Path],
    control_socket: tuple[Path, list[str]],
    only: str,
) -> None:
    path, seen = control_socket
    layers = layers_for(only)
    command = (
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); "
        f"s.connect('{path}'); print('CONNECTED')\""
    )
    result = run(helper, world["project"], command, layers)
    assert "CONNECTED" not in result.stdout
    assert seen == []


@pytest.mark.parametrize("only", ["pid", "landlock", "all"])
def test_no_signal_reaches_a_process_outside(
    helper: SandboxHelper, world: dict[str, Path], only: str
) -> None:
    if only == "landlock" and abi() < 6:
        containment_unavailable("Landlock ABI < 6 has no signal scoping")
    received: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda sig, _frame: received.append(sig))
    try:
        layers = layers_for(only)
        targets = f"{os.getpid()} {helper.pid}"
        result = run(
            helper,
            world["project"],
            f"for p in {targets}; do kill -USR1 $p && echo SENT $p; done; true",
            layers,
        )
        signal.sigtimedwait([], 0) if hasattr(signal, "sigtimedwait") else None
        assert "SENT" not in result.stdout or (only == "pid" and received == [])
        assert received == []
    finally:
        signal.signal(signal.SIGUSR1, previous)


# --- resources -------------------------------------------------------------------------------


@pytest.mark.parametrize("only", ["limits", "all"])
def test_cpu_time_is_limited(helper: SandboxHelper, world: dict[str, Path], only: str) -> None:
    """Also with the PID layer on: the command is not its namespace's init, whose
    default-action signals (the limit's SIGXCPU) the kernel would drop."""
    limits = CommandLimits(cpu_s=1)
    layers = layers_for(only)
    result = run(helper, world["project"], "while :; do :; done", layers, limits)
    assert result.exit_code in (-signal.SIGXCPU, -signal.SIGKILL), result
    assert not result.timed_out


def test_file_size_is_limited(helper: SandboxHelper, world: dict[str, Path]) -> None:
    limits = CommandLimits(file_size_bytes=1 << 20)
    result = run(
        helper,
        world["project"],
        "head -c 5000000 /dev/zero > /tmp/big; echo done",
        limits=limits,
    )
    assert result.exit_code == -signal.SIGXFSZ or "File too large" in result.stderr, result


def test_memory_is_limited(helper: SandboxHelper, world: dict[str, Path]) -> None:
    limits = CommandLimits(memory_bytes=256 << 20)
    result = run(
        helper,
        world["project"],
        "python3 -c \"b = bytearray(1 << 30); print('ALLOCATED')\"",
        ALL_LAYERS.only("limits"),
        limits,
    )
    assert "ALLOCATED" not in result.stdout
    # the speculation's group where one is made (the process is killed), else RLIMIT_AS
    assert "MemoryError" in result.stderr or result.limit == "memory", result


def test_process_count_is_limited(helper: SandboxHelper, world: dict[str, Path]) -> None:
    limits = CommandLimits(processes=8)
    held, detail = process_check(
        lambda command: run(helper, world["project"], command, limits=limits), 8
    )
    assert held, detail


# A fork bomb, bounded only so that a broken cap cannot take the machine down: every
# process forks three times, four levels deep (363 children at most, more than any cap
# the profile sets, the PID namespace's limit + 300 included), each child leaves the
# session and holds its slot. The first process counts on a pipe what forked and what was
# refused; once refused (or grown to the whole tree) it stops itself, for the host to look
# at the bomb while it holds, and goes on at SIGCONT.
BOMB = """
import os, select, signal, sys, time
r, w = os.pipe()
def bomb(depth):
    for _ in range(3):
        try:
            pid = os.fork()
        except OSError as e:
            os.write(w, b'R' + e.strerror.encode() + b'\\\\n')
            return
        if pid == 0:
            os.setsid()
            os.write(w, b'F\\\\n')
            if depth:
                bomb(depth - 1)
            while True:
                signal.pause()
bomb(4)
forked, refused, buf, deadline = 0, [], b'', time.monotonic() + 15
while not refused and forked < 363 and time.monotonic() < deadline:
    if select.select([r], [], [], 0.5)[0]:
        buf += os.read(r, 4096)
        *lines, buf = buf.split(b'\\\\n')
        forked += lines.count(b'F')
        refused += [line[1:].decode() for line in lines if line.startswith(b'R')]
os.kill(os.getpid(), signal.SIGSTOP)
print('FORKED', forked)
print('REFUSED', refused[0] if refused else 'never')
"""


def _bomb_processes(token: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error):
            if token in proc.cmdline():
                found.append(proc)
    return found


def test_a_fork_bomb_is_capped_leaves_the_host_alone_and_ends_with_the_command(
    helper: SandboxHelper, world: dict[str, Path]
) -> None:
    """A real fork bomb: the process cap refuses it, the host can still start processes
    while the bomb holds every slot it got, and every bomb process (each in a session of
    its own) is gone, reaped, when the command ends."""
    limit = 16
    bound, by = process_bound(limit)
    token = f"bomb-{uuid.uuid4().hex}"
    held: dict[str, Any] = {}

    def look_while_it_holds() -> None:
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline:
            procs = _bomb_processes(token)
            stopped = []
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    if p.status() == psutil.STATUS_STOPPED:
                        stopped.append(p)
            if stopped:
                # Listed again now that it holds: the listing above read its process ids
                # before it looked at any status, so it can predate the bomb's last forks.
                held["processes"] = len(_bomb_processes(token))
                held["host_fork"] = subprocess.run(["true"], timeout=10).returncode
                stopped[0].send_signal(signal.SIGCONT)
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=look_while_it_holds)
    watcher.start()
    try:
        result = run(
            helper,
            world["project"],
            f"python3 -c \"{BOMB}\" {token}",
            limits=CommandLimits(processes=limit),
            timeout_s=30,
        )
    finally:
        watcher.join()
    lines = dict(line.split(" ", 1) for line in result.stdout.strip().splitlines())
    assert result.exit_code == 0, (result.stdout, result.stderr)
    forked = int(lines["FORKED"])
    assert lines["REFUSED"] != "never", f"{forked} forks, none refused ({by})"
    # the bomb's first process counts as one of its tasks, and so may the shell
    assert forked >= 1 and forked + 1 <= bound, (forked, bound, by)
    assert held, "the bomb never held: the host did not see it stopped"
    assert 1 < held["processes"] <= bound, (held, bound, lines)
    assert held["host_fork"] == 0
    # Reaped with the command: nothing of it is left, not even a zombie.
    assert _bomb_processes(token) == []
    assert result.duration < 25


# --- privilege -------------------------------------------------------------------------------


@pytest.mark.parametrize("only", ["privileges", "all"])
def test_no_capabilities_and_no_new_privileges(
    helper: SandboxHelper, world: dict[str, Path], only: str
) -> None:
    layers = layers_for(only)
    command = "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status"
    result = run(helper, world["project"], command, layers)
    fields = dict(line.split(":\t") for line in result.stdout.strip().splitlines())
    assert int(fields["CapEff"], 16) == 0
    assert int(fields["CapPrm"], 16) == 0
    assert int(fields["CapBnd"], 16) == 0
    assert fields["NoNewPrivs"].strip() == "1"


def test_mounting_and_new_namespaces_are_refused(
    helper: SandboxHelper, world: dict[str, Path]
) -> None:
    result = run(
        helper,
        world["project"],
        "unshare -rm true && echo UNSHARED; mount -t tmpfs x /tmp && echo MOUNTED; true",
    )
    assert "UNSHARED" not in result.stdout and "MOUNTED" not in result.stdout


# --- honesty ---------------------------------------------------------------------------------


def test_the_layer_report_names_every_layer(helper: SandboxHelper) -> None:
    names = [layer.name for layer in helper.layers]
    assert names == [
        "filesystem",
        "network",
        "ipc_signals",
        "limits",
        "privileges",
        "landlock",
        "seccomp",
        "chat_backstop",
    ]


# --- the attacks are real: with no layer at all, each one gets through ------------------------


NO_LAYERS = ALL_LAYERS.only()


def test_control_without_layers_the_tree_changes(
    helper: SandboxHelper, world: dict[str, Path]
) -> None:
    project = world["project"]
    result = run(helper, project, "chmod 600 src/app.py", NO_LAYERS)
    assert result.exit_code == 0
    assert stat.S_IMODE((project / "src" / "app.py").stat().st_mode) == 0o600


def test_control_without_layers_tcp_and_unix_sockets_connect(
    helper: SandboxHelper,
    world: dict[str, Path],
    listener: tuple[int, list[str]],
    control_socket: tuple[Path, list[str]],
) -> None:
    port, seen = listener
    path, seen_unix = control_socket
    command = (
        f"echo hi > /dev/tcp/127.0.0.1/{port}; "
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); "
        f"s.connect('{path}'); print('CONNECTED')\""
    )
    result = run(helper, world["project"], command, NO_LAYERS)
    assert "CONNECTED" in result.stdout
    assert wait_for(lambda: seen and seen_unix)


def test_control_without_layers_a_signal_arrives(
    helper: SandboxHelper, world: dict[str, Path]
) -> None:
    received: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda sig, _frame: received.append(sig))
    try:
        run(helper, world["project"], f"kill -USR1 {os.getpid()}", NO_LAYERS)
        assert wait_for(lambda: received)
    finally:
        signal.signal(signal.SIGUSR1, previous)


def wait_for(predicate: object, timeout: float = 5.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False
