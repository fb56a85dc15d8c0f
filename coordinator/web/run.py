"""The web view process: bind a loopback port, connect to the service, serve the page
until the service stops (or Ctrl-C / SIGTERM).

Why a process of its own rather than a server inside the service: the service's event
loop runs every turn, and nothing a browser does (a slow connection, a stalled tab, a
flood of requests, HTTP parsing) should ever take time from it. The service only numbers
each event, encodes it once and offers it to this process without waiting; this process
does the HTTP, the JSON and the per-browser queues. The service also stays as small as it
was: it loads no HTTP server, and a service nobody watches pays nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import uvicorn

from coordinator.web.app import SERVICE_STOPPED, build_app
from coordinator.web.fanout import Fanout
from coordinator.web.guard import Guard
from coordinator.web.link import ServiceLink
from coordinator.web.shown import shown_json
from coordinator.web.streamed_reply import StreamedReplies
from protocol.wire.control import LiveEvent, LiveResync

log = logging.getLogger("specrun.web")
HOST = "127.0.0.1"
CLOSE_WAIT_S = 1.0  # for the open pages to be told the service stopped


class PortInUse(RuntimeError):
    pass


def bind(port: int) -> socket.socket:
    """A listening loopback socket (port 0: a free one the kernel picks)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        raise PortInUse(f"Cannot listen on {HOST}:{port} ({exc.strerror}); pick another "
                        "port, or leave it out for a free one.") from None
    sock.set_inheritable(False)
    return sock


VIEW_STOPPED = "this web view was stopped: `specrun web` prints a new URL"


class _Server(uvicorn.Server):
    """uvicorn's server, telling the open pages before it stops on Ctrl-C or SIGTERM: their
    streams then end by themselves instead of being cancelled (a traceback in the
    terminal, and a page that keeps retrying)."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.on_exit()
        super().handle_exit(sig, frame)


async def _streams_ended(fanout: Fanout, timeout_s: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while fanout.viewers and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)


def view_url(port: int, token: str) -> str:
    return f"http://{HOST}:{port}/?token={token}"


async def serve(project_root: Path, port: int, announce: Callable[[str], None],
                verbose: bool = False) -> bool:
    """Serve until the service stops (True) or the view is stopped (False). ``verbose``:
    the page shows the internals too (``specrun --verbose web``)."""
    # A browser that hangs up mid-answer must be an EPIPE error on that connection, never
    # a signal that ends the view (the CLI restores SIGPIPE's default for `| head`).
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    link = ServiceLink(project_root)
    listener = bind(port)
    actual = listener.getsockname()[1]
    token = secrets.token_urlsafe(32)
    fanout = Fanout()
    replies = StreamedReplies()  # rendered once here, whatever the number of pages

    def on_live(message: LiveEvent | LiveResync) -> None:
        if isinstance(message, LiveResync):
            replies.forget()
            fanout.resync_all()
            return
        change = message.change
        fanout.publish(message.seq, shown_json(change, replies.fields_for(change)))

    link.on_live = on_live
    app = Guard(build_app(link, fanout, verbose), token, actual)
    # Every client is 127.0.0.1, which uvicorn trusts by default to rewrite the scheme and
    # the client address from X-Forwarded-* headers: no proxy stands here, so none is
    # trusted. Nor does the answer name the server.
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1,
        proxy_headers=False, server_header=False,
    )
    server = _Server(config, lambda: fanout.close_all(VIEW_STOPPED))
    reading = asyncio.ensure_future(link.run())
    try:
        await link.subscribe()
        announce(view_url(actual, token))

        async def stop_with_service() -> None:
            await link.closed.wait()
            # The open pages are told first and their streams end by themselves; then
            # the server stops with nothing left to cut off.
            fanout.close_all(SERVICE_STOPPED)
            await _streams_ended(fanout, CLOSE_WAIT_S)
            server.should_exit = True

        watcher = asyncio.ensure_future(stop_with_service())
        try:
            await server.serve(sockets=[listener])
        finally:
            watcher.cancel()
        return link.closed.is_set()
    finally:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
        link.close()
        listener.close()
