"""What the service's parts need from each other, as small typed protocols.

The main chat, the speculation manager and the tool executor each take only the part
of the service they use: these protocols name those parts. The service hands over the
real objects (the ``WorkerPool``, the ``MainChat``, itself as the reply sink); a test
hands over a fake that has just these members. This module imports no other part of
the service but the pool's handle type, so every part can import it without a cycle.

Who depends on what:

- ``Emitter`` (a running request's events) sends through a ``ReplySink``.
- ``ToolExecutor`` runs tool jobs on ``WorkerJobs``.
- ``MainChat`` runs tool jobs and waits for the tool registry: ``ChatWorkers``.
- ``SpeculationManager`` runs speculation jobs on ``WorkerJobs`` and forks the main
  chat through a ``ForkSource``.
- The control commands see the pool as a ``PoolView`` (see ``commands.deps``).
- The event router passes worker events to ``WorkerEventSink``s.

Each one is a seam a unit test fills with a stand-in (``tests/coordinator/service``);
where no test needs one, a part takes the concrete type instead.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from coordinator.service.pool.workers import WorkerHandle
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import CacheSafeSnapshot, Message, ToolSpec
from protocol.wire.control import ContextInfo, ControlReply, JobKind, WorkerInfo, WorkerSandbox
from protocol.wire.work import LayerStatus, WorkerEvent, WorkerJob


class ReplySink(Protocol):
    """Where replies to a client go (the service's control socket)."""

    async def send(self, identity: bytes, reply: ControlReply) -> None: ...


class WorkerJobs(Protocol):
    """Running jobs on pool workers: take an idle worker, send it a job, release it when
    a tool job is done, kill it when its job is abandoned."""

    @property
    def epoch(self) -> int: ...

    async def acquire(
        self, kind: JobKind, job_id: str, overlay_dir: str | None = None
    ) -> WorkerHandle: ...

    async def send(self, handle: WorkerHandle, job: WorkerJob) -> None: ...

    def release(self, handle: WorkerHandle) -> None: ...

    async def kill(self, handle: WorkerHandle, reason: str) -> float: ...


class ChatWorkers(WorkerJobs, Protocol):
    """What the main chat needs of the pool: its tools run there, and it sends the
    model the tools the workers announced in their hello, in their fixed order."""

    @property
    def tool_specs(self) -> tuple[ToolSpec, ...]: ...

    async def wait_tools(self, timeout_s: float = 30.0) -> tuple[ToolSpec, ...]: ...


class PoolView(Protocol):
    """The pool as `status`, `workers` and `kill-worker` see it."""

    @property
    def sandbox(self) -> WorkerSandbox: ...

    @property
    def containment(self) -> tuple[LayerStatus, ...]: ...

    def infos(self) -> list[WorkerInfo]: ...

    def is_warm(self) -> bool: ...

    def handles(self) -> list[WorkerHandle]: ...

    def find(self, pid: int) -> WorkerHandle | None: ...


class ForkSource(Protocol):
    """The main chat as the speculation manager sees it: what a speculation forks from
    (the cache-safe snapshot, the fast model, the approval mode) and where an accepted
    speculation's messages go."""

    @property
    def snapshot(self) -> CacheSafeSnapshot | None: ...

    @property
    def fast_model(self) -> str: ...

    @property
    def approval_mode(self) -> ApprovalMode: ...

    def model_turns(self) -> int: ...

    def context_info(self) -> ContextInfo:
        """The window and the estimate of a request over the snapshot's history."""
        ...

    @property
    def busy(self) -> bool:
        """A main turn is running (a speculation branch beyond the top one waits)."""
        ...

    def turn_slot(self) -> AbstractAsyncContextManager[object]:
        """Held while a turn runs, one at a time: an accept holds it while it applies
        files and records the messages, so a prompt sent meanwhile waits for it (and for
        the compaction the accepted turn may make due, which keeps it after the accept)."""
        ...

    async def extend_from_speculation(self, messages: list[Message]) -> None: ...

    async def forkable(self) -> None:
        """Until ``snapshot`` is the one to fork from: after an accept, once the
        compaction it made due is done (never the over-full history)."""
        ...


class WorkerEventSink(Protocol):
    """One side of the pool's event routing (``routing.WorkerEventRouter``)."""

    async def on_worker_event(self, handle: WorkerHandle, event: WorkerEvent) -> None: ...

    async def on_worker_death(self, handle: WorkerHandle) -> None: ...
