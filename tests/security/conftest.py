"""Fixtures the security tests share: the service unit tests' ``place``, and a sandbox
helper with the classifier bypassed (``WorkerSeams(bypass_classifier=True)``, started through
the test's own entry point, ``tests/seams.py``), for tests that show a containment limit
holds on its own whatever command reaches it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.wire.seams import WorkerSeams
from protocol.wire.work import CommandLimits
from tests.coordinator.service.conftest import place
from tests.seams import helper_entry
from tests.support import containment_unavailable
from worker.contain import probe
from worker.contain.helper import HELPER_MODULE, Request, SandboxHelper
from worker.contain.spawn import ALL_LAYERS, Layers
from worker.shell.runner import ShellResult

__all__ = ["place"]


def start_whole_helper(entry: tuple[str, ...] = HELPER_MODULE) -> SandboxHelper:
    """A sandbox helper with every layer of the speculation's profile active; a machine
    that lacks one cannot prove what the test proves (the main chat's backstop is not
    part of it)."""
    started = SandboxHelper.start(entry)
    if not all(layer.active for layer in probe.of_speculations(started.layers)):
        started.close()
        containment_unavailable(f"layers missing: {started.layers}")
    return started


def start_bypassed_helper() -> SandboxHelper:
    """``start_whole_helper`` with the classifier bypassed."""
    return start_whole_helper(helper_entry(WorkerSeams(bypass_classifier=True)))


@pytest.fixture(scope="module")
def bypassed_helper() -> Iterator[SandboxHelper]:
    started = start_bypassed_helper()
    yield started
    started.close()


def layers_for(only: str) -> Layers:
    """Every layer for "all"; else only the layer named ``only`` (each one alone must hold)."""
    return ALL_LAYERS if only == "all" else ALL_LAYERS.only(only)


def run_in(
    helper: SandboxHelper,
    project: Path,
    command: str,
    *,
    layers: Layers = ALL_LAYERS,
    limits: CommandLimits | None = None,
    timeout_s: float = 30.0,
) -> ShellResult:
    return helper.run(
        Request(
            command=command,
            cwd=str(project),
            project=str(project),
            timeout_s=timeout_s,
            output_cap=64 * 1024,
            limits=limits or CommandLimits(),
            layers=layers,
        )
    )
