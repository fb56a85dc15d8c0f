"""One speculation, one machine, through a real service: what one of its commands leaves,
the next sees as a shell would, and none of it reaches the host or outlives it.

The scripted model speculates "build then check": the first command dates a file, makes a
symlink and a directory, deletes a project file, writes in ``/tmp`` and ``~/.cache``; the
second reports what it finds. Its whole result is read with
``specrun suggestion --transcript --full --json`` (the report starts after 500 characters
of padding, which the cut transcript never shows). Another speculation is aborted while
its second command runs: its ``/tmp`` never was on the host, and it is gone with it.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from protocol.wire.control import RejectRequest
from tests.coordinator.e2e import (
    Driver,
    driven_service,
    shell_call,
    shell_speculation,
    stepped_scenario,
    tidy_project,
)
from tests.support import Specrun, needs_containment
from worker.contain.landlock import abi

pytestmark = needs_containment(
    "needs Landlock ABI >= 6 for the full profile" if abi() < 6 else None
)

MARKER = f"specrun-session-{uuid.uuid4().hex[:12]}"
DATED = 981173106  # 2001-02-03 04:05:06 UTC
BUILD = "build it and check"
HANG = "build it and wait"

FIRST = (
    f"touch -d @{DATED} built.o && ln -s built.o libbuilt.so && mkdir -p out/empty"
    f" && rm tests/old_test.py && echo kept > /tmp/{MARKER} && mkdir -p ~/.cache/tool"
    f" && echo warm > ~/.cache/tool/state && echo first done"
)
SECOND = (
    "printf 'x%.0s' $(seq 600); echo;"
    " echo \"mtime=$(stat -c %Y built.o)\";"
    " echo \"link=$(readlink libbuilt.so)\";"
    " test -d out/empty && echo dir=yes;"
    " test -e tests/old_test.py && echo old=present || echo old=gone;"
    f" echo \"tmp=$(cat /tmp/{MARKER})\";"
    " echo \"cache=$(cat ~/.cache/tool/state)\";"
    " echo \"home=$HOME\""
)


def scenario() -> dict[str, Any]:
    steps = {
        BUILD: [shell_call(FIRST), shell_call(SECOND)],
        HANG: [shell_call(FIRST), shell_call("sleep 600")],
    }
    return stepped_scenario("session", steps, lambda _text: {"text": "Done."})


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Specrun, Driver, Path]]:
    tmp = tmp_path_factory.mktemp("session")
    project = tidy_project(tmp / "project")
    path = tmp / "session.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    with driven_service(project, path, before_start=shell_speculation(project)) as running:
        yield running


def _on_host(name: str) -> list[str]:
    """Every file called ``name`` in the real temporary directories."""
    found: list[str] = []
    for top in {"/tmp", os.environ.get("TMPDIR", "/tmp")}:
        for dirpath, _dirs, files in os.walk(top):
            if name in files:
                found.append(os.path.join(dirpath, name))
    return found


def _holders(name: str) -> dict[int, str]:
    """Processes whose mount namespace shows a speculation /tmp holding ``name`` (found
    through /proc/<pid>/root, which enters that namespace's view), with the host directory
    the session is mounted on."""
    holders: dict[int, str] = {}
    for proc in psutil.process_iter():
        try:
            with open(f"/proc/{proc.pid}/mountinfo") as info:
                points = [line.split()[4] for line in info if "/session-" in line]
        except OSError:
            continue
        for point in points:
            if os.path.exists(f"/proc/{proc.pid}/root{point}/tmp/{name}"):
                holders[proc.pid] = os.path.dirname(point)
    return holders


def test_the_next_command_sees_what_the_last_left(service: tuple[Specrun, Driver, Path]) -> None:
    runner, driver, project = service
    driver.ask(f"go {BUILD}")
    driver.wait_for_speculation(BUILD, ("completed",), timeout=90)
    cut = runner.json("suggestion", "--transcript")
    reply = runner.json("suggestion", "--transcript", "--full")
    tools = [e for e in reply["transcript"] if e["kind"] == "tool"]
    assert [t["status"] for t in tools] == ["success", "success"], tools
    report = tools[1]["text"]
    assert f"mtime={DATED}" in report  # make would not build it again
    assert "link=built.o" in report  # a symlink stays a symlink
    assert "dir=yes" in report and "old=gone" in report
    assert "tmp=kept" in report and "cache=warm" in report  # one /tmp, one HOME
    assert "home=/home/speculation" in report
    assert "mtime=" not in [e for e in cut["transcript"] if e["kind"] == "tool"][1]["text"]
    shown = runner.run("suggestion", "--transcript", "--full", check=True).stdout
    assert f"mtime={DATED}" in shown  # the terminal's view shows it whole too
    assert _on_host(MARKER) == []  # the speculation's /tmp is never the host's
    runner.run("reject", check=True)
    assert (project / "tests/old_test.py").exists() and not (project / "built.o").exists()


def test_nothing_of_an_aborted_speculation_survives(
    service: tuple[Specrun, Driver, Path],
) -> None:
    _runner, driver, _project = service
    driver.ask(f"go {HANG}")
    driver.wait_for_speculation(HANG, ("running",), timeout=60)
    deadline = time.monotonic() + 60
    while not (holders := _holders(MARKER)):  # the first command has run
        assert time.monotonic() < deadline, f"no /tmp of the speculation\n{driver.log_tail()}"
        time.sleep(0.1)
    assert _on_host(MARKER) == []
    driver.client.request(RejectRequest(req_id=driver.client.next_id()))
    deadline = time.monotonic() + 30
    while _holders(MARKER) or any(os.path.lexists(d) for d in holders.values()):
        assert time.monotonic() < deadline, f"{holders} still hold the speculation's /tmp"
        time.sleep(0.1)
    assert _on_host(MARKER) == []
