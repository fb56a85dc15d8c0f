"""`specrun sandbox` and `specrun sandbox --verify` through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys

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
    assert {row["layer"] for row in report["layers"]} == {
        "filesystem", "network", "ipc_signals", "limits", "privileges", "landlock", "seccomp"
    }


def test_verify_tries_every_escape_and_every_one_holds() -> None:
    proc = specrun("sandbox", "--verify", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, report
    assert report["ok"] is True
    layers = {row["layer"] for row in report["checks"]}
    assert layers == {"filesystem", "network", "ipc_signals", "limits", "privileges"}
    assert all(row["held"] for row in report["checks"])
    assert len(report["checks"]) == 12
    tried = " ".join(row["tried"] for row in report["checks"])
    assert "vsock" in tried and "raw and packet" in tried
