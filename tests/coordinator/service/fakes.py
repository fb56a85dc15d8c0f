"""Small stand-ins for the parts of the service a unit under test depends on
(``coordinator/service/ports.py``), and the real parts that are cheap: a scripted model
server on loopback, a project directory, overlay directories under a private temp dir.

No test here starts a worker process: ``Workers`` hands out handles with no process
behind them, keeps the jobs it is sent, and delivers worker events through
``on_event``/``on_death`` the way the pool does (tests wire the real
``WorkerEventRouter`` there).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from coordinator.scripted_model import ScriptedModelServer
from coordinator.service.pool import WorkerHandle
from protocol.approval import ApprovalMode
from protocol.chat import CacheSafeSnapshot, Message, ToolResult, ToolSpec
from protocol.control import ControlReply, JobKind, WorkerInfo, WorkerState
from protocol.model import ModelClient
from protocol.work import LayerStatus, RunTool, ToolDone, WorkerEvent, WorkerJob

T = TypeVar("T")

TOOLS = (
    ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}}),
    ToolSpec("write_file", "Write a file.", {"type": "object", "properties": {}}),
    ToolSpec("run_shell_command", "Run a command.", {"type": "object", "properties": {}}),
)


def run(coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
    """Run ``coro`` in a fresh event loop, bounded: a hang fails the test."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait (polling the loop) until ``condition()`` holds."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)


# -- replies -----------------------------------------------------------------------------


class Replies:
    """A ``ReplySink`` that keeps every reply it is sent, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, ControlReply]] = []

    async def send(self, identity: bytes, reply: ControlReply) -> None:
        self.sent.append((identity, reply))

    @property
    def replies(self) -> list[ControlReply]:
        return [reply for _, reply in self.sent]

    def of(self, kind: type[T]) -> list[T]:
        return [reply for reply in self.replies if isinstance(reply, kind)]


# -- workers -----------------------------------------------------------------------------

EventHandler = Callable[[WorkerHandle, WorkerEvent], Awaitable[None]]
DeathHandler = Callable[[WorkerHandle], Awaitable[None]]
ToolAnswer = Callable[[RunTool], Awaitable[ToolDone | None]]


async def echo_tool(job: RunTool) -> ToolDone:
    """A worker that runs every tool call and says so."""
    return ToolDone(
        job.job_id, job.epoch, ToolResult(job.call.id, job.call.name, f"{job.call.name} ran")
    )


class Workers:
    """The pool as the chat, the speculation manager and the commands see it
    (``ChatWorkers``, ``WorkerJobs``, ``PoolView``). A ``RunTool`` job is answered by
    ``answer`` (None: the test answers it itself), delivered through ``on_event``."""

    epoch = 7

    def __init__(self, answer: ToolAnswer | None = echo_tool, tools: tuple[ToolSpec, ...] = TOOLS):
        self.answer = answer
        self.tool_specs = tools
        self.tools_ready = asyncio.Event()
        self.tools_ready.set()
        self.sandbox: Any = "none"
        self.containment: tuple[LayerStatus, ...] = ()
        self.on_event: EventHandler | None = None
        self.on_death: DeathHandler | None = None
        self.jobs: list[tuple[WorkerHandle, WorkerJob]] = []
        self.released: list[WorkerHandle] = []
        self.killed: list[tuple[WorkerHandle, str]] = []
        self.live: dict[int, WorkerHandle] = {}
        self.fail_acquire: Exception | None = None
        self._pids = itertools.count(4_000_001)
        self._tasks: set[asyncio.Task[None]] = set()

    # WorkerJobs
    async def acquire(
        self, kind: JobKind, job_id: str, overlay_dir: str | None = None
    ) -> WorkerHandle:
        if self.fail_acquire is not None:
            raise self.fail_acquire
        handle = WorkerHandle(pid=next(self._pids), process=None, started_at=time.monotonic())
        handle.state = WorkerState.BUSY
        handle.job_id, handle.job_kind, handle.overlay_dir = job_id, kind, overlay_dir
        self.live[handle.pid] = handle
        return handle

    async def send(self, handle: WorkerHandle, job: WorkerJob) -> None:
        self.jobs.append((handle, job))
        if isinstance(job, RunTool) and self.answer is not None:
            task = asyncio.ensure_future(self._answer(handle, job, self.answer))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _answer(self, handle: WorkerHandle, job: RunTool, answer: ToolAnswer) -> None:
        event = await answer(job)
        if event is not None and handle.state is not WorkerState.DEAD:
            await self.deliver(handle, event)

    def release(self, handle: WorkerHandle) -> None:
        self.released.append(handle)
        handle.state = WorkerState.IDLE
        handle.job_id = handle.job_kind = handle.overlay_dir = None

    def mark_stopping(self, handle: WorkerHandle) -> None:
        if handle.state is not WorkerState.DEAD:
            handle.state = WorkerState.STOPPING

    async def kill(self, handle: WorkerHandle, reason: str) -> float:
        self.killed.append((handle, reason))
        await self.die(handle)
        return 0.0

    # ToolRegistry
    async def wait_tools(self, timeout_s: float = 30.0) -> tuple[ToolSpec, ...]:
        await self.tools_ready.wait()
        return self.tool_specs

    # PoolView
    def infos(self) -> list[WorkerInfo]:
        return [h.info() for h in self.live.values()]

    def is_warm(self) -> bool:
        return True

    def handles(self) -> list[WorkerHandle]:
        return list(self.live.values())

    def find(self, pid: int) -> WorkerHandle | None:
        return self.live.get(pid)

    # what a worker does
    async def deliver(self, handle: WorkerHandle, event: WorkerEvent) -> None:
        """A frame from ``handle``'s worker, as the pool passes it on."""
        assert self.on_event is not None, "wire on_event (a WorkerEventRouter) first"
        await self.on_event(handle, event)

    async def die(self, handle: WorkerHandle) -> None:
        """``handle``'s worker exits; the pool notices and says so once."""
        if handle.state is WorkerState.DEAD:
            return
        handle.state = WorkerState.DEAD
        self.live.pop(handle.pid, None)
        if self.on_death is not None:
            await self.on_death(handle)

    def jobs_of(self, kind: type[T]) -> list[tuple[WorkerHandle, T]]:
        return [(h, j) for h, j in self.jobs if isinstance(j, kind)]


