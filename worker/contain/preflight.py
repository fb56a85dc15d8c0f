"""The containment probe, once per fork server instead of once per worker.

The pool preloads this module into its fork server, so importing it there probes the
profile once (a sandbox helper runs one command in it, ``worker.contain.probe``) and every
worker forked afterwards inherits the report for its hello, without paying for a probe on
its own start. A process that did not inherit a report (a worker started some other way)
probes with its own helper on first use.
"""

from __future__ import annotations

import atexit
import contextlib

from protocol.wire.work import LayerStatus
from worker.contain import cgroup
from worker.contain.helper import SandboxHelper

_REPORT: list[tuple[LayerStatus, ...]] = []


def report(helper: SandboxHelper | None = None) -> tuple[LayerStatus, ...]:
    """The layer report of this machine, probing once if nobody did yet."""
    if not _REPORT:
        own = helper is None
        probing = SandboxHelper.fork() if helper is None else helper
        try:
            _REPORT.append(probing.probe())
        finally:
            if own:
                probing.close()
    return _REPORT[0]


def _sweep_groups() -> None:
    with contextlib.suppress(OSError):
        cgroup.sweep()


# Importing probes: in the fork server (the pool preloads this module) that is once per
# service; workers forked from it inherit the report, and where control groups can be made
# (found once here too). The probe's helper sweeps the groups a killed service left; the
# fork server's exit (the service stopped: its workers were killed) sweeps theirs.
cgroup.bases()
atexit.register(_sweep_groups)
report()
