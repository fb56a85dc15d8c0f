"""The web view's connection to the service: two asyncio DEALERs on the control socket.

One carries the view's requests (snapshots, prompts, accepts, rejects); their replies are
routed by request id to whoever waits for them. The other carries only the live
subscription, whose events go to ``on_live``. Two connections are two queues in the
service: when this process falls behind, its subscription's queue fills up (and the
service tells it to resync), while the replies to its requests still go out at once
instead of waiting behind a thousand events. ``closed`` is set when the service is gone
(its pidfile no longer locked), which ends the web view.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from collections.abc import Callable
from pathlib import Path

import msgspec
import zmq
import zmq.asyncio

from coordinator.pidfile import is_locked
from protocol.wire import codec
from protocol.wire.control import (
    ControlReply,
    ControlRequest,
    LiveEvent,
    LiveResync,
    SubscribeRequest,
    is_final,
)
from protocol.wire.endpoints import Endpoints, make_dealer

log = logging.getLogger("specrun.web")


class NoService(RuntimeError):
    def __init__(self, project_root: Path) -> None:
        super().__init__(
            f"No specrun service is running for {project_root}; "
            "start one with `specrun start` (or `specrun start --web`)."
        )


class ServiceLink:
    def __init__(self, project_root: Path) -> None:
        self.project_root = project_root
        self.endpoints = Endpoints.for_project(project_root, create=False)
        if not is_locked(self.endpoints.pidfile):
            raise NoService(project_root)
        self._ctx = zmq.asyncio.Context()
        self._sock = make_dealer(self._ctx, self.endpoints.control)
        self._events = make_dealer(self._ctx, self.endpoints.control)
        self._encoder = msgspec.msgpack.Encoder()
        self._replies = codec.coordinator_to_client()
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Queue[ControlReply]] = {}
        self._subscription: int | None = None
        self.on_live: Callable[[LiveEvent | LiveResync], None] = lambda _event: None
        self.closed = asyncio.Event()

    def next_id(self) -> int:
        return next(self._ids)

    async def subscribe(self) -> None:
        req_id = self.next_id()
        self._subscription = req_id
        await self._events.send(self._encoder.encode(SubscribeRequest(req_id, os.getpid())))

    async def request(
        self, request: ControlRequest,
        on_event: Callable[[ControlReply], None] | None = None,
    ) -> ControlReply:
        """Send a request and wait for its final reply (the streamed ones go to
        ``on_event``, else are dropped: the view sees the turn through its subscription)."""
        queue: asyncio.Queue[ControlReply] = asyncio.Queue()
        self._waiting[request.req_id] = queue
        try:
            await self._sock.send(self._encoder.encode(request))
            while True:
                get = asyncio.ensure_future(queue.get())
                closed = asyncio.ensure_future(self.closed.wait())
                await asyncio.wait({get, closed}, return_when=asyncio.FIRST_COMPLETED)
                closed.cancel()
                if not get.done():
                    get.cancel()
                    raise NoService(self.project_root)
                reply = get.result()
                if is_final(reply):
                    return reply
                if on_event is not None:
                    on_event(reply)
        finally:
            self._waiting.pop(request.req_id, None)

    async def run(self) -> None:
        """Read replies and events until the service is gone."""
        tasks = [
            asyncio.ensure_future(self._watch_service()),
            asyncio.ensure_future(self._read(self._events)),
        ]
        try:
            await self._read(self._sock)
        finally:
            for task in tasks:
                task.cancel()

    async def _read(self, sock: zmq.asyncio.Socket) -> None:
        while not self.closed.is_set():
            frame = await sock.recv()
            try:
                reply = self._replies.decode(frame)
            except codec.ProtocolError as exc:
                log.warning("dropping a reply: %s", exc)
                continue
            if isinstance(reply, (LiveEvent, LiveResync)):
                if reply.req_id == self._subscription:
                    self.on_live(reply)
                continue
            queue = self._waiting.get(reply.req_id)
            if queue is not None:
                queue.put_nowait(reply)

    async def _watch_service(self, interval_s: float = 0.5) -> None:
        while is_locked(self.endpoints.pidfile):
            await asyncio.sleep(interval_s)
        log.info("the service stopped")
        self.closed.set()

    def close(self) -> None:
        self.closed.set()
        with contextlib.suppress(Exception):
            self._sock.close(linger=0)
            self._events.close(linger=0)
        self._ctx.term()
