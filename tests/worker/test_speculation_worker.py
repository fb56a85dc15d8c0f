"""Speculations and tool jobs in REAL worker processes from the real warm pool (forkserver,
ZeroMQ, the kernel backstop on), against the scripted model over HTTP."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import psutil
import pytest

from coordinator.service.pool.workers import WorkerHandle, WorkerPool
from overlay import speculation_base_dir, sweep
from protocol.wire.boundary import BoundaryReason
from protocol.wire.chat import ToolCall
from protocol.wire.work import (
    Boundary,
    Completed,
    PipelinedSuggestion,
    RunSpeculation,
    RunTool,
    ToolDone,
    ToolFinished,
    WorkerEvent,
)
from tests.worker.conftest import PIPELINED_RULE, Harness, call, rule, tree_state

pytestmark = pytest.mark.usefixtures("stop_multiprocess_helpers")

EPOCH = 7  # the harness's jobs carry this epoch


class Events:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[WorkerHandle, WorkerEvent]] = asyncio.Queue()

    def __call__(self, handle: WorkerHandle, event: WorkerEvent) -> None:
        self.queue.put_nowait((handle, event))

    async def until(self, kind: type[Any], timeout: float = 10.0) -> list[WorkerEvent]:
        """Every event up to and including the first of ``kind``."""
        seen: list[WorkerEvent] = []
        async with asyncio.timeout(timeout):
            while True:
                _, event = await self.queue.get()
                seen.append(event)
                if isinstance(event, kind):
                    return seen


@asynccontextmanager
async def pool_of(size: int = 1) -> AsyncIterator[tuple[WorkerPool, Events]]:
    runtime = Path(tempfile.mkdtemp(prefix="sw-"))  # short: ipc:// paths are length-limited
    events = Events()  # the stand-in of the service
    pool = WorkerPool(
        f"ipc://{runtime}/w.sock", EPOCH, size=size, heartbeat_s=0.2, on_event=events
    )
    await pool.start()
    try:
        yield pool, events
    finally:
        await pool.close()
        shutil.rmtree(runtime, ignore_errors=True)


async def send_sandboxed_job(
    pool: WorkerPool, h: Harness, *, speculate_shell: bool = False
) -> tuple[WorkerHandle, RunSpeculation]:
    """A speculation worker from ``pool``, and the sandboxed job of ``h`` sent to it (its
    overlay lives in that worker)."""
    handle = await pool.acquire("speculation", "spec-1")
    job = h.job(sandbox=True, overlay_pid=handle.pid)
    job = msgspec.structs.replace(job, speculate_shell=speculate_shell)
    await pool.send(handle, job)
    return handle, job


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(main())  # type: ignore[arg-type]


def test_speculation_in_a_pool_worker(harness: Any) -> None:
    h: Harness = harness(
        [
            rule(
                {
                    "text": "Adding a test.",
                    "tool_calls": [
                        call("write_file", file_path="tests/test_more.py", content="X = 1\n"),
                        call("read_file", file_path="tests/test_more.py"),
                    ],
                },
                times=1,
            ),
            rule({"text": "Added tests/test_more.py."}),
            PIPELINED_RULE,
        ]
    )
    before = tree_state(h.project)

    async def main() -> None:
        async with pool_of() as (pool, events):
            handle, job = await send_sandboxed_job(pool, h)
            seen = await events.until(PipelinedSuggestion)
            done = next(e for e in seen if isinstance(e, Completed))
            assert done.outcome.tool_use_count == 2
            read = [e for e in seen if isinstance(e, ToolFinished)][1].result
            assert read.output is not None and "X = 1" in read.output
            written = done.outcome.written_files["tests/test_more.py"]
            assert Path(written.overlay_path).read_text() == "X = 1\n"
            assert Path(written.overlay_path).is_relative_to(job.overlay_dir)
            assert isinstance(seen[-1], PipelinedSuggestion) and seen[-1].text == "commit this"
            # One speculation per worker: it exits by itself.
            assert handle.dead is not None
            await asyncio.wait_for(asyncio.shield(handle.dead), 5)
            assert not psutil.pid_exists(handle.pid) or psutil.Process(handle.pid).status() == (
                psutil.STATUS_ZOMBIE
            )
            # The worker removed its scratch dir; its overlay waits for the user's Tab and
            # survives a sweep while its owner (the pool's fork server) lives.
            own = speculation_base_dir() / str(handle.pid)
            assert sorted(p.name for p in own.iterdir()) == ["owner", job.job_id]
            assert own not in sweep()
            assert own.exists()
            h.cleanup()  # the overlay's cleanup takes the rest
            assert not own.exists()

    run(main)
    assert tree_state(h.project) == before


def test_boundary_in_a_pool_worker_sends_no_pipelined_suggestion(harness: Any) -> None:
    h: Harness = harness(
        [rule({"text": "Pushing.", "tool_calls": [call("run_shell_command", command="git push")]})]
    )

    async def main() -> None:
        async with pool_of() as (pool, events):
            handle, _job = await send_sandboxed_job(pool, h)
            seen = await events.until(Boundary)
            end = seen[-1]
            assert isinstance(end, Boundary) and end.reason == BoundaryReason("shell", "git push")
            assert handle.dead is not None
            await asyncio.wait_for(asyncio.shield(handle.dead), 5)
            # A pipelined suggestion is asked of the model first, and the worker waits for
            # the answer: dead, it never asked (the server logs a request on arrival).
            assert [r for r in h.server.requests if r["purpose"] == "pipelined"] == []
            assert events.queue.empty()
            h.cleanup()
            assert not (speculation_base_dir() / str(handle.pid)).exists()

    run(main)


def test_tool_jobs_in_a_pool_worker(spec_project: Path) -> None:
    async def main() -> None:
        async with pool_of() as (pool, events):
            handle = await pool.acquire("tool", "tool-1")
            for n, (command, shell) in enumerate(
                [
                    ("ls src", "read_only"),
                    ("touch made.txt", "read_only"),
                    ("touch made.txt", "full"),
                ]
            ):
                job = RunTool(
                    job_id=f"tool-{n}",
                    epoch=EPOCH,
                    call=ToolCall(f"c{n}", "run_shell_command", f'{{"command": "{command}"}}'),
                    project_root=str(spec_project),
                    shell=shell,  # type: ignore[arg-type]
                )
                await pool.send(handle, job)
                (answer,) = await events.until(ToolDone)
                assert isinstance(answer, ToolDone) and answer.job_id == job.job_id
                if n == 0:
                    assert answer.needs_approval is None and "app.py" in (
                        answer.result.output or ""
                    )
                elif n == 1:
                    assert answer.needs_approval and not (spec_project / "made.txt").exists()
                else:
                    assert answer.needs_approval is None and (spec_project / "made.txt").exists()
            assert handle.dead is not None and not handle.dead.done()  # tool workers stay

    run(main)
