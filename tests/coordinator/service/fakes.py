"""Small stand-ins for the parts of the service a unit under test depends on
(``coordinator/service/ports.py``, and the chat and speculation manager the session
drives: ``coordinator/service/session.py``), and the real parts that are cheap: a scripted model
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
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from coordinator.scripted_model import ScriptedModelServer
from coordinator.service.chat.main_chat import TurnResult
from coordinator.service.chat.model_wait import ModelWait
from coordinator.service.emitter import Emitter
from coordinator.service.pool.workers import WorkerHandle
from coordinator.service.session import Session
from coordinator.service.speculation import AbortCause, BranchRun, Speculation, Suggestion
from coordinator.service.speculation.stats import Stats
from coordinator.settings import Settings
from protocol.model import ModelClient
from protocol.model.client import UsageCallback
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import CacheSafeSnapshot, Message, ToolCall, ToolResult, ToolSpec
from protocol.wire.control import (
    AcceptMethod,
    ContextInfo,
    ControlReply,
    DiffReply,
    JobKind,
    SpeculationStatus,
    StatsReply,
    SuggestionReply,
    TurnEnded,
    TurnEndReason,
    WorkerInfo,
    WorkerState,
)
from protocol.wire.work import LayerStatus, RunTool, ToolDone, WorkerEvent, WorkerJob

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

    # ChatWorkers
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


def client(server: ScriptedModelServer, on_usage: UsageCallback | None = None) -> ModelClient:
    return ModelClient(server.base_url, max_retries=0, timeout_s=10.0, on_usage=on_usage)


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

    def context_info(self) -> ContextInfo:
        return ContextInfo(window=32_768, window_source="default", tokens=500, compact_at=0.8,
                           compactions=0)

    def turn_slot(self) -> asyncio.Lock:
        return self.slot

    async def extend_from_speculation(self, messages: list[Message]) -> None:
        self.extended.append(messages)

    async def forkable(self) -> None:
        return None


# -- the main chat and the speculation manager as the session drives them ------------------


class SessionChat:
    """The main chat (``MainChat``) as the session and the command port drive it: it
    notes what it is asked in ``log`` and answers as the test set it up."""

    model_name = "main-model"
    fast_model = "fast-model"
    approval_mode = ApprovalMode.DEFAULT

    def __init__(self, log: list[Any]) -> None:
        self.log = log
        self.session_id = "session-1"
        self.busy = False
        self.waiting: ToolCall | None = None
        self.result = TurnResult("completed", "all done")
        self.turns: list[dict[str, Any]] = []
        self.cancels: list[int | None] = []
        self.answers: list[tuple[int, str, bool]] = []
        self.answer_found = True

    def pending_approval(self) -> ToolCall | None:
        return self.waiting

    def set_approval_mode(self, mode: ApprovalMode) -> None:
        self.approval_mode = mode

    async def run_turn(
        self,
        out: Emitter,
        text: str,
        mode: ApprovalMode | None = None,
        can_confirm: bool = False,
        *,
        client_pid: int | None = None,
        from_accept: bool = False,
    ) -> TurnResult:
        self.log.append("run_turn")
        self.turns.append(
            {
                "req_id": out.req_id,
                "text": text,
                "mode": mode,
                "can_confirm": can_confirm,
                "client_pid": client_pid,
                "from_accept": from_accept,
            }
        )
        await out.text("the answer")
        return self.result

    def cancel(self, ask_req_id: int | None = None) -> bool:
        self.cancels.append(ask_req_id)
        return ask_req_id == 7

    def answer_approval(self, ask_req_id: int, call_id: str, approved: bool,
                        remember: bool = False, reason: str = "") -> bool:
        self.answers.append((ask_req_id, call_id, approved))
        return self.answer_found

    def reset(self, keep: Sequence[Message] = ()) -> None:
        self.log.append("chat.reset")
        self.session_id = "session-2"

    compacted: str | None = "Compacted the conversation: 6 earlier messages summarized."
    context = ContextInfo(32768, "endpoint", 20000, 0.8, 1)

    async def compact_on_request(self, out: Emitter) -> str | None:
        self.log.append("chat.compact")
        return self.compacted

    def context_info(self) -> ContextInfo:
        return self.context

    model_wait = ModelWait()


class SessionSpeculation:
    """The speculation manager (``SpeculationManager``) as the session and the command
    port drive it: it notes what it is asked in ``log``, and ``accept`` returns
    ``accepting`` or raises it."""

    def __init__(self, log: list[Any], sent: Replies) -> None:
        self.log = log
        self.sent = sent
        self.current: Suggestion | None = None
        self.typed_branch: BranchRun | None = None  # what typed_match finds
        self.accepting: float | Exception = 1.5
        self.waiting_typed: set[int] = set()  # typed prompts waiting for their speculation
        self.stats = Stats()

    def offer(self, text: str, status: SpeculationStatus | None) -> None:
        spec = Speculation("spec-1", text, status=status) if status is not None else None
        self.current = Suggestion(text, speculation=spec)

    def cancel_generation(self) -> None:
        self.log.append("cancel_generation")

    def matches(self, text: str) -> bool:
        return self.current is not None and self.current.text == text.strip()

    def typed_match(self, text: str) -> BranchRun | None:
        return self.typed_branch

    async def typed(self, text: str) -> None:
        self.log.append(("typed", text))

    def cancel_accept(self, req_id: int | None = None) -> bool:
        self.log.append(("cancel_accept", req_id))
        return req_id in self.waiting_typed

    async def accept(
        self, method: AcceptMethod, out: Emitter, index: int = 0, wait: bool = False
    ) -> float:
        self.log.append(("accept", method, index))
        if isinstance(self.accepting, Exception):
            raise self.accepting
        return self.accepting

    async def dismiss(self, reason: AbortCause) -> None:
        self.log.append(("dismiss", reason))
        self.current = None

    def after_turn(self, reason: TurnEndReason, mode: ApprovalMode) -> None:
        # Noted with how many replies were out by then: the turn's end must come after.
        self.log.append(("after_turn", reason, mode, len(self.sent.of(TurnEnded))))

    def new_session(self) -> None:
        self.log.append("new_session")

    async def wait_visible(self, timeout_s: float) -> None:
        self.log.append(("wait_visible", timeout_s))

    async def wait_settled(self, timeout_s: float) -> None:
        self.log.append(("wait_settled", timeout_s))

    def suggestion_reply(
        self, req_id: int, transcript: int | None = None, full: bool = False
    ) -> SuggestionReply:
        text = self.current.text if self.current else None
        return SuggestionReply(req_id, text, text is not None, None, None)

    async def diff_reply(self, req_id: int, index: int | None, stat: bool) -> DiffReply | None:
        """The branch's diff while ``current`` has a speculation, else None."""
        self.log.append(("diff_reply", index, stat))
        spec = self.current.speculation if self.current is not None else None
        if spec is None:
            return None
        return DiffReply(req_id, index or 0, self.current.text if self.current else "",
                         spec.status)

    def stats_reply(self, req_id: int) -> StatsReply:
        return self.stats.reply(req_id, pending_speculation=None)


@dataclass
class FakeSession:
    """A real Session over SessionChat and SessionSpeculation, which write what they were
    asked, in order, to one ``log``."""

    log: list[Any] = field(default_factory=list)
    replies: Replies = field(default_factory=Replies)
    settings: Settings = field(default_factory=lambda: Settings(approval_timeout_s=90))
    chat: SessionChat = field(init=False)
    speculation: SessionSpeculation = field(init=False)
    session: Session = field(init=False)

    def __post_init__(self) -> None:
        self.chat = SessionChat(self.log)
        self.speculation = SessionSpeculation(self.log, self.replies)
        self.session = Session(self.chat, self.speculation, self.settings)
