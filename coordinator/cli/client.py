"""The CLI's side of the control socket: a DEALER that sends requests and reads replies.

The DEALER is ``protocol.wire.zmtp``'s, in the standard library alone: pyzmq would cost
every CLI call about as much as the interpreter's start. The service's side is pyzmq's
ROUTER."""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from coordinator.pidfile import is_locked, read_pid
from protocol.wire import codec
from protocol.wire.control import ControlReply, ControlRequest, is_final
from protocol.wire.endpoints import Endpoints
from protocol.wire.zmtp import Dealer, ZmtpError

FOREVER = math.inf


class ServiceNotRunning(RuntimeError):
    def __init__(self, project_root: Path, stopped: bool = False) -> None:
        if stopped:
            text = (f"The specrun service for {project_root} stopped while answering; "
                    "see `specrun logs`, then `specrun start` it again.")
        else:
            text = (f"No specrun service is running for {project_root}; "
                    "start one with `specrun start`.")
        super().__init__(text)


class ServiceTimeout(RuntimeError):
    pass


class ServiceClient:
    def __init__(self, project_root: Path, timeout_s: float = 30.0) -> None:
        self.project_root = project_root
        self.endpoints = Endpoints.for_project(project_root, create=False)
        if not is_locked(self.endpoints.pidfile):
            raise ServiceNotRunning(project_root)
        self.pid = read_pid(self.endpoints.pidfile)
        self.timeout_s = timeout_s
        try:
            self._sock = Dealer(self.endpoints.control, connect_timeout_s=timeout_s)
        except (OSError, ZmtpError) as exc:
            if not is_locked(self.endpoints.pidfile):
                raise ServiceNotRunning(project_root) from None
            raise ServiceTimeout(
                f"Could not reach the specrun service for {project_root} ({exc}); check "
                "`specrun logs` or restart it with `specrun stop && specrun start`.") from None
        # Requests only need encoding, which needs no type information: the codec's
        # request direction would also build a decoder for every request type (about
        # 1.5 ms of each CLI call). The replies' decoder builds the types it meets only.
        self._requests = msgspec.msgpack.Encoder()
        self._replies = codec.coordinator_to_client()
        self._ids = itertools.count(int.from_bytes(os.urandom(2), "big") * 1000 + 1)
        self._buffered: dict[int, list[ControlReply]] = {}

    def next_id(self) -> int:
        return next(self._ids)

    def send(self, request: ControlRequest) -> None:
        try:
            self._sock.send(self._requests.encode(request))
        except OSError:
            raise ServiceNotRunning(self.project_root, stopped=True) from None

    def _receive(self, timeout_s: float | None) -> ControlReply:
        """The next reply. ``timeout_s`` None: wait as long as the service lives (checked
        every second), for turns whose model or tools take long. The service gone (its
        end of the connection closed) is ``ServiceNotRunning``."""
        try:
            return self._wait_reply(timeout_s)
        except (OSError, ZmtpError) as exc:
            if isinstance(exc, TimeoutError):
                raise
            raise ServiceNotRunning(self.project_root, stopped=True) from None

    def _wait_reply(self, timeout_s: float | None) -> ControlReply:
        if timeout_s is None:
            while not self._sock.poll(1000):
                if not is_locked(self.endpoints.pidfile):
                    raise ServiceNotRunning(self.project_root, stopped=True)
            return self._replies.decode(self._sock.recv())
        if not self._sock.poll(int(timeout_s * 1000)):
            raise ServiceTimeout(
                f"The specrun service did not answer within {timeout_s:.0f}s; "
                "check `specrun logs` or restart it with `specrun stop && specrun start`."
            )
        return self._replies.decode(self._sock.recv())

    def replies(self, req_id: int, timeout_s: float | None = None) -> Iterator[ControlReply]:
        """Replies to ``req_id`` until its final one; other requests' replies are kept.
        ``timeout_s``: per reply (default the client's); ``FOREVER``: while the service lives."""
        wait = self.timeout_s if timeout_s is None else timeout_s
        wait_or_none = None if wait == FOREVER else wait
        while True:
            queued = self._buffered.get(req_id)
            if queued:
                reply = queued.pop(0)
            else:
                reply = self._receive(wait_or_none)
                if reply.req_id != req_id:
                    self._buffered.setdefault(reply.req_id, []).append(reply)
                    continue
            yield reply
            if is_final(reply):
                self._buffered.pop(req_id, None)
                return

    def request(self, request: ControlRequest, timeout_s: float | None = None) -> ControlReply:
        self.send(request)
        *_, last = self.replies(request.req_id, timeout_s)
        return last

    def call(self, kind: Any, **fields: Any) -> ControlReply:
        return self.request(kind(req_id=self.next_id(), **fields))

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
