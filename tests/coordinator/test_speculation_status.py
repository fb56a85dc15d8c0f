"""A speculation's status moves only as ``MOVES`` allows; abort keeps its cause; a second
accept right after the first is ``Debounced``, not a fallback to a normal turn."""

from __future__ import annotations

import asyncio
import typing
from pathlib import Path
from types import SimpleNamespace

import pytest

from coordinator.service.pool.workers import WorkerHandle
from coordinator.service.speculation import (
    AcceptFallback,
    CostLedger,
    Debounced,
    Speculation,
    SpeculationManager,
    Suggestion,
)
from coordinator.service.speculation.record import MOVES, TERMINAL
from protocol.wire.control import SpeculationStatus, WorkerState

STATUSES: tuple[SpeculationStatus, ...] = typing.get_args(SpeculationStatus)


def _at(status: SpeculationStatus) -> Speculation:
    """A speculation that got to ``status`` the way the manager gets it there."""
    spec = Speculation(id="spec-1", suggestion="run the tests")
    path: dict[SpeculationStatus, tuple[SpeculationStatus, ...]] = {
        "running": (),
        "completed": ("completed",),
        "boundary": ("boundary",),
        "failed": ("failed",),
        "aborted": ("aborted",),
        "accepted": ("completed", "accepted"),
    }
    for step in path[status]:
        assert spec.move_to(step)
    return spec


def test_the_moves_cover_every_status_and_terminal_is_all_but_running() -> None:
    assert set(MOVES) == set(STATUSES)
    assert all(targets <= set(STATUSES) for targets in MOVES.values())
    assert frozenset(STATUSES) - TERMINAL == {"running"}
    assert "running" not in {target for targets in MOVES.values() for target in targets}


@pytest.mark.parametrize("start", STATUSES)
@pytest.mark.parametrize("target", STATUSES)
def test_a_move_happens_exactly_when_it_is_allowed(
    start: SpeculationStatus, target: SpeculationStatus
) -> None:
    spec = _at(start)
    allowed = target in MOVES[start]
    assert spec.move_to(target) is allowed
    assert spec.status == (target if allowed else start)
    if allowed:
        assert spec.finished.is_set() and spec.ended_at is not None


def test_the_allowed_moves() -> None:
    expected: dict[str, set[str]] = {
        "running": {"completed", "boundary", "failed", "aborted"},
        "completed": {"accepted", "aborted"},
        "boundary": {"aborted"},
        "failed": set(),
        "aborted": set(),
        "accepted": set(),
    }
    assert expected == MOVES


def test_a_running_speculation_is_not_finished_and_accepting_keeps_its_end_time() -> None:
    spec = _at("running")
    assert not spec.finished.is_set() and spec.ended_at is None
    spec.move_to("completed")
    ended = spec.ended_at
    spec.move_to("accepted")
    assert spec.ended_at == ended  # time saved is measured to the end of the loop


# --- the manager: abort and debounce ---------------------------------------------------


class _Pool:
    def __init__(self) -> None:
        self.killed: list[str] = []

    async def kill(self, handle: object, reason: str) -> float:
        self.killed.append(reason)
        return 0.0


def _manager() -> tuple[SpeculationManager, _Pool]:
    """A manager with just what abort and accept's debounce touch: the workers' kill and
    the budget settings (no chat, no model requests, no overlay on disk)."""
    pool = _Pool()
    settings = SimpleNamespace(speculation_budget=0, speculation_budget_window="hour")
    manager = SpeculationManager(
        Path("/nonexistent"),
        settings,  # type: ignore[arg-type]
        pool,  # type: ignore[arg-type]
        SimpleNamespace(),  # type: ignore[arg-type]
        SimpleNamespace(),  # type: ignore[arg-type]
        base_url="http://127.0.0.1:9/v1",
        cost=CostLedger(),
    )
    return manager, pool


def _offered(manager: SpeculationManager, status: SpeculationStatus) -> Speculation:
    spec = _at(status)
    spec.worker = WorkerHandle(pid=4242, process=None, started_at=0.0, state=WorkerState.STOPPING)
    manager.current = Suggestion(spec.suggestion, speculation=spec)
    return spec


@pytest.mark.parametrize(
    ("status", "counted"), [("running", 1), ("completed", 0), ("boundary", 0)]
)
def test_abort_marks_it_aborted_with_its_cause_and_kills_its_worker(
    status: SpeculationStatus, counted: int
) -> None:
    manager, pool = _manager()
    spec = _offered(manager, status)

    asyncio.run(manager.abort("user typed something else"))

    assert spec.status == "aborted"
    assert spec.abort_cause == "user typed something else"
    assert pool.killed == ["speculation aborted: user typed something else"]
    # Counted as aborted only if it was stopped while it ran (else it counted as it ended).
    assert manager.stats.aborted == counted
    asyncio.run(manager.abort("shutdown"))  # idempotent: nothing more happens
    assert spec.abort_cause == "user typed something else" and len(pool.killed) == 1


@pytest.mark.parametrize("status", ["failed", "accepted"])
def test_abort_leaves_a_failed_or_accepted_speculation_alone(status: SpeculationStatus) -> None:
    manager, pool = _manager()
    spec = _offered(manager, status)
    asyncio.run(manager.abort("rejected"))
    assert spec.status == status and spec.abort_cause is None and pool.killed == []


def test_dismiss_passes_its_reason_on_as_the_cause() -> None:
    manager, _ = _manager()
    spec = _offered(manager, "completed")
    asyncio.run(manager.dismiss("rejected"))
    assert (spec.status, spec.abort_cause, manager.current) == ("aborted", "rejected", None)
    assert manager.stats.ignored == 1


def test_a_second_accept_right_after_the_first_is_debounced() -> None:
    manager, _ = _manager()
    out = SimpleNamespace(req_id=1)

    async def twice() -> None:
        with pytest.raises(AcceptFallback, match="no suggestion"):
            await manager.accept("tab", out)  # type: ignore[arg-type]
        with pytest.raises(Debounced):
            await manager.accept("tab", out)  # type: ignore[arg-type]

    asyncio.run(twice())
