"""The unit tests' stand-ins (``fakes.py``) keep the real parts' shapes: every public
method a stand-in has is a method of the real class, async where it is async, with the
same parameters. A member renamed or re-signed in the real class fails here at once,
not as a test that still passes against a shape the service no longer has."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from coordinator.service.chat.main_chat import MainChat
from coordinator.service.pool.workers import WorkerPool
from coordinator.service.speculation import SpeculationManager

from . import fakes

# (stand-in, real class, the stand-in's own helpers that tests drive it with)
PAIRS: list[tuple[type[Any], type[Any], set[str]]] = [
    (fakes.SessionChat, MainChat, set()),
    (fakes.SessionSpeculation, SpeculationManager, {"offer"}),
    (fakes.Chat, MainChat, set()),
    (fakes.Workers, WorkerPool, {"deliver", "die", "jobs_of"}),
]


def _methods(cls: type[Any]) -> dict[str, Any]:
    return {name: member for name, member in vars(cls).items()
            if callable(member) and not name.startswith("_")}


def _shape(function: Any) -> tuple[bool, list[tuple[str, Any]]]:
    params = list(inspect.signature(function).parameters.values())
    return (inspect.iscoroutinefunction(function),
            [(p.name, p.kind) for p in params])


def mismatches(stand_in: type[Any], real: type[Any], helpers: set[str]) -> list[str]:
    found = []
    for name, method in _methods(stand_in).items():
        if name in helpers:
            continue
        original = getattr(real, name, None)
        if original is None or not callable(original):
            found.append(f"{stand_in.__name__}.{name}: no such method on {real.__name__}")
        elif _shape(method) != _shape(original):
            found.append(f"{stand_in.__name__}.{name}{inspect.signature(method)} != "
                         f"{real.__name__}.{name}{inspect.signature(original)}")
    return found


@pytest.mark.parametrize(("stand_in", "real", "helpers"), PAIRS,
                         ids=[p[0].__name__ for p in PAIRS])
def test_a_stand_in_has_the_real_shape(stand_in: type[Any], real: type[Any],
                                       helpers: set[str]) -> None:
    assert mismatches(stand_in, real, helpers) == []


def test_the_check_sees_a_stand_in_that_drifted() -> None:
    class Drifted:
        async def cancel(self, ask_req_id: int | None = None) -> bool:  # sync in MainChat
            return False

        def answer_approval(self, ask_req_id: int, approved: bool) -> bool:  # lost call_id
            return False

        def invented(self) -> None: ...

    assert len(mismatches(Drifted, MainChat, set())) == 3
