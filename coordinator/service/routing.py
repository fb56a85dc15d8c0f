"""Which part of the service a worker's events and death go to.

A worker runs one kind of job at a time (``WorkerHandle.job_kind``, set when the pool
hands it out): the main chat's tool calls (``tool``) or a speculation
(``speculation``). Its events and its death go to the part that gave it that job. Each
part still fences what it gets by job id, so a late frame from an earlier job of the
same worker is dropped there.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol

from coordinator.service.pool import WorkerHandle
from protocol.wire.control import JobKind
from protocol.wire.work import WorkerEvent

log = logging.getLogger("specrun.routing")


class WorkerEventSink(Protocol):
    """The part a worker's events and death go to while it runs that part's job."""

    async def on_worker_event(self, handle: WorkerHandle, event: WorkerEvent) -> None: ...

    async def on_worker_death(self, handle: WorkerHandle) -> None: ...


class WorkerEventRouter:
    """What the pool's ``on_event`` and ``on_death`` come to (the service passes them to
    the pool at its construction): each goes to the sink of the worker's job kind."""

    def __init__(self, sinks: Mapping[JobKind, WorkerEventSink]) -> None:
        self.sinks = dict(sinks)

    def _sink(self, handle: WorkerHandle) -> WorkerEventSink | None:
        return self.sinks.get(handle.job_kind) if handle.job_kind is not None else None

    async def on_event(self, handle: WorkerHandle, event: WorkerEvent) -> None:
        sink = self._sink(handle)
        if sink is None:
            log.info(
                "dropping a %s from worker %d, which has no job", type(event).__name__, handle.pid
            )
            return
        await sink.on_worker_event(handle, event)

    async def on_death(self, handle: WorkerHandle) -> None:
        sink = self._sink(handle)
        if sink is not None:
            await sink.on_worker_death(handle)
