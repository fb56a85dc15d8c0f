"""LiveHub over real ZeroMQ sockets: events reach a subscriber in order; one that does not
read is never waited for, misses events and is told to resync; a subscriber whose process
exited or whose socket is gone is dropped."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.asyncio

from coordinator.service.live.hub import LiveHub
from protocol.wire import codec
from protocol.wire.control import LiveEvent, LivePrompt, LiveResync
from protocol.wire.endpoints import make_router


class Sockets:
    def __init__(self, ctx: zmq.asyncio.Context, endpoint: str) -> None:
        self.ctx = ctx
        self.endpoint = endpoint
        self.router = make_router(ctx, endpoint)
        self.replies = codec.coordinator_to_client()

    def send_nowait(self, identity: bytes, frame: bytes, failed: Any) -> None:
        sent = self.router.send_multipart([identity, frame], flags=zmq.NOBLOCK)
        assert sent.done()  # nothing else sends on this socket meanwhile
        if sent.exception() is not None:
            raise sent.exception()  # type: ignore[misc]

    async def subscriber(self, identity: bytes, rcvhwm: int = 1000) -> zmq.asyncio.Socket:
        dealer = self.ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.setsockopt(zmq.IDENTITY, identity)
        dealer.setsockopt(zmq.RCVHWM, rcvhwm)
        dealer.connect(self.endpoint)
        await dealer.send(b"hello")  # the router learns the identity from a first frame
        assert await self.router.recv_multipart() == [identity, b"hello"]
        return dealer


def run(tmp_path: Path, body: Callable[[Sockets], Awaitable[None]]) -> None:
    """Run ``body`` in an event loop with a router bound in ``tmp_path``."""

    async def main() -> None:
        ctx = zmq.asyncio.Context()
        made = Sockets(ctx, f"ipc://{tmp_path}/c.sock")
        try:
            await body(made)
        finally:
            made.router.close(linger=0)
            ctx.destroy(linger=0)

    asyncio.run(main())


def _change(n: int) -> LivePrompt:
    return LivePrompt(turn=n, text=f"prompt {n} " + "x" * 200)


async def _drain(sock: zmq.asyncio.Socket, sockets: Sockets) -> list[LiveEvent | LiveResync]:
    got: list[LiveEvent | LiveResync] = []
    while await sock.poll(200):
        reply = sockets.replies.decode(await sock.recv())
        assert isinstance(reply, (LiveEvent, LiveResync))
        got.append(reply)
    return got


def test_events_reach_a_reading_subscriber_numbered_in_order(tmp_path: Path) -> None:
    run(tmp_path, _events_reach_a_reading_subscriber_numbered_in_order)


async def _events_reach_a_reading_subscriber_numbered_in_order(sockets: Sockets) -> None:
    hub = LiveHub(sockets.send_nowait)
    assert hub.publish(_change(0)) == 0 and hub.seq == 0  # nobody listens: nothing numbered
    sub = await sockets.subscriber(b"a")
    hub.subscribe(b"a", 7, None)
    for n in range(1, 51):
        hub.publish(_change(n))
    got = await _drain(sub, sockets)
    assert [e.seq for e in got] == list(range(1, 51))
    assert all(isinstance(e, LiveEvent) and e.req_id == 7 for e in got)
    assert got[9].change == _change(10)  # type: ignore[union-attr]
    sub.close()


def test_a_subscriber_that_does_not_read_is_never_waited_for_and_resyncs(tmp_path: Path) -> None:
    run(tmp_path, _a_subscriber_that_does_not_read_is_never_waited_for_and_resyncs)


async def _a_subscriber_that_does_not_read_is_never_waited_for_and_resyncs(
    sockets: Sockets,
) -> None:
    sockets.router.setsockopt(zmq.SNDHWM, 20)  # small queues: it falls behind soon
    hub = LiveHub(sockets.send_nowait)
    slow = await sockets.subscriber(b"slow", rcvhwm=20)
    fast = await sockets.subscriber(b"fast")
    hub.subscribe(b"slow", 1, None)
    hub.subscribe(b"fast", 2, None)
    total = 5000
    for n in range(total):
        hub.publish(_change(n))  # returns at once, every time: it never waits
        if n % 100 == 0:
            # The fast one keeps up: it reads as it goes.
            while await fast.poll(0):
                await fast.recv()
    assert hub.seq == total
    behind = next(s for s in hub.subscribers if s.identity == b"slow")
    assert behind.missed > 0 and behind.behind_since is not None

    got = await _drain(slow, sockets)
    seqs = [e.seq for e in got]
    assert seqs == list(range(1, len(seqs) + 1))  # what it got is the start, in order
    assert len(seqs) < total
    # Once it has read, the next event is preceded by a resync naming the last one it
    # missed (it takes a snapshot, newer than that, and goes on).
    hub.publish(_change(total))
    after = await _drain(slow, sockets)
    assert isinstance(after[0], LiveResync) and after[0].seq == total
    assert isinstance(after[1], LiveEvent) and after[1].seq == total + 1
    assert behind.behind_since is None
    for sock in (slow, fast):
        sock.close()


def test_catch_up_resyncs_a_subscriber_in_a_quiet_session(tmp_path: Path) -> None:
    run(tmp_path, _catch_up_resyncs_a_subscriber_in_a_quiet_session)


async def _catch_up_resyncs_a_subscriber_in_a_quiet_session(sockets: Sockets) -> None:
    sockets.router.setsockopt(zmq.SNDHWM, 5)
    hub = LiveHub(sockets.send_nowait)
    slow = await sockets.subscriber(b"slow", rcvhwm=5)
    hub.subscribe(b"slow", 1, None)
    for n in range(2000):
        hub.publish(_change(n))
    await _drain(slow, sockets)
    hub.catch_up()  # no new event: the tick tells it all the same
    after = await _drain(slow, sockets)
    assert after == [LiveResync(1, 2000)]
    slow.close()


def test_a_subscriber_whose_process_exited_is_dropped(tmp_path: Path) -> None:
    run(tmp_path, _a_subscriber_whose_process_exited_is_dropped)


async def _a_subscriber_whose_process_exited_is_dropped(sockets: Sockets) -> None:
    came: list[bool] = []
    hub = LiveHub(sockets.send_nowait, on_active=lambda: came.append(True))
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        hub.subscribe(b"web", 1, child.pid)
        assert hub.active and came == [True]
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
        async with asyncio.timeout(10):
            while hub.active:
                await asyncio.sleep(0.01)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    with pytest.raises(ProcessLookupError):
        hub.subscribe(b"web", 2, child.pid)  # gone already: refused


def test_a_subscriber_whose_socket_is_gone_is_dropped(tmp_path: Path) -> None:
    run(tmp_path, _a_subscriber_whose_socket_is_gone_is_dropped)


async def _a_subscriber_whose_socket_is_gone_is_dropped(sockets: Sockets) -> None:
    hub = LiveHub(sockets.send_nowait)
    sub = await sockets.subscriber(b"gone")
    hub.subscribe(b"gone", 1, None)
    sub.close(linger=0)
    async with asyncio.timeout(10):
        while hub.active:  # the router learns of the disconnect on its own time
            hub.publish(_change(1))
            await asyncio.sleep(0.01)


def test_subscribing_again_replaces_the_earlier_subscription(tmp_path: Path) -> None:
    run(tmp_path, _subscribing_again_replaces_the_earlier_subscription)


async def _subscribing_again_replaces_the_earlier_subscription(sockets: Sockets) -> None:
    hub = LiveHub(sockets.send_nowait)
    sub = await sockets.subscriber(b"a")
    hub.subscribe(b"a", 1, None)
    hub.subscribe(b"a", 2, None)
    hub.publish(_change(1))
    got = await _drain(sub, sockets)
    assert [(e.req_id, e.seq) for e in got] == [(2, 1)]
    sub.close()
