"""Benchmark: a 3-turn scripted speculation in a real pool worker vs. the same loop in-process.

    .venv/bin/python scripts/bench_speculation.py [--runs 20] [--latency-ms 5]

The scripted model answers turn 1 with a ``read_file`` call, turn 2 with a ``glob`` call and
turn 3 with text, each after ``--latency-ms``. Measured per run, from the scripted model's
request log (arrival times) and the moment each event reaches the caller:

* hand-off -> first model request: job sent to an idle warm worker (or, in-process, the call
  of ``run_speculation``) until the first request arrives at the model;
* per turn, excluding model latency: request arrival to the next request arrival (the last
  turn: to ``Completed``), minus the scripted latency, averaged over the 3 turns; this is
  the HTTP round trip, stream parsing, gate, tool, overlay and event traffic;
* whole run: hand-off until ``Completed`` is received.

The worker runs as in production (fork-server pool, Landlock backstop on, one speculation per
worker, so every run gets a fresh warm worker); the baseline runs ``run_speculation`` in this
process with the backstop off. Medians of ``--runs`` runs after one warm-up run each.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coordinator.scripted_model import ScriptedModelServer
from coordinator.service.pool.workers import WorkerHandle, WorkerPool
from overlay import Overlay, overlay_dir_for
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import CacheSafeSnapshot, Message
from protocol.wire.work import (
    Completed,
    ModelEndpoint,
    RunSpeculation,
    WorkerEvent,
)
from worker.jobs import run_speculation
from worker.tools import TOOL_SPECS

TURNS = 3
EPOCH = 1


def scenario(latency_ms: int) -> dict[str, Any]:
    def call(name: str, **arguments: Any) -> dict[str, Any]:
        return {"name": name, "arguments": arguments}

    spec = {"purpose": "speculation"}
    return {
        "latency_ms": latency_ms,
        "chunk_ms": 0,
        "rules": [
            {"when": {**spec, "last_user": "run the tests"},
             "reply": {"text": "Reading.", "tool_calls": [call("read_file", file_path="app.py")]}},
            {"when": {**spec, "last_tool": "read_file"},
             "reply": {"tool_calls": [call("glob", pattern="**/*.py")]}},
            {"when": {**spec, "last_tool": "glob"}, "reply": {"text": "All tests pass."}},
        ],
    }  # fmt: skip


def make_project(root: Path) -> Path:
    root.mkdir()
    (root / "app.py").write_text("def greet():\n    return 'hello'\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_app.py").write_text("def test_greet():\n    assert True\n")
    return root


SNAPSHOT = CacheSafeSnapshot(
    system="You are a coding agent.",
    tools=TOOL_SPECS,
    history=(Message.user("make greet say hello"), Message.assistant("Done. Run the tests?")),
    model="main",
    version=1,
)


class Run:
    def __init__(self) -> None:
        self.sent = 0.0
        self.completed = 0.0
        self.done = asyncio.Event()

    def on_event(self, event: WorkerEvent) -> None:
        if isinstance(event, Completed):
            self.completed = time.time()
            self.done.set()

    async def send(self, event: WorkerEvent) -> None:  # the in-process outbox
        self.on_event(event)


def measure(run: Run, requests: list[dict[str, Any]], latency_s: float) -> dict[str, float]:
    arrivals = [r["time"] for r in requests if r["purpose"] == "speculation"]
    assert len(arrivals) == TURNS, f"expected {TURNS} model requests, got {len(arrivals)}"
    ends = [*arrivals[1:], run.completed]
    per_turn = statistics.mean(
        end - start - latency_s for start, end in zip(arrivals, ends, strict=True)
    )
    return {
        "handoff": arrivals[0] - run.sent,
        "turn": per_turn,
        "whole": run.completed - run.sent,
    }


def job_for(
    project: Path, server: ScriptedModelServer, pid: int, n: int, sandbox: bool
) -> RunSpeculation:
    job_id = f"bench-{n}"
    return RunSpeculation(
        job_id=job_id,
        epoch=EPOCH,
        suggestion="run the tests",
        snapshot=SNAPSHOT,
        approval_mode=ApprovalMode.YOLO,
        model="fast",
        project_root=str(project),
        overlay_dir=str(overlay_dir_for(pid, job_id)),
        endpoint=ModelEndpoint(base_url=server.base_url),
        pipelined=False,
        sandbox=sandbox,
    )


async def bench_worker(
    project: Path, server: ScriptedModelServer, runs: int, latency_s: float
) -> list[dict[str, float]]:
    runtime = Path(tempfile.mkdtemp(prefix="bs-"))
    current: dict[str, Run] = {}

    def on_event(handle: WorkerHandle, event: WorkerEvent) -> None:
        run = current.get(getattr(event, "job_id", ""))
        if run is not None:
            run.on_event(event)

    pool = WorkerPool(
        f"ipc://{runtime}/w.sock", EPOCH, size=1, heartbeat_s=1.0, on_event=on_event
    )
    results = []
    try:
        await pool.start()
        for n in range(runs + 1):
            handle = await pool.acquire("speculation", f"bench-{n}")
            await asyncio.sleep(0.02)  # let the pool's refill settle so it does not skew timing
            job = job_for(project, server, handle.pid, n, sandbox=True)
            run = current[job.job_id] = Run()
            before = len(server.requests)
            run.sent = time.time()
            await pool.send(handle, job)
            await asyncio.wait_for(run.done.wait(), 10)
            await asyncio.sleep(latency_s * 2)  # the last request log entries are in
            if n:  # the first run warms up
                results.append(measure(run, server.requests[before:], latency_s))
            assert handle.dead is not None
            await asyncio.wait_for(asyncio.shield(handle.dead), 5)
            Overlay(project, job.overlay_dir).cleanup()
    finally:
        await pool.close()
        shutil.rmtree(runtime, ignore_errors=True)
    return results


async def bench_in_process(
    project: Path, server: ScriptedModelServer, runs: int, latency_s: float
) -> list[dict[str, float]]:
    from worker.contain.helper import SandboxHelper

    results = []
    helper = SandboxHelper.start()  # a worker has its helper from its start: not timed
    try:
        for n in range(runs + 1):
            job = job_for(project, server, os.getpid(), 1000 + n, sandbox=False)
            run = Run()
            before = len(server.requests)
            run.sent = time.time()
            await run_speculation(job, run, helper)  # type: ignore[arg-type]
            if n:
                results.append(measure(run, server.requests[before:], latency_s))
            Overlay(project, job.overlay_dir).cleanup()
    finally:
        helper.close()
    return results


def median(results: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in results) * 1000


def main() -> None:
    from _interrupt import stop_like_ctrl_c  # scripts/ is sys.path[0] when run

    stop_like_ctrl_c()  # SIGTERM too stops what this script started
    logging.basicConfig(level=logging.ERROR)  # workers exiting after their job is expected
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--latency-ms", type=int, default=5)
    args = parser.parse_args()
    latency_s = args.latency_ms / 1000
    base = Path(tempfile.mkdtemp(prefix="bench-spec-"))
    try:
        project = make_project(base / "project")
        with ScriptedModelServer(scenario(args.latency_ms)) as server:
            worker = asyncio.run(bench_worker(project, server, args.runs, latency_s))
            baseline = asyncio.run(bench_in_process(project, server, args.runs, latency_s))
    finally:
        shutil.rmtree(base, ignore_errors=True)

    rows = [
        ("hand-off -> first model request", "handoff"),
        (f"per turn, excl. {args.latency_ms} ms model latency", "turn"),
        (f"whole run ({TURNS} turns)", "whole"),
    ]
    print(f"3-turn scripted speculation, {args.latency_ms} ms model latency, "
          f"median of {args.runs} runs (ms)")  # fmt: skip
    print(f"{'':40} {'worker':>9} {'in-process':>11} {'ratio':>7}")
    for label, key in rows:
        w, b = median(worker, key), median(baseline, key)
        ratio = f"{w / b:6.2f}x" if b > 0 else "    n/a"
        print(f"{label:40} {w:9.2f} {b:11.2f} {ratio:>7}")


if __name__ == "__main__":
    main()
