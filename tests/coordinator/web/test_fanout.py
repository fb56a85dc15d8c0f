"""Fanout: a viewer that does not read never holds up the others; it is told to resync
(its queue emptied to the marker) and then gets the events after it."""

from __future__ import annotations

import asyncio

from coordinator.web.fanout import QUEUE_BYTES, QUEUE_LIMIT, RESYNC, Fanout


def test_a_stalled_viewer_resyncs_while_a_reading_one_gets_everything() -> None:
    async def main() -> None:
        fanout = Fanout()
        stalled, reading = fanout.add(), fanout.add()
        got: list[int] = []
        for seq in range(1, 3 * QUEUE_LIMIT + 1):
            fanout.publish(seq, b"{}")  # never waits
            while not reading.queue.empty():
                got.append(reading.queue.get_nowait()[0])
        assert got == list(range(1, 3 * QUEUE_LIMIT + 1))
        assert stalled.resyncs == 2
        items = [stalled.queue.get_nowait() for _ in range(stalled.queue.qsize())]
        assert items[0] == RESYNC  # what it lost is gone; the newest events follow
        assert [seq for seq, _ in items[1:]] == list(
            range(2 * QUEUE_LIMIT + 2, 3 * QUEUE_LIMIT + 1)
        )
        fanout.resync_all()
        assert reading.queue.get_nowait() == RESYNC
        fanout.remove(stalled)
        fanout.publish(1, b"{}")
        assert [stalled.queue.get_nowait()] == [RESYNC] and stalled.queue.empty()

    asyncio.run(main())


def test_a_stalled_viewer_is_bounded_in_bytes_too() -> None:
    """Diff events are large: a stalled viewer resyncs before its queue holds more than
    QUEUE_BYTES, long before it holds QUEUE_LIMIT of them."""

    async def main() -> None:
        fanout = Fanout()
        stalled = fanout.add()
        big = b"x" * (512 << 10)
        for seq in range(1, 100):
            fanout.publish(seq, big)
            assert stalled.queued_bytes <= QUEUE_BYTES
        assert stalled.resyncs >= 1 and stalled.queue.qsize() < QUEUE_LIMIT
        taken = 0
        while not stalled.queue.empty():
            taken += len(stalled.get_nowait()[1])
        assert taken <= QUEUE_BYTES and stalled.queued_bytes == 0

    asyncio.run(main())
