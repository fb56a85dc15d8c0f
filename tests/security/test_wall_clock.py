"""A wall-clock limit per speculation (``speculationTimeoutS``): whatever holds it up, a
command or the model, the speculation ends at the boundary ``limit:wall_clock`` near the
limit, keeping what it did before (the transcript so far), and its command is killed."""

from __future__ import annotations

import time
from typing import Any

import msgspec
import pytest

from protocol.wire.work import Boundary, SpeculationLimits, ToolFinished
from tests.worker.conftest import Harness, call, harness, rule, spec_project

__all__ = ["harness", "spec_project"]  # the worker tests' fixtures, used here

LIMIT_S = 2.0


def limited(h: Harness, **limits: Any) -> Any:
    job = h.job(limits=SpeculationLimits(wall_clock_s=LIMIT_S, shell_timeout_s=60.0, **limits))
    return job


@pytest.mark.parametrize(
    ("command", "captured"),
    [
        ("head -c 500000000000 /dev/zero | wc -c", False),  # read-only, minutes of work
        ("sleep 60", True),  # with speculateShell
    ],
)
def test_a_long_command_ends_the_speculation_at_the_wall_clock_limit(
    harness: Any, command: str, captured: bool
) -> None:
    h: Harness = harness(
        [
            rule(
                {
                    "tool_calls": [
                        call("read_file", file_path="src/app.py"),
                        call("run_shell_command", command=command),
                    ]
                },
                times=1,
            ),
            rule({"text": "Done."}),
        ]
    )
    started = time.monotonic()
    out = h.run(msgspec.structs.replace(limited(h), speculate_shell=captured))
    took = time.monotonic() - started
    assert [b.reason.text() for b in out.of(Boundary)] == ["limit:wall_clock"], out.events
    assert took < LIMIT_S + 10  # not the command's own 60 s, not the shell timeout
    # the read before it is kept in the transcript
    assert [e.result.name for e in out.of(ToolFinished)] == ["read_file"]


def test_a_slow_model_ends_the_speculation_at_the_wall_clock_limit(harness: Any) -> None:
    h: Harness = harness([rule({"text": "Done.", "latency_ms": 30_000})])
    started = time.monotonic()
    out = h.run(limited(h))
    assert [b.reason.text() for b in out.of(Boundary)] == ["limit:wall_clock"], out.events
    assert time.monotonic() - started < LIMIT_S + 10


def test_a_speculation_within_the_limit_completes(harness: Any) -> None:
    h: Harness = harness([rule({"text": "Done."})])
    out = h.run(limited(h))
    assert not out.of(Boundary), out.events
