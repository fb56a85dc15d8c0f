"""The turn slot's hand-over from an accept to its follow-up (the compaction its turn made
due): the slot and ``forkable`` stay held until the follow-up ends, however it ends."""

from __future__ import annotations

import asyncio

from coordinator.service.chat.turn_slot import TurnSlot
from tests.coordinator.service.fakes import until


def test_an_accept_without_follow_up_frees_the_slot_and_lets_speculations_fork() -> None:
    async def main() -> None:
        slot = TurnSlot()
        async with slot.held_for_accept(lambda: None):
            slot.snapshot_changing()
            assert slot.busy
        assert not slot.busy
        await asyncio.wait_for(slot.forkable(), 1)

    asyncio.run(main())


def test_the_follow_up_keeps_the_slot_until_it_ends() -> None:
    async def main() -> None:
        slot = TurnSlot()
        go = asyncio.Event()
        ran: list[str] = []

        async def compaction() -> None:
            await go.wait()
            ran.append("compacted")

        async with slot.held_for_accept(compaction):
            slot.snapshot_changing()
        assert slot.busy  # the accept has replied; its follow-up holds the slot
        forkable = asyncio.ensure_future(slot.forkable())
        prompt = asyncio.ensure_future(slot.take(asyncio.Event()))
        await asyncio.sleep(0.01)
        assert not forkable.done() and not prompt.done()
        go.set()
        assert await asyncio.wait_for(prompt, 1) is True  # the next turn after it
        await asyncio.wait_for(forkable, 1)
        assert ran == ["compacted"]
        slot.release()

    asyncio.run(main())


def test_a_follow_up_cancelled_before_its_first_step_still_frees_the_slot() -> None:
    """A reset in the same moment as the accept: the task is cancelled before it ever ran,
    so no ``finally`` inside it would run; the slot must not stay held for ever."""

    async def main() -> None:
        slot = TurnSlot()
        started: list[bool] = []

        async def compaction() -> None:
            started.append(True)

        async with slot.held_for_accept(compaction):
            slot.snapshot_changing()
        slot.cancel_follow_up()  # before the loop gave the new task a step
        await until(lambda: not slot.busy, timeout=5)
        await asyncio.wait_for(slot.forkable(), 1)
        assert started == []
        assert await asyncio.wait_for(slot.take(asyncio.Event()), 1) is True
        slot.release()

    asyncio.run(main())


def test_a_failing_settle_frees_the_slot_and_raises() -> None:
    async def main() -> None:
        slot = TurnSlot()

        def settle() -> None:
            raise OSError("disk full")

        try:
            async with slot.held_for_accept(settle):
                slot.snapshot_changing()
        except OSError:
            pass
        else:
            raise AssertionError("the settle's error was swallowed")
        assert not slot.busy
        await asyncio.wait_for(slot.forkable(), 1)

    asyncio.run(main())