# -- real parts ----------------------------------------------------------------------------


@contextmanager
def scripted(*rules: dict[str, Any], **scenario: Any) -> Iterator[ScriptedModelServer]:
    """The scripted model on loopback with ``rules``, then a plain default answer."""
    body = {"name": "unit", "chunk_ms": 0, **scenario}
    body["rules"] = [*rules, {"default": {"text": "ok"}}]
    with ScriptedModelServer(body) as server:
        yield server


def client(server: ScriptedModelServer) -> ModelClient:
    return ModelClient(server.base_url, max_retries=0, timeout_s=10.0)


def requests_of(server: ScriptedModelServer, purpose: str) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["purpose"] == purpose]


class Chat:
    """The main chat as the speculation manager sees it (``ForkSource``): a snapshot to
    fork from, its one-turn-at-a-time slot (a real lock a test can hold), and the
    accepted speculations' messages, kept."""

    def __init__(self, model_turns: int = 2) -> None:
        history = (Message.user("fix add"), Message.assistant("Fixed `add` in src/calc.py."))
        self.snapshot: CacheSafeSnapshot | None = CacheSafeSnapshot(
            system="You are a coding assistant.",
            tools=TOOLS,
            history=history,
            model="scripted",
            version=1,
        )
        self.fast_model = "fast"
        self.approval_mode = ApprovalMode.AUTO_EDIT
        self.turns = model_turns
        self.busy = False  # no main turn runs
        self.extended: list[list[Message]] = []
        self.slot = asyncio.Lock()

    def model_turns(self) -> int:
        return self.turns

    def turn_slot(self) -> asyncio.Lock:
        return self.slot

    async def extend_from_speculation(self, messages: list[Message]) -> None:
        self.extended.append(messages)
