"""The coordinator service: one per project.

It owns the control socket (CLI clients), the worker pool, the model endpoint
(the embedded scripted model when none is configured), the main chat session
and the speculation manager, and it guarantees a clean exit: every worker
killed and reaped, every overlay removed, the pidfile and sockets gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import io
import logging
import os
import secrets
import signal
import stat
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import zmq
import zmq.asyncio

import overlay
from coordinator.pidfile import PidFile
from coordinator.service.pool import WORKER_MODULES, WorkerPool
from coordinator.settings import Settings
from coordinator.user_state import journal_dir
from overlay.kernel import libc
from protocol.wire import codec
from protocol.wire.control import ControlReply, ControlRequest, ErrorReply
from protocol.wire.endpoints import Endpoints, make_router
from protocol.wire.seams import NO_SEAMS, WorkerSeams
from protocol.wire.start_notes import ANSWERING, POOL_WARM, READY_FD_ENV

if TYPE_CHECKING:
    # Imported for real before the fork server is launched (``SHARED_WITH_FORK_SERVER``).
    from coordinator.scripted_model import ScriptedModelServer
    from coordinator.service.chat import MainChat
    from coordinator.service.live import LiveHub, LiveState
    from coordinator.service.pool import WorkerHandle
    from coordinator.service.routing import WorkerEventRouter
    from coordinator.service.session import Session
    from coordinator.service.speculation import SpeculationManager
    from coordinator.service.undo import Rewinder
    from protocol.wire.work import WorkerEvent

log = logging.getLogger("specrun.service")

DEFAULT_SCENARIO = Path(__file__).parent.parent / "scenarios" / "demo.yaml"

SHARED_WITH_FORK_SERVER = (
    # what ``_start`` uses: the chat, its memory recall, the model client
    "coordinator.service.commands",
    "coordinator.service.chat",
    "coordinator.service.live",
    "coordinator.service.model_endpoint",
    "coordinator.service.routing",
    "coordinator.service.session",
    "coordinator.service.speculation",
    "coordinator.service.undo",
    "coordinator.scripted_model.server",
    # httpx's transport, imported when the first client is made; workers use it too
    "httpcore",
    "h11",
    "anyio._backends._asyncio",
    "multiprocess.popen_forkserver",  # the pool's first worker start
    # what the workers run (the fork server's preload, but for its sandbox probe)
    *WORKER_MODULES,
)
"""Modules this process imports before it forks the fork server (``fork_server``): their
pages are then shared by it, the fork server and every worker and sandbox helper, instead
of each importing (or, importing in the fork server, writing to) a copy of its own."""


def _log_tasks() -> None:
    for task in asyncio.all_tasks():
        buffer = io.StringIO()
        task.print_stack(file=buffer)
        log.warning("task %s:\n%s", task.get_name(), buffer.getvalue())


def _ready_pipe() -> int | None:
    """The pipe on which ``start_daemon`` waits for this service's start (see
    ``coordinator.cli.daemon``), taken out of the environment so that no process started
    from here sees it; None in the foreground or when it is not a pipe."""
    value = os.environ.pop(READY_FD_ENV, None)
    try:
        fd = int(value or "")
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None
        os.set_inheritable(fd, False)
    except (ValueError, OSError):
        return None
    return fd


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a directory, or None if nothing is there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class Service:
    def __init__(
        self,
        project_root: Path,
        settings: Settings,
        *,
        heartbeat_s: float | None = None,
        worker_seams: WorkerSeams = NO_SEAMS,
    ) -> None:
        """``worker_seams``: what a test builds into every worker (``protocol.wire.seams``);
        only code that constructs the service passes any, never a command or a setting."""
        if heartbeat_s is None:
            heartbeat_s = settings.heartbeat_ms / 1000
        self.project_root = project_root.resolve()
        self.settings = settings
        self.epoch = secrets.randbits(62) | 1
        self.endpoints = Endpoints.for_project(self.project_root)
        self.started_at = time.monotonic()
        self.heartbeat_s = heartbeat_s
        self.stop_requested = asyncio.Event()
        self.pool = WorkerPool(
            self.endpoints.workers,
            self.epoch,
            size=settings.worker_pool,
            heartbeat_s=heartbeat_s,
            hang_after_s=max(settings.hang_after_ms / 1000, heartbeat_s * 3),
            project_root=str(self.project_root),
            seams=worker_seams,
            on_event=self._worker_event,
            on_death=self._worker_death,
        )
        self.model_server: ScriptedModelServer | None = None  # the embedded model, if used
        self.base_url = ""
        self._chat: MainChat | None = None
        self._speculation: SpeculationManager | None = None
        self._session: Session | None = None
        self._undo: Rewinder | None = None
        self._ctx = zmq.asyncio.Context()
        self._control: zmq.asyncio.Socket | None = None
        self._replies = codec.coordinator_to_client()
        self._requests = codec.client_to_coordinator()
        self._pidfile = PidFile(self.endpoints.pidfile)
        self._tasks: set[asyncio.Task[object]] = set()
        self._project_id: tuple[int, int] | None = None
        self._router: WorkerEventRouter | None = None
        self._live: LiveState | None = None

    # -- lifecycle -------------------------------------------------------------

    async def run(self) -> None:
        # A peer that hangs up (an HTTP client, a socket) must be an EPIPE error, never a
        # signal that kills the service: the CLI restores SIGPIPE's default for `| head`.
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        # Before anything is started: a stop asked for during start-up still shuts down
        # cleanly (the fork server's temp directory removed, the pidfile released).
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop_requested.set)
        loop.add_signal_handler(signal.SIGUSR1, _log_tasks)  # `kill -USR1 PID`: where is it stuck?
        ready = _ready_pipe()
        self._pidfile.acquire()
        try:
            # Imported before the fork server is forked from this process, so that it and
            # every worker share these pages with us instead of importing their own copy.
            for name in SHARED_WITH_FORK_SERVER:
                importlib.import_module(name)
            self._prepare()
            # Then, before the set-up below: the fork server's own preload (the worker's
            # modules, the sandbox probe) runs beside it, on another core.
            self.pool.start_fork_server()
            await self._start()
            if ready is not None:
                self._spawn(self._tell_started(ready))
                ready = None
            log.info("serving %s (pid %d, epoch %d)", self.project_root, os.getpid(), self.epoch)
            await self.stop_requested.wait()
        finally:
            if ready is not None:
                os.close(ready)
            await self._shutdown()

    async def _tell_started(self, ready: int) -> None:
        """Tell ``start_daemon`` that the control socket answers, then that the pool is
        warm. A starter that stopped listening is no error (EPIPE: SIGPIPE is ignored)."""
        try:
            os.write(ready, ANSWERING)
            await self.pool.wait_warm()
            os.write(ready, POOL_WARM)
        except OSError:
            pass
        finally:
            os.close(ready)

    def _prepare(self) -> None:
        """The set-up that starts no thread nor socket, done before the fork server is
        forked: what it writes (the scenario's parse, the model client's set-up, the
        leftovers' sweep, the chat's and the speculation manager's objects) is written
        once and shared, where after the fork each page written would become a copy of
        this process's own (``scripts/bench.py --only idle``: 4.6 MB of an idle
        service's memory, measured)."""
        # Imported already (``SHARED_WITH_FORK_SERVER``): named here for their use.
        from coordinator.service.chat import MainChat
        from coordinator.service.commands import CommandPort, status_reply
        from coordinator.service.live import LiveState
        from coordinator.service.model_endpoint import prepare_model_endpoint
        from coordinator.service.routing import WorkerEventRouter
        from coordinator.service.session import Session
        from coordinator.service.speculation import Budget, CostLedger, SpeculationManager
        from coordinator.service.undo import Rewinder

        self._project_id = _identity(self.project_root)
        # A crash mid-apply or a killed predecessor may have left state behind.
        # Journals live in specrun's state directory: one a repository ships in
        # .specrun/journal is never read, so it cannot rename or delete anything.
        journals = str(journal_dir(self.project_root))
        recovered = overlay.recover(self.project_root, journal_dir=journals)
        if recovered is not None:
            log.warning("finished an interrupted apply: %s", recovered)
        for removed in overlay.sweep(overlay.speculation_base_dir()):
            log.info("removed leftover overlay %s", removed)
        # Every model request the service makes (main turns, suggestions, recall) is
        # counted here by its client; the workers' requests by the speculation manager.
        settings = self.settings
        cost = CostLedger(Budget(settings.speculation_budget, settings.speculation_budget_window))
        self.model_server, self.base_url, model_client = prepare_model_endpoint(
            settings, self.project_root, DEFAULT_SCENARIO, on_usage=cost.count
        )
        self._chat = chat = MainChat(self.project_root, settings, self.pool, model_client)
        self._speculation = speculation = SpeculationManager(
            self.project_root,
            settings,
            self.pool,
            chat,
            model_client,
            base_url=self.base_url,
            cost=cost,
        )
        self._session = Session(chat, speculation, settings)
        speculation.acceptor.checkpoints = chat.checkpoints  # each accept is a checkpoint
        self._undo = Rewinder(chat.checkpoints, chat, speculation)
        self._commands = CommandPort(self)
        # A worker's events go to whoever gave it its job: the chat's tool calls to the
        # chat, speculations to the speculation manager.
        self._router = WorkerEventRouter({"tool": chat, "speculation": speculation})
        self._live = LiveState(
            self._send_nowait,
            self.project_root,
            chat,
            speculation,
            self.pool,
            lambda req_id: status_reply(self, req_id),
        )

    # The pool's ``on_event`` and ``on_death`` (given at its construction): no worker
    # starts before ``_prepare`` made the router and the live view (``_start`` starts them).

    async def _worker_event(self, handle: WorkerHandle, event: WorkerEvent) -> None:
        if self._router is not None:
            await self._router.on_event(handle, event)
        if self._live is not None:
            self._live.worker_event(handle, event)  # after: the manager has taken it in

    async def _worker_death(self, handle: WorkerHandle) -> None:
        if self._router is not None:
            await self._router.on_death(handle)

    async def _start(self) -> None:
        if self.model_server is not None:
            self.model_server.start()  # bound already: this only starts its thread
        # Answer clients at once; the warm workers come up meanwhile (~0.3 s): a restart
        # is serving again that much sooner, and a job arriving first starts its own.
        await self.pool.start(wait_warm=False)
        self._control = make_router(self._ctx, self.endpoints.control)
        self._spawn(self._control_loop())
        self._spawn(self._sweep_periodically())
        self._spawn(self._watch_project())
        self._spawn(self._trim_once_warm())
        if self.model_server is None:
            # Before the first turn, so `specrun status` shows the endpoint's window (a
            # llama.cpp slot's, an Ollama model's) and not the default guess.
            self._spawn(self.chat.compactor.resolve_window())

    async def _trim_once_warm(self) -> None:
        """Once the start is over (the imports above, the pool warm), give the C heap's
        freed pages back: about 1.5 MB of an idle service's memory, measured."""
        await self.pool.wait_warm()
        gc.collect()
        libc.malloc_trim()

    async def _shutdown(self) -> None:
        log.info("stopping")
        if self._live is not None:
            self._live.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._speculation is not None:
            await self._speculation.shutdown()
        if self._chat is not None:
            await self._chat.shutdown()
        await self.pool.close()
        for removed in overlay.sweep(overlay.speculation_base_dir()):
            log.info("removed overlay %s", removed)
        if self._chat is not None:
            await self._chat.model.aclose()
        if self.model_server is not None:
            await asyncio.to_thread(self.model_server.stop)
        if self._control is not None:
            self._control.close(linger=0)
        self._ctx.term()
        for path in self.endpoints.socket_paths():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self._pidfile.release()
        with contextlib.suppress(OSError):
            self.endpoints.directory.rmdir()
        log.info("stopped")

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _sweep_periodically(self) -> None:
        while True:
            await asyncio.sleep(60)
            await asyncio.to_thread(overlay.sweep, overlay.speculation_base_dir())

    async def _watch_project(self, interval_s: float = 1.0) -> None:
        """A project directory that is deleted or moved away ends the service: nobody can
        reach it any more (the CLI finds services by project path), so it would run
        forever. One stat a second costs nothing."""
        while True:
            await asyncio.sleep(interval_s)
            if _identity(self.project_root) != self._project_id:
                log.warning(
                    "the project directory %s was deleted or moved; stopping", self.project_root
                )
                self.stop_requested.set()
                return

    @property
    def uptime_s(self) -> float:
        return time.monotonic() - self.started_at

    @property
    def scripted_model(self) -> bool:
        """The model is the embedded scripted one (no endpoint is configured)."""
        return self.model_server is not None

    # The chat, the speculation manager and the session exist once the service has started; the
    # control socket, which is all that uses them, opens only after that.

    @property
    def chat(self) -> MainChat:
        if self._chat is None:
            raise RuntimeError("the service has not started: there is no chat yet")
        return self._chat

    @property
    def session(self) -> Session:
        if self._session is None:
            raise RuntimeError("the service has not started: there is no session yet")
        return self._session

    @property
    def undo(self) -> Rewinder:
        if self._undo is None:
            raise RuntimeError("the service has not started: there is no undo yet")
        return self._undo

    @property
    def live_hub(self) -> LiveHub:
        """The live view's subscribers (`specrun web`) and what they are told."""
        return self.live.hub

    @property
    def live(self) -> LiveState:
        if self._live is None:
            raise RuntimeError("the service has not started: there is no live view yet")
        return self._live

    @property
    def speculation(self) -> SpeculationManager:
        if self._speculation is None:
            raise RuntimeError("the service has not started: there is no speculation manager")
        return self._speculation

    # -- control socket --------------------------------------------------------

    async def _control_loop(self) -> None:
        assert self._control is not None
        while True:
            parts = await self._control.recv_multipart()
            if len(parts) != 2:
                # A request is one frame; the client still gets an answer it can match.
                log.warning("a control message with %d frames", len(parts) - 1)
                req_id = codec.peek_req_id(parts[1]) if len(parts) > 1 else None
                problem = f"A request is one frame; this message had {len(parts) - 1}."
                await self.send(parts[0], ErrorReply(req_id or 0, "bad_request", problem))
                continue
            identity, frame = parts
            try:
                request = self._requests.decode(frame)
            except codec.ProtocolError as exc:
                req_id = codec.peek_req_id(frame) or 0
                await self.send(identity, ErrorReply(req_id, "bad_request", f"{exc}."))
                continue
            self._spawn(self._handle(identity, request))

    async def _handle(self, identity: bytes, request: ControlRequest) -> None:
        from coordinator.service.commands import dispatch  # loaded in _prepare

        if self._live is not None:
            self._live.request(identity, request)
        try:
            await dispatch(self._commands, identity, request)
        except Exception as exc:  # one failed request must never take the service down
            log.exception("request %s failed", type(request).__name__)
            await self.send(
                identity,
                ErrorReply(
                    request.req_id, "internal", f"internal error: {exc}; see the service log."
                ),
            )

    async def send(self, identity: bytes, reply: ControlReply) -> None:
        """Send a reply; a client that went away is not an error worth more than a log line."""
        if self._control is None:
            return
        if self._live is not None:
            self._live.turn_event(identity, reply)
        try:
            await self._control.send_multipart([identity, self._replies.encode(reply)])
        except zmq.ZMQError as exc:
            log.info("client %r is gone (%s); dropping %s", identity, exc, type(reply).__name__)

    def _send_nowait(
        self, identity: bytes, frame: bytes, failed: Callable[[BaseException], None]
    ) -> None:
        """Send a frame to one client without waiting: raise at once if it cannot go
        (``zmq.Again``: that client's queue is full; EHOSTUNREACH: it is gone). Only when
        another reply is already waiting for room on the socket does this one queue
        behind it; ``failed`` then hears of a failure later."""
        if self._control is None:
            raise zmq.ZMQError(zmq.ENOTSOCK, "the control socket is closed")
        # The asyncio socket's own non-blocking send: it also re-checks the socket for
        # incoming requests afterwards (a send on the bare socket can swallow the edge
        # that would wake the control loop's receive).
        sent = cast(
            "asyncio.Future[object]",
            self._control.send_multipart([identity, frame], flags=zmq.NOBLOCK),
        )
        if sent.done():
            error = sent.exception()
            if error is not None:
                raise error
            return

        def settled(done: asyncio.Future[object]) -> None:
            error = None if done.cancelled() else done.exception()
            if error is not None:
                failed(error)

        sent.add_done_callback(settled)
