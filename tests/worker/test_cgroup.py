"""The speculation's control group lives exactly as long as its sandbox helper: made on
its first command, removed when it exits, and swept by the next helper's start when it
was killed (an aborted speculation, a killed service)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from overlay import speculation_base_dir
from protocol.wire.work import CommandLimits
from tests.support import containment_unavailable
from worker.contain import cgroup
from worker.contain.helper import Request, SandboxHelper


@pytest.fixture(autouse=True)
def _needs_groups() -> None:
    if not cgroup.bases():
        containment_unavailable("no control group can be made here")


def leaves_of(pid: int) -> list[str]:
    return [
        os.path.join(base.path, name)
        for base in cgroup.bases()
        if os.path.isdir(base.path)
        for name in os.listdir(base.path)
        if name.startswith(f"{pid}-")
    ]


def run_one(helper: SandboxHelper, project: Path, command: str = "cat /proc/self/cgroup") -> str:
    result = helper.run(
        Request(
            command=command,
            cwd=str(project),
            project=str(project),
            timeout_s=20,
            output_cap=8192,
            limits=CommandLimits(),
        )
    )
    assert result.exit_code == 0, result
    return result.stdout


def test_the_commands_run_in_the_helpers_group_and_it_goes_with_the_helper(
    tmp_path: Path,
) -> None:
    helper = SandboxHelper.start()
    try:
        inside = run_one(helper, tmp_path)
        leaves = leaves_of(helper.pid)
        assert len(leaves) == len(cgroup.bases())
        for leaf in leaves:  # the command's own /proc/self/cgroup names the leaf
            assert f"specrun-{os.geteuid()}/{os.path.basename(leaf)}" in inside
    finally:
        helper.close()
    assert not any(os.path.exists(leaf) for leaf in leaves)


def test_a_killed_helpers_group_is_swept_by_the_next_helper(tmp_path: Path) -> None:
    killed = SandboxHelper.start()
    run_one(killed, tmp_path)
    leaves = leaves_of(killed.pid)
    assert leaves
    assert killed._popen is not None
    killed._popen.kill()  # no chance to clean up
    killed._popen.wait()
    killed.sock.close()
    # its directory in our per-pid dir (the pool removes a dead worker's the same way)
    shutil.rmtree(speculation_base_dir() / str(os.getpid()) / f"sandbox-{killed.pid}")
    assert all(os.path.isdir(leaf) for leaf in leaves)
    fresh = SandboxHelper.start()  # its start sweeps
    try:
        assert not any(os.path.exists(leaf) for leaf in leaves)
    finally:
        fresh.close()


def test_the_sweep_leaves_live_helpers_alone(tmp_path: Path) -> None:
    first = SandboxHelper.start()
    try:
        run_one(first, tmp_path)
        cgroup.sweep()
        assert leaves_of(first.pid)
        run_one(first, tmp_path)  # its group still works
    finally:
        first.close()
