"""``Session.submit``: what a submitted prompt comes to. The first tests drive stand-ins
of the chat and the speculation manager (``fakes.SessionChat``,
``fakes.SessionSpeculation``) to reach every outcome; the last ones drive the real
``SpeculationManager`` (real overlays, files applied, the scripted model)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from coordinator.service.chat.main_chat import TurnResult
from coordinator.service.emitter import Emitter
from coordinator.service.session import (
    Accepted,
    AcceptRepeated,
    Applied,
    Asked,
    Busy,
    NoSuggestion,
    Session,
    TurnRan,
    WaitCancelled,
)
from coordinator.service.speculation import (
    AcceptCancelled,
    AcceptFallback,
    BranchRun,
    Debounced,
    Speculation,
    Suggestion,
)
from coordinator.settings import Settings
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import ToolCall
from protocol.wire.control import ErrorReply, Notice, TurnEnded

from .conftest import Place
from .fakes import Chat, FakeSession, Workers, run, scripted, until
from .speculation.test_speculation_manager import SUGGESTION, a_completed_speculation, manager_for


class World(FakeSession):
    def submit(self, how: Asked | Accepted) -> Any:
        return run(self.session.submit(Emitter(self.replies, b"c", 3), how))

    def notices(self) -> list[str]:
        return [n.text for n in self.replies.of(Notice)]


def test_the_suggestion_sent_as_is_is_applied_and_no_turn_runs() -> None:
    world = World()
    world.speculation.offer("add a test", "completed")
    outcome = world.submit(Asked("add a test", "tab"))
    assert isinstance(outcome, Applied) and outcome.saved_s == 1.5
    assert world.log == ["cancel_generation", ("accept", "tab", 0)]
    assert outcome.reply(3) == TurnEnded(3, "accepted", "saved 1.50s", True, outcome.elapsed_s)


def test_an_unusable_speculation_falls_back_to_a_turn_and_says_why() -> None:
    world = World()
    world.speculation.offer("add a test", "failed")
    world.speculation.accepting = AcceptFallback("its speculation failed (boom)")
    outcome = world.submit(Asked("add a test"))
    assert isinstance(outcome, TurnRan)
    assert (outcome.fell_back, outcome.dismissed) == ("its speculation failed (boom)", None)
    assert world.log[:3] == ["cancel_generation", ("accept", "enter", 0), "run_turn"]
    assert world.notices() == ["Running it as a normal turn: its speculation failed (boom)."]
    assert outcome.reply(3).reason == "completed"


def test_something_else_dismisses_the_live_speculation_then_runs_a_turn() -> None:
    world = World()
    world.speculation.offer("add a test", "running")
    world.chat.result = TurnResult("refused", "no")
    outcome = world.submit(Asked("explain it", mode=ApprovalMode.PLAN))
    assert isinstance(outcome, TurnRan)
    assert (outcome.dismissed, outcome.fell_back, outcome.result.reason) == (
        "add a test", None, "refused")
    assert world.log == [
        "cancel_generation",
        ("dismiss", "user typed something else"),
        "run_turn",
        ("after_turn", "refused", ApprovalMode.PLAN, 0),
    ]


def test_without_a_suggestion_a_prompt_is_a_plain_turn() -> None:
    outcome = World().submit(Asked("explain it"))
    assert isinstance(outcome, TurnRan) and outcome.dismissed is outcome.fell_back is None


@pytest.mark.parametrize(
    ("raised", "expected"), [(Debounced(), AcceptRepeated), (AcceptCancelled(), WaitCancelled)]
)
def test_a_debounced_or_cancelled_accept_runs_nothing(
    raised: Exception, expected: type[object]
) -> None:
    world = World()
    world.speculation.offer("add a test", "completed")
    world.speculation.accepting = raised
    outcome = world.submit(Asked("add a test"))
    assert isinstance(outcome, expected)
    assert "run_turn" not in world.log and world.chat.turns == []


def test_a_prompt_while_another_turn_waits_for_approval_is_refused_and_touches_nothing() -> None:
    world = World()
    world.speculation.offer("add a test", "completed")
    world.chat.waiting = ToolCall("c1", "write_file", '{"file_path": "a.py"}')
    outcome = world.submit(Accepted("tab"))
    assert outcome == Busy(world.chat.waiting, 90)
    reply = outcome.reply(3)
    assert isinstance(reply, ErrorReply) and "after 90 s" in reply.message
    assert world.log == [] and world.replies.replies == []


def test_an_accept_takes_the_asked_rank_and_its_fallback_turn_knows_it() -> None:
    world = World()
    world.speculation.current = Suggestion(["first", "second"])
    world.speculation.accepting = AcceptFallback("no speculation ran")
    outcome = world.submit(Accepted("right", index=1))
    assert isinstance(outcome, TurnRan) and outcome.fell_back == "no speculation ran"
    assert ("accept", "right", 1) in world.log
    [turn] = world.chat.turns
    assert (turn["text"], turn["from_accept"], turn["can_confirm"]) == ("second", True, False)
    assert turn["mode"] is ApprovalMode.DEFAULT  # the chat's


@pytest.mark.parametrize(
    ("current", "index", "expected"),
    [
        (None, None, NoSuggestion(None, None)),
        (Suggestion(["first", "second"]), 2, NoSuggestion(2, (0, 1))),
    ],
)
def test_an_accept_with_nothing_to_take_is_no_suggestion(
    current: Suggestion | None, index: int | None, expected: NoSuggestion
) -> None:
    world = World()
    world.speculation.current = current
    assert world.submit(Accepted("cli", index)) == expected
    assert world.log == []


def test_a_typed_out_branch_waits_for_its_speculation() -> None:
    world = World()
    world.speculation.offer("add a test", "running")
    running = Speculation("s", "x", status="running")
    world.speculation.typed_branch = BranchRun(2, "show it", running)
    assert isinstance(world.submit(Asked("show it")), Applied)
    assert world.log == ["cancel_generation", ("accept", "typed", 2)]
    assert world.notices() == [
        "You typed a predicted prompt: using its speculation (still running, waiting for it "
        "to finish)."
    ]


def test_reset_drops_the_suggestion_and_names_the_new_session() -> None:
    world = World()
    assert run(world.session.reset()) == "session-2"
    assert world.log == ["cancel_generation", ("dismiss", "reset"), "chat.reset", "new_session"]


# -- with the real speculation manager -------------------------------------------------------


def test_the_real_manager_applies_the_suggestion_then_has_nothing_left_to_accept(
    place: Place,
) -> None:
    world, workers = World(), Workers()

    async def main() -> list[object]:
        async with manager_for(place, server, workers, Chat()) as manager:
            session = Session(world.chat, manager, Settings())
            await a_completed_speculation(manager, workers, place)
            out = Emitter(world.replies, b"c", 3)
            first = await session.submit(out, Asked(SUGGESTION, "tab"))
            second = await session.submit(out, Accepted("tab", 0))
            return [first, second]

    with scripted() as server:
        first, second = run(main())
    assert isinstance(first, Applied)
    assert (place.root / "tests/test_negative.py").exists()
    assert second == NoSuggestion(0, None)
    assert world.chat.turns == []


def test_ctrl_c_on_a_prompt_waiting_for_its_real_speculation_cancels_it(place: Place) -> None:
    world, workers = World(), Workers()

    async def main() -> object:
        async with manager_for(place, server, workers, Chat()) as manager:
            session = Session(world.chat, manager, Settings())
            await manager.offer(SUGGESTION, delay_s=0)
            out = Emitter(world.replies, b"c", 9)
            waiting = asyncio.ensure_future(session.submit(out, Asked(SUGGESTION.upper())))
            await until(lambda: session.cancel(9))  # once it waits, Ctrl-C reaches it
            return await waiting

    with scripted() as server:
        outcome = run(main())
    assert isinstance(outcome, WaitCancelled)
    assert world.chat.turns == [] and not (place.root / "tests/test_negative.py").exists()
