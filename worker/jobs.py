"""The two kinds of work a worker does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.work import Failed, RunSpeculation, RunTool

if TYPE_CHECKING:
    from worker.process import Outbox


async def run_tool(job: RunTool, outbox: Outbox) -> None:
    await outbox.send(Failed(job_id=job.job_id, epoch=job.epoch, error="tools not wired yet"))


async def run_speculation(job: RunSpeculation, outbox: Outbox) -> None:
    await outbox.send(Failed(job_id=job.job_id, epoch=job.epoch, error="speculation not wired yet"))
