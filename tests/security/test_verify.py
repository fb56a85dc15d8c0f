"""`specrun sandbox` and `specrun sandbox --verify` through the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support import isolated_env, needs_containment
from worker.contain.landlock import abi

pytestmark = needs_containment(
    "needs Landlock ABI >= 6 for the full profile" if abi() < 6 else None
)


def specrun(*args: str) -> subprocess.CompletedProcess[str]:
    with isolated_env() as env:
        return subprocess.run(
            [sys.executable, "-m", "coordinator", *args],
            env=env.vars,
            capture_output=True,
            text=True,
            timeout=120,
        )


def test_sandbox_lists_every_layer_as_active() -> None:
    proc = specrun("sandbox", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True
    assert [row["layer"] for row in report["layers"]] == [
        "filesystem", "network", "ipc_signals", "limits", "privileges", "landlock", "seccomp",
        "chat_backstop",
    ]
    assert all(row["active"] for row in report["layers"])
    human = specrun("sandbox").stdout.splitlines()
    backstop = next(line for line in human if "chat_backstop" in line)
    assert backstop.startswith("active ")
    assert "hooks" in backstop and "read-only" in backstop


def test_verify_tries_every_escape_and_every_one_holds() -> None:
    proc = specrun("sandbox", "--verify", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, report
    assert report["ok"] is True
    layers = {row["layer"] for row in report["checks"]}
    assert layers == {
        "filesystem", "network", "ipc_signals", "limits", "privileges", "chat_backstop"
    }
    assert all(row["held"] for row in report["checks"])
    assert len(report["checks"]) == 13
    # the main chat's backstop, proven live: the kernel refused the hook, and git's config
    # lost the core.hooksPath the command added
    backstop = next(row for row in report["checks"] if row["layer"] == "chat_backstop")
    assert "hook" in backstop["tried"] and "core.hooksPath" in backstop["tried"]
    assert "Read-only file system" in backstop["happened"]
    assert "git's config put back" in backstop["happened"]
    tried = " ".join(row["tried"] for row in report["checks"])
    assert "vsock" in tried and "raw and packet" in tried


def test_verify_says_each_check_as_it_is_tried() -> None:
    """The checks take seconds: each line comes when its escape was tried, so the first
    comes well before the last (the CPU-limit check alone runs a 1 s busy loop)."""
    import time

    with isolated_env() as env:
        proc = subprocess.Popen([sys.executable, "-m", "coordinator", "sandbox", "--verify"],
                                env=env.vars, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        arrived: list[tuple[float, str]] = []
        for line in proc.stdout:
            arrived.append((time.monotonic(), line))
        assert proc.wait(timeout=120) == 0
    assert arrived[0][1].startswith("Trying each escape")
    first_check = next(t for t, line in arrived if line.startswith("held"))
    assert arrived[-1][0] - first_check > 0.8, arrived
    assert "every layer held (13 checks in" in arrived[-1][1]
    assert any(line.startswith("held  chat_backstop ") for _, line in arrived), arrived


def test_a_machine_without_the_backstop_says_so_and_keeps_the_other_layers() -> None:
    """Where the main chat's backstop cannot run (here: CAP_SYS_ADMIN in the inheritable
    set, which root's exec would hand back to a command), its layer is listed inactive with
    the reason, the sandbox's own layers still active, and the report is not ok."""
    capsh = shutil.which("capsh")
    if capsh is None or os.geteuid() != 0:
        pytest.skip("needs root and capsh(1) to put CAP_SYS_ADMIN in the inheritable set")
    with isolated_env() as env:
        proc = subprocess.run(
            [capsh, "--inh=cap_sys_admin", "--", "-c", 'exec "$0" "$@"', sys.executable,
             "-m", "coordinator", "sandbox", "--json"],
            env=env.vars, capture_output=True, text=True, timeout=120,
        )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    layers = {row["layer"]: row for row in report["layers"]}
    assert report["ok"] is False
    assert layers["chat_backstop"]["active"] is False
    assert "CAP_SYS_ADMIN" in layers["chat_backstop"]["detail"]
    assert "main-chat commands run without it" in layers["chat_backstop"]["detail"]
    assert all(row["active"] for name, row in layers.items() if name != "chat_backstop")
