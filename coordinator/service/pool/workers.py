"""The warm pool of worker processes.

Workers come from a ``multiprocess`` fork server with the worker modules
preloaded, never from a fork of this (asyncio + ZeroMQ) process once it runs threads
(the fork server itself is forked from it before that: ``fork_server``). The pool keeps
``size`` idle workers ready so a speculation starts in milliseconds, notices a
death at once through a pidfd on each worker, notices a hang through missed
heartbeats, and replaces lost or finished workers in the background.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import shutil
import signal
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import multiprocess
import multiprocess.resource_tracker
import multiprocess.spawn
import multiprocess.util
import psutil
import zmq
import zmq.asyncio

import overlay
from coordinator.service.pool import fork_server
from coordinator.service.pool.cpu import CpuSample, cpu_sample, starved
from coordinator.service.pool.kill import kill_tree
from overlay.kernel import libc
from protocol.wire import codec
from protocol.wire.chat import ToolSpec
from protocol.wire.control import JobKind, WorkerInfo, WorkerSandbox, WorkerState
from protocol.wire.endpoints import make_router
from protocol.wire.seams import NO_SEAMS, WorkerSeams
from protocol.wire.work import (
    PROJECT_ROOT_ENV,
    Heartbeat,
    Hello,
    LayerStatus,
    WorkerEvent,
    WorkerJob,
)

log = logging.getLogger("specrun.pool")

WORKER_MODULES = (
    "protocol.model.without_httpx_cli",  # before anything loads httpx
    "worker.process",
    "worker.jobs",
    "overlay",
    "worker.contain.helper",
    "protocol.wire.codec",
    "zmq.asyncio",
    "httpx",
    "httpcore",
    "h11",
    "anyio._backends._asyncio",
    "protocol.model",
    "worker.speculation",
    "worker.tools",
    "worker.gate",
    "worker.shell",
    "bashlex",
)
"""What a worker runs. The service imports them before it forks its fork server
(``coordinator.service.service``), so that the fork server, every worker and every sandbox
helper share one copy of them with it: imported in the fork server instead, the import
itself writes to thousands of the service's pages (each module it binds a name of, each
type and function it references, has its reference count changed), and each page written
after a fork is a copy (3.3 MB of an idle service, ``scripts/bench.py --only idle``)."""

PRELOAD = [
    *WORKER_MODULES,  # imported already when the fork server is a fork of the service
    "worker.contain.preflight",  # importing it probes the sandbox, once per fork server
    "worker.preloaded",  # last: the project listed for git, the freed heap given back
]


def _without_main(
    get_preparation_data: Callable[[str], dict[str, Any]],
) -> Callable[[str], dict[str, Any]]:
    def prepare(name: str) -> dict[str, Any]:
        data = get_preparation_data(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    return prepare


# A worker's target lives in an importable module, so a child never needs the parent's
# __main__; by default multiprocess re-runs it in every child (pytest, a script, the CLI),
# which is slow at best and re-enters the caller's code at worst.
# The pool kills and reaps its workers itself, with timeouts. multiprocess's own exit
# handler would join every child without one, and a worker that is waiting for this very
# process to exit (its pidfd on the coordinator) would then hold the exit forever.
# Its finalizers still have to run: one removes the pymp-* temp directory that holds the
# fork server's socket, which would otherwise be left behind by every service.
def _finalize_without_joining() -> None:
    multiprocess.util._run_finalizers()


atexit.unregister(multiprocess.util._exit_function)
atexit.register(_finalize_without_joining)

if not getattr(multiprocess.spawn.get_preparation_data, "_specrun", False):
    multiprocess.spawn.get_preparation_data = _without_main(multiprocess.spawn.get_preparation_data)
    multiprocess.spawn.get_preparation_data._specrun = True


def _without_resource_tracker() -> None:
    """Keep ``multiprocess`` from starting its resource tracker (a whole interpreter, about
    10 MB) next to the fork server.

    The tracker only unlinks named semaphores and shared memory that a crashed process
    leaked; specrun creates neither (no multiprocess locks, queues or shared memory: workers
    talk over ZeroMQ). ``multiprocess`` starts it anyway, and hands its pipe to the fork
    server and every worker, unless a pipe is already there: give it ``/dev/null``. Its
    liveness probe then succeeds and a registration (there is none) would go nowhere."""
    tracker = multiprocess.resource_tracker._resource_tracker
    if tracker._fd is None:
        tracker._fd = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)


_without_resource_tracker()

_DEPARTED_S = 10.0
_MAX_EARLY_HELLOS = 16
# A silent worker's wait for a CPU does not count towards the hang limit (a branch at nice
# +10 on a busy machine is starved, not hung: ``cpu.starved``), up to this many hang limits
# of silence in all: a worker spinning where it should speak on a crowded CPU is caught too.
_STARVED_SILENCE_CAP = 10


@dataclass
class Silence:
    """A silent worker as the hang watch saw it: how much of its silence counts (what it
    was not starved of a CPU for), and its threads at the last check."""

    last_seen: float  # the frame this silence follows
    checked_at: float
    cpu: CpuSample | None
    counted_s: float
    starved_logged: bool = False


@dataclass(eq=False)
class WorkerHandle:
    pid: int
    process: Any
    started_at: float
    state: WorkerState = WorkerState.STARTING
    sandbox: WorkerSandbox = "unknown"
    containment: tuple[LayerStatus, ...] = ()
    job_id: str | None = None
    job_kind: JobKind | None = None
    overlay_dir: str | None = None
    last_seen: float = field(default_factory=time.monotonic)
    ready: asyncio.Future[None] | None = None
    dead: asyncio.Future[float] | None = None  # resolves to the monotonic time death was seen
    pidfd: int | None = None
    killed_at: float | None = None
    silence: Silence | None = None  # the hang watch's count since its last frame

    @property
    def identity(self) -> bytes:
        return f"w{self.pid}".encode()

    def info(self) -> WorkerInfo:
        try:
            rss: int | None = psutil.Process(self.pid).memory_info().rss
        except psutil.Error:
            rss = None
        return WorkerInfo(
            pid=self.pid,
            state=self.state,
            job_id=self.job_id,
            job_kind=self.job_kind,
            overlay_dir=self.overlay_dir,
            age_s=round(time.monotonic() - self.started_at, 3),
            rss_bytes=rss,
            sandbox=self.sandbox,
            containment=self.containment,
        )


EventHandler = Callable[[WorkerHandle, WorkerEvent], Awaitable[None] | None]
DeathHandler = Callable[[WorkerHandle], Awaitable[None] | None]


class WorkerStartError(RuntimeError):
    pass


class WorkerPool:
    def __init__(
        self,
        endpoint: str,
        epoch: int,
        *,
        size: int = 2,
        heartbeat_s: float = 1.0,
        hang_after_s: float = 5.0,
        start_timeout_s: float = 15.0,
        project_root: str | None = None,
        seams: WorkerSeams = NO_SEAMS,
        on_event: EventHandler | None = None,
        on_death: DeathHandler | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.project_root = project_root
        # what a test built into every worker (``protocol.wire.seams``): a start argument
        self.seams = seams
        self.epoch = epoch
        self.size = max(0, size)
        self.heartbeat_s = heartbeat_s
        self.hang_after_s = hang_after_s
        self.start_timeout_s = start_timeout_s
        # Where a worker's events and its death go (the service routes them to the part
        # whose job the worker runs); None: nowhere.
        self.on_event = on_event
        self.on_death = on_death
        self.sandbox: WorkerSandbox = "unknown"
        self.containment: tuple[LayerStatus, ...] = ()  # as the newest worker found it
        self.tool_specs: tuple[ToolSpec, ...] = ()  # from the first hello; fixed order
        self._tools_ready = asyncio.Event()
        self._warmed = asyncio.Event()  # set the first time the pool is warm
        self.deaths_detected: list[float] = []  # seconds from kill to detection, for stats
        self._workers: dict[int, WorkerHandle] = {}
        # Recently dead workers: their last frames can arrive just after the pidfd says
        # they exited, and still belong to a live speculation (its pipelined suggestion).
        self._departed: dict[int, WorkerHandle] = {}
        self._early_hellos: dict[int, Hello] = {}
        self._starting = 0  # process.start() calls in flight
        self._ctx = zmq.asyncio.Context()
        self._sock: zmq.asyncio.Socket | None = None
        self._jobs = codec.coordinator_to_worker()
        self._events = codec.worker_to_coordinator()
        self._mp = multiprocess.get_context("forkserver")
        self._mp.set_forkserver_preload(PRELOAD)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._refill_lock = asyncio.Lock()
        self._spawn_failures = 0

    # -- lifecycle -------------------------------------------------------------

    def start_fork_server(self) -> None:
        """Launch the fork server now instead of at the first worker start, and return at
        once. It imports the worker modules (``PRELOAD``) and probes the containment
        profile in its own process (about a second): started first, that overlaps what
        this process does next (the service's own imports and set-up) instead of
        following it. With ``project_root`` the fork server also lists the project's
        directories for the git hazard check (``worker.preloaded``)."""
        if self.project_root is not None:
            os.environ[PROJECT_ROOT_ENV] = self.project_root  # the fork server's environment
        fork_server.start(PRELOAD)  # a fork of this process while that is safe

    async def start(self, *, wait_warm: bool = True) -> None:
        """Bind the worker socket and start the warm workers; with ``wait_warm=False``
        they come up in the background (a job arriving first starts one of its own)."""
        self._sock = make_router(self._ctx, self.endpoint)
        self._spawn_task(self._receive_loop())
        self._spawn_task(self._watch_hangs())
        if self.is_warm():  # a pool of size 0
            self._warmed.set()
        if wait_warm:
            await self.refill()
        else:
            self.refill_soon()

    async def wait_tools(self, timeout_s: float = 30.0) -> tuple[ToolSpec, ...]:
        """The workers' tool registry, from the first hello (waits for one if needed)."""
        if not self.tool_specs:
            try:
                await asyncio.wait_for(self._tools_ready.wait(), timeout_s)
            except TimeoutError:
                raise WorkerStartError(
                    f"no worker process started within {timeout_s:.0f} s; see `specrun logs`"
                ) from None
        return self.tool_specs

    async def close(self) -> None:
        """Kill every worker and wait until each is reaped."""
        self._closing = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(self.kill(h, "shutdown") for h in list(self._workers.values())))
        if self._sock is not None:
            self._sock.close(linger=0)
        self._ctx.term()
        atexit.unregister(multiprocess.util._exit_function)  # re-registered by get_logger()

    def _spawn_task(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- spawning --------------------------------------------------------------

    async def wait_warm(self) -> None:
        """Return once the pool has been warm (``size`` idle workers), at least once."""
        await self._warmed.wait()

    def is_warm(self) -> bool:
        return _count_in(self._workers.values(), WorkerState.IDLE) >= self.size

    async def refill(self) -> None:
        """Start workers until ``size`` are idle or starting."""
        async with self._refill_lock:
            missing = self.size - _count_in(
                self._workers.values(), WorkerState.IDLE, WorkerState.STARTING
            )
            if missing <= 0 or self._closing:
                return
            results = await asyncio.gather(
                *(self._spawn() for _ in range(missing)), return_exceptions=True
            )
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            # A worker that cannot start will not start on a tight loop either: back off
            # (0.1 s doubling to 5 s) and say so once per streak, not once per try.
            if self._spawn_failures == 0:
                log.error("could not start a worker: %s", failures[0])
            self._spawn_failures += 1
            await asyncio.sleep(min(5.0, 0.1 * 2 ** min(self._spawn_failures, 6)))
        elif results:
            self._spawn_failures = 0

    def refill_soon(self) -> None:
        if not self._closing:
            self._spawn_task(self.refill())

    async def _spawn(self) -> WorkerHandle:
        from worker.process import worker_entry

        loop = asyncio.get_running_loop()
        process = self._mp.Process(
            target=worker_entry,
            args=(self.endpoint, self.epoch, os.getpid(), self.heartbeat_s, self.seams),
            daemon=False,
        )
        started = time.monotonic()
        self._starting += 1
        forking = asyncio.ensure_future(asyncio.to_thread(process.start))
        try:
            await asyncio.shield(forking)
        except asyncio.CancelledError:
            # The fork goes on in its thread regardless: wait for it, then undo it, or an
            # unknown worker would outlive the pool.
            with contextlib.suppress(BaseException):
                await forking
            if process.pid is not None:
                kill_tree(int(process.pid))
                await asyncio.to_thread(process.join, 5)
            raise
        finally:
            self._starting -= 1
        pid = int(process.pid)
        handle = WorkerHandle(pid=pid, process=process, started_at=started)
        if self._closing:  # the pool closed while this one was being forked
            kill_tree(pid)
            await asyncio.to_thread(process.join, 5)
            raise WorkerStartError("the pool is closing")
        handle.ready = loop.create_future()
        handle.dead = loop.create_future()
        self._workers[pid] = handle
        handle.pidfd = libc.pidfd_open(pid)
        if handle.pidfd is None:
            self._on_exit(handle)
        else:
            loop.add_reader(handle.pidfd, self._on_exit, handle)
        early = self._early_hellos.pop(pid, None)
        if early is not None:
            self._on_hello(handle, early)
        try:
            await asyncio.wait_for(asyncio.shield(handle.ready), self.start_timeout_s)
        except (TimeoutError, asyncio.CancelledError):
            await self.kill(handle, "no hello")
            raise WorkerStartError(f"worker {pid} did not say hello in time") from None
        return handle

    # -- jobs ------------------------------------------------------------------

    async def acquire(
        self, kind: JobKind, job_id: str, overlay_dir: str | None = None
    ) -> WorkerHandle:
        """An idle worker, now marked busy with ``job_id``; starts one if none is idle."""
        while True:
            idle = next((w for w in self._workers.values() if w.state is WorkerState.IDLE), None)
            if idle is None:
                handle = await self._spawn()
                if handle.state is not WorkerState.IDLE:
                    continue
                idle = handle
            idle.state = WorkerState.BUSY
            idle.job_id, idle.job_kind, idle.overlay_dir = job_id, kind, overlay_dir
            self.refill_soon()
            return idle

    async def send(self, handle: WorkerHandle, job: WorkerJob) -> None:
        assert self._sock is not None
        try:
            await self._sock.send_multipart([handle.identity, self._jobs.encode(job)])
        except zmq.ZMQError as exc:  # EHOSTUNREACH: the worker is gone
            raise WorkerStartError(f"worker {handle.pid} is unreachable: {exc}") from None

    def mark_stopping(self, handle: WorkerHandle) -> None:
        """Its job is over and the worker exits by itself (a speculation's worker after its
        final event and pipelined step); one whose exit was seen already stays dead."""
        if handle.state is not WorkerState.DEAD:
            handle.state = WorkerState.STOPPING

    def release(self, handle: WorkerHandle) -> None:
        """A tool job finished; the worker is reusable."""
        if handle.state is WorkerState.BUSY:
            handle.state = WorkerState.IDLE
            handle.job_id = handle.job_kind = handle.overlay_dir = None
            if self.is_warm():
                self._warmed.set()

    async def kill(self, handle: WorkerHandle, reason: str) -> float:
        """SIGKILL the worker and its tool processes; returns once it is reaped.
        Returns the seconds from the kill to the death being seen."""
        if handle.state is WorkerState.DEAD:
            return 0.0
        log.info("killing worker %s (%s)", handle.pid, reason)
        handle.state = WorkerState.STOPPING
        handle.killed_at = time.monotonic()
        kill_tree(handle.pid)
        assert handle.dead is not None
        try:
            seen = await asyncio.wait_for(asyncio.shield(handle.dead), 10.0)
        except TimeoutError:
            log.error("worker %s did not die after SIGKILL", handle.pid)
            return 10.0
        await asyncio.to_thread(handle.process.join, 5)  # reaped: no zombie left behind
        return seen - handle.killed_at

    def find(self, pid: int) -> WorkerHandle | None:
        return self._workers.get(pid)

    def infos(self) -> list[WorkerInfo]:
        return [w.info() for w in sorted(self._workers.values(), key=lambda w: w.started_at)]

    def handles(self) -> list[WorkerHandle]:
        return list(self._workers.values())

    # -- events ----------------------------------------------------------------

    async def _receive_loop(self) -> None:
        assert self._sock is not None
        while True:
            parts = await self._sock.recv_multipart()
            try:
                self._dispatch(parts)
            except Exception:  # a bad frame must never stop the loop
                log.exception("error handling a worker frame")

    def _dispatch(self, parts: list[bytes]) -> None:
        if len(parts) != 2:
            log.warning("dropping a worker frame with %d parts", len(parts))
            return
        identity, frame = parts
        try:
            event = self._events.decode(frame)
        except codec.ProtocolError as exc:
            log.warning("dropping a worker frame: %s", exc)
            return
        if event.epoch != self.epoch:
            log.info("dropping a %s from a previous coordinator", type(event).__name__)
            return
        pid = _pid_of(identity)
        handle = None
        if pid is not None:
            handle = self._workers.get(pid) or self._departed.get(pid)
        if isinstance(event, Hello):
            if handle is None and pid == event.pid and self._starting:
                # A hello can beat process.start() back to us; keep it only while a start
                # is in flight, and only a few, so junk hellos cannot pile up.
                while len(self._early_hellos) >= _MAX_EARLY_HELLOS:
                    self._early_hellos.pop(next(iter(self._early_hellos)))
                self._early_hellos[event.pid] = event
            elif handle is not None:
                self._on_hello(handle, event)
            return
        if handle is None:
            log.info("dropping a %s from unknown worker %r", type(event).__name__, identity)
            return
        handle.last_seen = time.monotonic()
        if isinstance(event, Heartbeat) or self.on_event is None:
            return
        result = self.on_event(handle, event)
        if asyncio.iscoroutine(result):
            self._spawn_task(result)

    def _on_hello(self, handle: WorkerHandle, hello: Hello) -> None:
        handle.sandbox = hello.sandbox
        self.sandbox = hello.sandbox
        handle.containment = hello.containment
        self.containment = hello.containment
        if hello.tools and not self.tool_specs:
            self.tool_specs = hello.tools
            self._tools_ready.set()
        handle.last_seen = time.monotonic()
        if handle.state is WorkerState.STARTING:
            handle.state = WorkerState.IDLE
        if handle.ready is not None and not handle.ready.done():
            handle.ready.set_result(None)
        if self.is_warm():
            self._warmed.set()

    def _on_exit(self, handle: WorkerHandle) -> None:
        seen = time.monotonic()
        loop = asyncio.get_running_loop()
        if handle.pidfd is not None:
            loop.remove_reader(handle.pidfd)
            os.close(handle.pidfd)
            handle.pidfd = None
        was = handle.state
        handle.state = WorkerState.DEAD
        self._workers.pop(handle.pid, None)
        self._departed[handle.pid] = handle
        asyncio.get_running_loop().call_later(_DEPARTED_S, self._departed.pop, handle.pid, None)
        if handle.killed_at is not None:
            self.deaths_detected.append(seen - handle.killed_at)
        # Reap: the fork server is the parent; join() collects the exit status it reports.
        self._spawn_task(self._reap(handle, None if was is WorkerState.STOPPING else was))
        _remove_scratch(handle.pid)
        if handle.ready is not None and not handle.ready.done():
            handle.ready.cancel()
        if handle.dead is not None and not handle.dead.done():
            handle.dead.set_result(seen)
        if self.on_death is not None:
            result = self.on_death(handle)
            if asyncio.iscoroutine(result):
                self._spawn_task(result)
        self.refill_soon()

    async def _reap(self, handle: WorkerHandle, unexpected: WorkerState | None) -> None:
        """Collect the exit status; a death the pool did not cause (``unexpected``: the
        state it was in) is logged with it: the signal says who ended it (SIGKILL a kill,
        SIGSYS a seccomp refusal, SIGXCPU a CPU limit)."""
        await asyncio.to_thread(handle.process.join, 5)
        if unexpected is None:
            return
        code = handle.process.exitcode
        if code is None:
            how = "exit status unknown"
        elif code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exit code {code}"
        # Exit code 0 while busy: a speculation's worker ends itself after its final event,
        # which can reach us after its exit does; anything else is a death.
        level = logging.INFO if code == 0 else logging.WARNING
        log.log(level, "worker %s exited (was %s; %s)", handle.pid, unexpected, how)

    async def _watch_hangs(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            now = time.monotonic()
            for handle in list(self._workers.values()):
                silent = now - handle.last_seen
                # STOPPING also covers a speculation's worker finishing its pipelined step on
                # its own; one the pool is already killing (killed_at set) is left alone.
                watched = handle.state in (WorkerState.IDLE, WorkerState.BUSY) or (
                    handle.state is WorkerState.STOPPING and handle.killed_at is None
                )
                if not watched or silent <= self.heartbeat_s:
                    continue
                counted = _counted_silence(handle, now)
                capped = silent > _STARVED_SILENCE_CAP * self.hang_after_s
                if counted > self.hang_after_s or capped:
                    log.warning(
                        "worker %s silent for %.1fs (%.1fs of it not waiting for a CPU): "
                        "treating it as hung",
                        handle.pid,
                        silent,
                        counted,
                    )
                    self._spawn_task(self.kill(handle, "hung"))
                elif (
                    silent > self.hang_after_s
                    and handle.silence is not None
                    and not handle.silence.starved_logged
                ):
                    handle.silence.starved_logged = True
                    log.info(
                        "worker %s silent for %.1fs while waiting for a CPU: starved, not hung",
                        handle.pid,
                        silent,
                    )


def _counted_silence(handle: WorkerHandle, now: float) -> float:
    """How much of the worker's silence counts towards the hang limit: all of it up to the
    first check that found it silent, then each interval between checks unless it was
    starved of a CPU through it (``cpu.starved``)."""
    sample = cpu_sample(handle.pid)
    silence = handle.silence
    if silence is None or silence.last_seen != handle.last_seen:
        handle.silence = Silence(handle.last_seen, now, sample, now - handle.last_seen)
        return handle.silence.counted_s
    interval = now - silence.checked_at
    if silence.cpu is None or sample is None or not starved(silence.cpu, sample, interval):
        silence.counted_s += interval
    silence.checked_at, silence.cpu = now, sample
    return silence.counted_s


def _count_in(workers: Iterable[WorkerHandle], *states: WorkerState) -> int:
    return sum(1 for w in workers if w.state in states)


def _remove_scratch(pid: int) -> None:
    """A dead worker's temp dir goes now; its overlay dirs stay until the speculation
    manager is done with them (an accept may be reading one) and it removes them."""
    own = overlay.speculation_base_dir() / str(pid)
    shutil.rmtree(own / "tmp", ignore_errors=True)
    shutil.rmtree(own / "sandbox", ignore_errors=True)  # its sandbox helper's mount point
    overlay.release_pid_dir(own)



def _pid_of(identity: bytes) -> int | None:
    if identity[:1] != b"w":
        return None
    try:
        return int(identity[1:])
    except ValueError:
        return None
