"""Fan-out of live events (``SubscribeRequest``) to the subscribers of the control socket.

Each event is numbered and encoded once; each subscriber gets it with a send that never
waits. The bounded queue of a subscriber is ZeroMQ's own per-peer send queue (the control
socket's ``SNDHWM``, 1,000 messages, plus what the kernel buffers): when it is full the
send fails at once (``ROUTER_MANDATORY``: EAGAIN, not a wait), the subscriber is marked
behind and misses events until one send gets through again; that send is a
``LiveResync`` naming the last event it missed, so the subscriber takes a snapshot. A turn
therefore never waits for a viewer, however slow or stopped it is. A subscriber whose
socket is gone (EHOSTUNREACH) or whose process exited is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import msgspec
import zmq

from protocol.wire.control import LiveChange, LiveEvent, LiveResync

log = logging.getLogger("specrun.live")

# identity, frame, failed: send without waiting; raises zmq.Again when the peer's queue is
# full (or another ZMQError when it is gone); when the outcome is only known later (the
# frame had to queue behind another), ``failed`` is called with the error, if any.
SendNowait = Callable[[bytes, bytes, Callable[[BaseException], None]], None]


@dataclass(eq=False)
class Subscriber:
    identity: bytes
    req_id: int
    client_pid: int | None
    behind_since: int | None = None  # the first event it missed, while it is behind
    missed: int = 0  # events dropped for it, in all
    pidfd: int | None = None


class LiveHub:
    def __init__(
        self, send_nowait: SendNowait, on_active: Callable[[], None] = lambda: None
    ) -> None:
        self._send = send_nowait
        self._subscribers: list[Subscriber] = []
        self._encoder = msgspec.msgpack.Encoder()
        self.seq = 0
        self.on_active = on_active  # told when the first subscriber came

    @property
    def active(self) -> bool:
        """Someone is subscribed: only then is anything built, encoded or sent."""
        return bool(self._subscribers)

    @property
    def subscribers(self) -> list[Subscriber]:
        return list(self._subscribers)

    def subscribe(self, identity: bytes, req_id: int, client_pid: int | None) -> Subscriber:
        # The same client subscribing again replaces its earlier subscription.
        for old in [s for s in self._subscribers if s.identity == identity]:
            self.drop(old, "subscribed again")
        sub = Subscriber(identity, req_id, client_pid)
        if client_pid is not None:
            try:
                sub.pidfd = os.pidfd_open(client_pid)
            except OSError:
                raise ProcessLookupError(f"process {client_pid} is not running") from None
            loop = asyncio.get_running_loop()
            loop.add_reader(sub.pidfd, self.drop, sub, "its process exited")
        was_active = self.active
        self._subscribers.append(sub)
        log.info("live subscriber %r (pid %s)", identity, client_pid)
        if not was_active:
            self.on_active()
        return sub

    def drop(self, sub: Subscriber, why: str) -> None:
        if sub not in self._subscribers:
            return
        self._subscribers.remove(sub)
        if sub.pidfd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(sub.pidfd)
            os.close(sub.pidfd)
            sub.pidfd = None
        log.info("live subscriber %r dropped: %s (missed %d events)", sub.identity, why, sub.missed)

    def close(self) -> None:
        for sub in list(self._subscribers):
            self.drop(sub, "the service stops")

    def publish(self, change: LiveChange) -> int:
        """Number the change and offer it to every subscriber now; never waits. Returns
        its number (0 when nobody listens: nothing is numbered then)."""
        if not self._subscribers:
            return 0
        self.seq += 1
        seq = self.seq
        # The change is encoded once; each subscriber's envelope only adds its req_id.
        raw = msgspec.Raw(self._encoder.encode(change))
        for sub in list(self._subscribers):
            if sub.behind_since is not None and not self._offer(
                sub, LiveResync(sub.req_id, seq - 1)
            ):
                sub.missed += 1
                continue
            sub.behind_since = None
            event = LiveEvent(sub.req_id, seq, cast(LiveChange, raw))
            if not self._offer(sub, event) and sub in self._subscribers:
                sub.behind_since = seq
                sub.missed += 1
        return seq

    def catch_up(self) -> None:
        """Tell the subscribers that are behind to resync, if their queue has room now
        (called on the view's periodic tick: a quiet session still resyncs them)."""
        for sub in list(self._subscribers):
            if sub.behind_since is not None and self._offer(sub, LiveResync(sub.req_id, self.seq)):
                sub.behind_since = None

    def _offer(self, sub: Subscriber, message: LiveEvent | LiveResync) -> bool:
        def failed_later(exc: BaseException) -> None:
            if isinstance(exc, zmq.Again):
                if sub.behind_since is None:
                    sub.behind_since = message.seq
                sub.missed += 1
            else:
                self.drop(sub, f"unreachable ({exc})")

        try:
            self._send(sub.identity, self._encoder.encode(message), failed_later)
        except zmq.Again:
            return False
        except zmq.ZMQError as exc:  # EHOSTUNREACH: its socket is gone
            self.drop(sub, f"unreachable ({exc})")
            return False
        return True
