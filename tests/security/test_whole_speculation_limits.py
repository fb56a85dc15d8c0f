"""Limits hold for a command's processes together, and cap live tasks, not pid numbers.

A command's children each used to get the full per-process limits (one command reached
8.7 GiB with a 4 GiB limit), and the process cap was a PID-number cap (a pid_max near its
floor of 301), so after ~300 forks only one more process could exist at a time and real
test suites failed. The speculation's commands now share a control group (memory,
pids.max); the verify check proves both halves, and fails on the old cap."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from protocol.wire.work import CommandLimits
from tests.security.conftest import run_in
from tests.support import containment_unavailable
from worker.contain import cgroup
from worker.contain.helper import SandboxHelper
from worker.contain.limits import limit_reached
from worker.contain.verify import process_check
from worker.shell.runner import ShellResult


def needs_group(controller: str) -> None:
    if not cgroup.covers(controller):
        containment_unavailable(f"no {controller} control group can be made here")


# Four children, each holding 200 MB for a moment: 800 MB together, 230 MB each.
FOUR_CHILDREN = (
    "for i in 1 2 3 4; do python3 -c '"
    'import time; b = bytearray(200 << 20); b[::4096] = b"x" * len(b[::4096]); '
    "time.sleep(1.5); print(\"HELD\")' & done; wait"
)


def test_children_together_cannot_exceed_the_speculation_memory(
    bypassed_helper: SandboxHelper, tmp_path: Path
) -> None:
    needs_group("memory")
    limits = CommandLimits(memory_bytes=512 << 20)
    result = run_in(bypassed_helper, tmp_path, FOUR_CHILDREN, limits=limits)
    assert result.stdout.count("HELD") < 4, result
    assert "Killed" in result.stderr, result
    assert result.limit == "memory"
    assert limit_reached(result) == "memory"  # the speculation stops at limit:memory


# 8 GiB of address space reserved (prot 0: PROT_NONE, as V8 does for a WebAssembly
# instance), then 1 GiB of it used: the reservation is no memory, the use is.
RESERVE_THEN_USE = (
    "python3 -c '"
    "import mmap; flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS\n"
    "r = mmap.mmap(-1, 8 << 30, flags=flags, prot=0); print(\"RESERVED\", flush=True)\n"
    "b = bytearray(1 << 30); print(\"USED\")'"
)


def test_a_reservation_is_not_memory_where_the_group_bounds_it(
    bypassed_helper: SandboxHelper, tmp_path: Path
) -> None:
    """Under the old per-process address-space cap the reservation failed (vitest 4 could
    not start: "WebAssembly.instantiate(): Out of memory"); the group still ends the use."""
    needs_group("memory")
    limits = CommandLimits(memory_bytes=512 << 20)
    result = run_in(bypassed_helper, tmp_path, RESERVE_THEN_USE, limits=limits)
    assert "RESERVED" in result.stdout, result
    assert "USED" not in result.stdout, result
    assert result.limit == "memory", result


def test_control_each_child_alone_is_within_the_per_process_limit(
    bypassed_helper: SandboxHelper, tmp_path: Path
) -> None:
    # With room for all four together, all four run: the refusal above is the group's.
    limits = CommandLimits(memory_bytes=2 << 30)
    result = run_in(bypassed_helper, tmp_path, FOUR_CHILDREN, limits=limits)
    assert result.stdout.count("HELD") == 4, result
    assert result.limit is None


def test_children_together_cannot_exceed_the_process_limit(
    bypassed_helper: SandboxHelper, tmp_path: Path
) -> None:
    needs_group("pids")
    code = (
        "import os\nr, w = os.pipe()\nn = 0\ntry:\n"
        "    while n < 400:\n"
        "        if os.fork() == 0:\n"
        "            os.close(w); os.read(r, 1); os._exit(0)\n"
        "        n += 1\n"
        "except OSError as e:\n"
        "    print('refused after', n)"
    )
    result = run_in(
        bypassed_helper, tmp_path, f'python3 -c "{code}"', limits=CommandLimits(processes=20)
    )
    # the shell's python and the namespace's init count too
    assert result.stdout.strip() == "refused after 18", result
    assert result.limit == "processes"


def test_400_sequential_processes_then_concurrent_ones_work(
    bypassed_helper: SandboxHelper, tmp_path: Path
) -> None:
    limits = CommandLimits(processes=8)
    held, detail = process_check(lambda c: run_in(bypassed_helper, tmp_path, c, limits=limits), 8)
    assert held, detail
    assert "sequential 400" in detail and "concurrent 4" in detail


def _old_pid_number_cap(command: str) -> ShellResult:
    """The command the way the old profile capped it: alone in a PID namespace whose
    pid_max is 301 (the cap for a limit of 8 was max(8 + 1, 301))."""
    proc = subprocess.run(
        [
            "unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc",
            "bash", "-c", f"echo 301 > /proc/sys/kernel/pid_max && {command}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    return ShellResult(proc.returncode, proc.stdout, proc.stderr, False, False, 0.0)


def test_the_verify_check_fails_on_the_old_pid_number_cap() -> None:
    probe = _old_pid_number_cap("cat /proc/sys/kernel/pid_max")
    if probe.stdout.strip() != "301":
        pytest.skip("this kernel (< 6.14) cannot reproduce the old pid_max cap")
    held, detail = process_check(_old_pid_number_cap, 8)
    assert not held, detail
    assert "sequential 400" in detail  # one after another still worked...
    assert "concurrent 4" not in detail  # ...but then not even 4 could live at once


def test_the_status_says_what_bounds_a_speculation_as_a_whole(
    bypassed_helper: SandboxHelper,
) -> None:
    detail = next(x.detail for x in bypassed_helper.layers if x.name == "limits")
    if cgroup.bases():
        assert "whole-speculation limits" in detail
        assert ("group's pids.max" in detail) == cgroup.covers("pids")
    else:
        assert "per-process limits only" in detail
    if os.geteuid() == 0 and not cgroup.covers("pids"):
        assert "not enforced for root" in detail
