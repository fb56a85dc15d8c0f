"""The light commands import only what they need (issue 15), checked by what a real run
has loaded rather than by timing: a shell pays for every import on every call, and rich
or asyncio alone cost a `specrun status --json` more than all the rest of its work. The
light commands run without click (coordinator/cli/light.py); every other command loads
click and its own module, not the others'."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from coordinator.cli.app import local_names
from coordinator.commands import module_names
from protocol.wire.control import SuggestionRequest
from tests.support import REPO, Specrun, make_sample_project, running_service, wait_until

FIX = "fix the failing test in tests/test_calc.py"
NEG = "add a test for negative numbers"
NEXT = "show me the diff"

# Top-level packages that none of status, suggestion, workers, reject, accept --json needs
# (pyzmq included: the CLI speaks to the service through protocol/wire/zmtp.py).
HEAVY = {"rich", "asyncio", "logging", "subprocess", "concurrent", "prompt_toolkit", "httpx", "zmq",
         "psutil", "coordinator.settings", "coordinator.cli.daemon", "click",
         "coordinator.cli.app"}
COMMAND_MODULES = ({f"coordinator.cli.local.{name.replace('-', '_')}" for name in local_names()}
                   | {f"coordinator.commands.{name}" for name in module_names()})

# Runs the real CLI entry point, then says on stderr's last line what the process loaded.
PROBE = """
import atexit, sys

def loaded() -> None:
    names = set(sys.modules) | {m.split(".")[0] for m in sys.modules}
    sys.stderr.write("\\nloaded: " + " ".join(sorted(names)) + "\\n")

atexit.register(loaded)
from coordinator.cli import main
main()
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Specrun]:
    """One service for the module: a probe reads what a command loaded, and the tests
    after the first one ask only for a status and a config, whatever the session holds."""
    project = make_sample_project(tmp_path_factory.mktemp("imports") / "proj")
    with running_service(project, "--approval-mode", "auto-edit") as runner:
        yield runner


def _probe(service: Specrun, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "--project", str(service.project), *args],
        env=service.env.vars, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL, cwd=REPO,
    )
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("loaded: "), proc.stderr
    return proc, set(last.removeprefix("loaded: ").split())


def _light(service: Specrun, *args: str) -> list[dict[str, Any]]:
    proc, loaded = _probe(service, *args, "--json")
    assert proc.returncode == 0, proc.stderr
    assert not loaded & HEAVY, f"`specrun {' '.join(args)} --json` imported {loaded & HEAVY}"
    assert loaded & COMMAND_MODULES == {f"coordinator.commands.{args[0]}"}, loaded
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def _wait_completed(service: Specrun, text: str) -> None:
    def completed() -> bool:
        reply = service.query(SuggestionRequest)
        spec = reply.get("speculation") or {}
        return bool(reply.get("text") == text and spec.get("status") == "completed")

    assert wait_until(completed, timeout=30)


def test_importing_the_cli_loads_nothing_heavy() -> None:
    """Every module of the CLI imports the package first: it must cost nothing."""
    code = "import sys, coordinator.cli; print(' '.join(sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=REPO)
    loaded = set(proc.stdout.split()) | {m.split(".")[0] for m in proc.stdout.split()}
    assert not loaded & (HEAVY | {"zmq", "msgspec"}), loaded & HEAVY
    assert {m for m in loaded if m.startswith("coordinator")} == {"coordinator",
                                                                  "coordinator.cli"}


def test_light_commands_import_neither_click_nor_rich_nor_asyncio(service: Specrun) -> None:
    assert service.run("ask", FIX, "--json").returncode == 0
    _wait_completed(service, NEG)

    assert _light(service, "status")[0]["type"] == "status"
    assert _light(service, "workers")[0]["workers"]
    assert _light(service, "suggestion")[0]["text"] == NEG
    # accept streams the transcript and the turn's end: the whole streamed path ran
    events = _light(service, "accept")
    assert [e["type"] for e in events][-2:] == ["transcript", "turn_ended"]
    assert events[-1]["reason"] == "accepted"
    _wait_completed(service, NEXT)
    assert _light(service, "reject")[0]["message"] == "dismissed"
    assert _light(service, "stats")[0]["suggestions_accepted"] == 1


def test_a_command_through_click_loads_its_own_module_only(service: Specrun) -> None:
    proc, loaded = _probe(service, "config", "show", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["project"] == str(service.project)
    assert "click" in loaded and loaded & COMMAND_MODULES == {"coordinator.cli.local.config"}
    assert not loaded & {"zmq", "rich", "asyncio", "coordinator.cli.client"}


def test_drawing_for_a_person_still_uses_rich(service: Specrun) -> None:
    """The probe sees lazy imports: the same command drawn for a person loads rich."""
    proc, loaded = _probe(service, "status")
    assert proc.returncode == 0, proc.stderr
    assert "rich" in loaded and "asyncio" not in loaded
    assert re.search(r"\d+ workers?: ", proc.stdout), proc.stdout
