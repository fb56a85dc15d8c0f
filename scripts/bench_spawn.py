#!/usr/bin/env python3
"""Worker start latency (cold spawn vs warm-pool hand-off) and SIGKILL-to-detected latency.

Runs a real WorkerPool (multiprocess fork server, ZeroMQ ipc, real worker processes) and
prints one table of medians and p99s, each next to its baseline measured in the same run:
  - a job on a warm worker vs the same job on a worker spawned for it (cold);
  - death seen through the pidfd vs polling the pid every 10 ms.
Also the fork-server limit of a service's start: a fresh interpreter that starts a pool
(fork server with the preloaded worker modules, then the workers) until its workers said
hello, from the moment it was started (``fork_server_limit``).
Usage: scripts/bench_spawn.py [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from coordinator.service.pool.workers import WorkerHandle, WorkerPool
from protocol.wire.chat import ToolCall
from protocol.wire.work import RunTool, ToolDone, WorkerEvent


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


class Bench:
    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self.waiting: dict[str, asyncio.Future[float]] = {}
        pool.on_event = self.on_event

    def on_event(self, handle: WorkerHandle, event: WorkerEvent) -> None:
        if isinstance(event, ToolDone) and event.job_id in self.waiting:
            self.waiting.pop(event.job_id).set_result(time.perf_counter())

    async def job(self, handle: WorkerHandle, job_id: str) -> None:
        """A job the worker answers at once (an unknown tool): measures the hand-off."""
        done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting[job_id] = done
        call = ToolCall(id="c", name="no_such_tool", arguments="{}")
        await self.pool.send(
            handle, RunTool(job_id=job_id, epoch=self.pool.epoch, call=call, project_root="/")
        )
        await done


async def measure(rounds: int) -> dict[str, dict[str, float]]:
    runtime = Path(tempfile.mkdtemp(prefix="sr-bench-"))
    pool = WorkerPool(f"ipc://{runtime}/w.sock", epoch=7, size=0, heartbeat_s=1.0)
    bench = Bench(pool)
    await pool.start()
    try:
        # Warm the fork server itself (started on first use), then measure.
        first = await pool.acquire("bench", "warmup")
        await pool.kill(first, "bench")

        cold, warm, pidfd, polled = [], [], [], []
        for i in range(rounds):
            t0 = time.perf_counter()
            handle = await pool.acquire("bench", f"cold-{i}")  # empty pool: spawns one
            await bench.job(handle, f"cold-{i}")
            cold.append(time.perf_counter() - t0)
            pool.release(handle)
            t0 = time.perf_counter()
            handle = await pool.acquire("bench", f"warm-{i}")  # now idle: a hand-off
            await bench.job(handle, f"warm-{i}")
            warm.append(time.perf_counter() - t0)
            # Death detection through the pool's pidfd reader.
            t0 = time.monotonic()
            os.kill(handle.pid, signal.SIGKILL)
            assert handle.dead is not None
            seen = await handle.dead
            pidfd.append(seen - t0)
            await asyncio.to_thread(handle.process.join, 5)

        # Baseline for detection: a plain child process, polled every 10 ms.
        for _ in range(rounds):
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", "import time; time.sleep(60)"
            )
            await asyncio.sleep(0.005)
            t0 = time.monotonic()
            os.kill(proc.pid, signal.SIGKILL)
            while True:
                try:
                    if psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE:
                        break
                except psutil.NoSuchProcess:
                    break
                await asyncio.sleep(0.010)
            polled.append(time.monotonic() - t0)
            await proc.wait()
    finally:
        await pool.close()
        for leftover in runtime.iterdir():
            leftover.unlink()
        runtime.rmdir()

    def row(values: list[float]) -> dict[str, float]:
        return {"median_ms": statistics.median(values) * 1000, "p99_ms": p99(values) * 1000}

    return {
        "cold spawn + job": row(cold),
        "warm hand-off + job": row(warm),
        "SIGKILL seen via pidfd": row(pidfd),
        "SIGKILL seen by 10 ms polling": row(polled),
    }


async def _first_workers(workers: int) -> float:
    """In a fresh interpreter: start a pool of ``workers`` and wait until all are idle;
    returns the monotonic time then (CLOCK_MONOTONIC is one clock for every process)."""
    runtime = Path(tempfile.mkdtemp(prefix="sr-limit-"))
    pool = WorkerPool(f"ipc://{runtime}/w.sock", epoch=7, size=workers, heartbeat_s=1.0)
    try:
        await pool.start()  # the fork server, then the workers, in parallel
        assert pool.is_warm()
        return time.monotonic()
    finally:
        await pool.close()
        for leftover in runtime.iterdir():
            leftover.unlink()
        runtime.rmdir()


def fork_server_limit(runs: int, workers: int = 1) -> float:
    """Median ms from starting a fresh interpreter to ``workers`` ready workers in it: the
    interpreter, importing the pool, the fork server's preload and its forks. A service
    cannot have a warm pool sooner."""
    times = []
    for _ in range(runs):
        t0 = time.monotonic()
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--first-workers", str(workers)],
            capture_output=True,
            text=True,
            check=True,
        )
        times.append(float(done.stdout.strip().splitlines()[-1]) - t0)
    return statistics.median(times) * 1000


def main() -> None:
    from _interrupt import stop_like_ctrl_c  # scripts/ is sys.path[0] when run

    stop_like_ctrl_c()  # SIGTERM too stops what this script started
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--first-workers", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_workers:
        logging.basicConfig(level=logging.ERROR)
        print(asyncio.run(_first_workers(args.first_workers)))
        return
    logging.basicConfig(level=logging.ERROR)  # the pool warns about every killed worker
    results = asyncio.run(measure(args.rounds))
    if args.json:
        print(json.dumps(results))
        return
    print(
        f"worker start and death detection, {args.rounds} rounds "
        "(2-core machine; medians are robust to noise)"
    )
    print(f"{'what':32} {'median ms':>10} {'p99 ms':>10}")
    for name, row in results.items():
        print(f"{name:32} {row['median_ms']:10.3f} {row['p99_ms']:10.3f}")
    cold, warm = results["cold spawn + job"], results["warm hand-off + job"]
    pid, poll = results["SIGKILL seen via pidfd"], results["SIGKILL seen by 10 ms polling"]
    print(
        f"warm hand-off is {cold['median_ms'] / warm['median_ms']:.1f}x faster "
        "than a cold spawn (median)"
    )
    print(
        f"pidfd detection is {poll['median_ms'] / pid['median_ms']:.1f}x faster "
        "than 10 ms polling (median)"
    )


if __name__ == "__main__":
    main()
