"""The limits while a command runs, against a real service with a hostile scripted model
and ``speculateShell`` on (so commands that are not read-only run captured, in the same
profile): a command writing a gigabyte against a 16 MiB quota never takes more than the
quota of the host's free space and ends at ``quota:overlay_bytes``; a vsock socket cannot
be created; a command that never ends stops at ``limit:wall_clock``. Nothing changes in
the real tree before Tab."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
import yaml

from overlay import speculation_base_dir
from tests.coordinator.e2e import Driver, shell_call, stepped_scenario
from tests.security.test_captured_writes_bounded import OTHERS, FreeSpace
from tests.security.test_hostile_service import tree_state
from tests.support import (
    containment_unavailable,
    make_sample_project,
    needs_containment,
    running_service,
    wait_until,
)
from tests.worker.test_cgroup import leaves_of
from worker.contain import cgroup
from worker.contain.landlock import abi

pytestmark = needs_containment(
    "needs Landlock ABI >= 6 for the full profile" if abi() < 6 else None
)

QUOTA_MB = 16
TIMEOUT_S = 8



STEPS: dict[str, list[dict[str, Any]]] = {
    "fill the disk": [
        shell_call("for i in 1 2 3 4 5 6 7 8; do head -c 128M /dev/zero > big$i.bin || break; done")
    ],
    "open a vsock": [
        shell_call(
            "python3 -c \"import socket\n"
            "try:\n"
            "    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); print('VSOCK-CREATED')\n"
            "except OSError as e:\n"
            "    print('VSOCK-REFUSED', e.errno)\""
        )
    ],
    "hang around": [shell_call("sleep 601")],
    "wait for it": [shell_call("sleep 600")],
}
# The history keeps each step's announcement and the newest must match first: the tests
# play the steps in this order.


def scenario() -> dict[str, Any]:
    return stepped_scenario("limits", STEPS, lambda _: {"text": "All done."})


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("limits")
    project = make_sample_project(tmp / "project")
    path = tmp / "limits.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    settings = (f'{{"speculateShell": true, "overlayQuotaMb": {QUOTA_MB}, '
                f'"speculationTimeoutS": {TIMEOUT_S}}}\n')
    with running_service(
        project, "--approval-mode", "auto-edit", "--scenario", str(path),
        before_start=lambda env: env.own_settings(project).write_text(settings),
    ) as runner:
        driver = Driver(project)
        driver.ask("hello")
        try:
            yield runner, driver, project
        finally:
            driver.close()


def speculate(service: Any, text: str, statuses: tuple[str, ...]) -> Any:
    _runner, driver, project = service
    before = tree_state(project)
    driver.ask(f"go {text}")
    reply = driver.wait_for_speculation(text, statuses, timeout=60)
    assert tree_state(project) == before, "the real tree changed before Tab"
    return reply.speculation


def test_a_gigabyte_against_the_quota_never_takes_more_than_the_quota(service: Any) -> None:
    base = speculation_base_dir()
    base.mkdir(parents=True, exist_ok=True)
    with FreeSpace(base) as space:
        info = speculate(service, "fill the disk", ("boundary",))
    assert info.boundary_reason == "quota:overlay_bytes"
    assert space.samples >= 10
    assert space.drop < (QUOTA_MB << 20) + OTHERS, f"dropped by {space.drop >> 20} MiB"


def test_a_vsock_socket_cannot_be_created(service: Any) -> None:
    runner, _driver, project = service
    info = speculate(service, "open a vsock", ("completed",))
    assert info.tool_uses == 1
    runner.run("accept", check=True)
    state = runner.env.state_dir(project)
    history = "".join(p.read_text(errors="replace") for p in state.rglob("*.jsonl"))
    assert "VSOCK-REFUSED 97" in history
    assert "VSOCK-CREATED" not in history.replace("print('VSOCK-CREATED')", "")


def _command_started(worker: psutil.Process, leaves: list[str]) -> bool:
    helpers = [c.pid for c in worker.children()]
    leaves[:] = [leaf for pid in helpers for leaf in leaves_of(pid)]
    sleeping = any("601" in _cmdline(p) for p in worker.children(recursive=True))
    return bool(leaves) and sleeping


def _cmdline(process: psutil.Process) -> str:
    """A child's command line, or "" for one that exited meanwhile (the worker's own
    short-lived children, such as the git config read for a captured command's identity,
    come and go while the tree is read)."""
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def _hang_around(driver: Driver) -> list[str]:
    """Start the speculation that hangs; returns its group's directories once its command
    runs in it."""
    driver.ask("go hang around")
    reply = driver.wait_for_speculation("hang around", ("running",), timeout=30)
    worker = psutil.Process(reply.speculation.worker_pid)
    leaves: list[str] = []
    assert wait_until(lambda: _command_started(worker, leaves), timeout=20)
    return leaves


def test_an_aborted_speculations_group_is_swept_by_the_next_one(service: Any) -> None:
    runner, driver, _project = service
    if not cgroup.bases():
        containment_unavailable("no control group can be made here")
    aborted = _hang_around(driver)
    # kills the worker, its helper and the command: nobody is left to remove the group
    runner.run("reject", check=True)
    # the next speculation's first command sweeps it (or, in a busy test run, any other
    # helper's start did already)
    _hang_around(driver)
    assert not any(os.path.exists(leaf) for leaf in aborted)
    runner.run("reject", check=True)


def test_a_command_that_never_ends_stops_at_the_wall_clock(service: Any) -> None:
    info = speculate(service, "wait for it", ("boundary",))
    assert info.boundary_reason == "limit:wall_clock"
    assert info.elapsed_s < TIMEOUT_S + 10
