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
- ``SpeculationManager`` runs speculation jobs on ``WorkerJobs`` (the main chat it forks
  is its own ``speculation.ForkSource``).
- The command port sees the pool as a ``PoolView`` (see ``commands.parts``).

Each one is a seam a unit test fills with a stand-in (``tests/coordinator/service``);
where no test needs one, a part takes the concrete type instead.
"""

from __future__ import annotations

from typing import Protocol

from coordinator.service.pool import WorkerHandle
from protocol.wire.chat import ToolSpec
from protocol.wire.control import ControlReply, JobKind, WorkerInfo, WorkerSandbox
from protocol.wire.work import LayerStatus, WorkerJob


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
