"""The worker event router: a worker's events and its death go to the part that gave it
its job (tool calls: the main chat; speculations: the speculation manager)."""

from __future__ import annotations

import time

from coordinator.service.pool.workers import WorkerHandle
from coordinator.service.routing import WorkerEventRouter
from protocol.wire.chat import ToolResult
from protocol.wire.control import JobKind
from protocol.wire.work import ModelText, ToolDone, WorkerEvent

from .fakes import run


class Sink:
    """A ``WorkerEventSink`` that keeps what reaches it."""

    def __init__(self) -> None:
        self.events: list[tuple[int, WorkerEvent]] = []
        self.deaths: list[int] = []

    async def on_worker_event(self, handle: WorkerHandle, event: WorkerEvent) -> None:
        self.events.append((handle.pid, event))

    async def on_worker_death(self, handle: WorkerHandle) -> None:
        self.deaths.append(handle.pid)


def worker(pid: int, kind: JobKind | None) -> WorkerHandle:
    handle = WorkerHandle(pid=pid, process=None, started_at=time.monotonic())
    handle.job_kind = kind
    return handle


def test_events_and_deaths_go_to_the_sink_of_the_workers_job_kind() -> None:
    chat, speculation = Sink(), Sink()
    router = WorkerEventRouter({"tool": chat, "speculation": speculation})
    tool, spec, idle = worker(1, "tool"), worker(2, "speculation"), worker(3, None)
    done = ToolDone("tool-1", 7, ToolResult("c1", "read_file", output="x"))
    text = ModelText("spec-1", 7, 0, "thinking")

    async def main() -> None:
        await router.on_event(tool, done)
        await router.on_event(spec, text)
        await router.on_event(idle, done)  # no job: nobody's
        for handle in (tool, spec, idle):
            await router.on_death(handle)

    run(main())
    assert chat.events == [(1, done)] and chat.deaths == [1]
    assert speculation.events == [(2, text)] and speculation.deaths == [2]


def test_a_kind_nobody_serves_is_dropped() -> None:
    chat = Sink()
    router = WorkerEventRouter({"tool": chat})

    async def main() -> None:
        spec = worker(2, "speculation")
        await router.on_event(spec, ModelText("spec-1", 7, 0, "x"))
        await router.on_death(spec)

    run(main())
    assert chat.events == [] and chat.deaths == []
