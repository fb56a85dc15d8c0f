#!/usr/bin/env python3
"""How much latency memory recall adds to a user query: async prefetch vs the old blocking wait.

The measured span is the one the user waits through: from the query arriving to the main model
request being ready to leave. For the async design that is ``fire()`` + one real event-loop
yield (the rest of the request preparation) + ``consume_for_user_query()``; for the old design
it is awaiting the recall with a 2.5 s deadline. Recall talks to the embedded scripted model
over real HTTP, with a recall latency of 0, 100, 908 (the measured qwen3.5-flash cold start) and
3,000 ms. A control run (the same yield, no recall at all) is subtracted for "added".

    .venv/bin/python scripts/bench_recall.py            # full run (~25 s)
    .venv/bin/python scripts/bench_recall.py --quick    # fewer samples
    .venv/bin/python scripts/bench_recall.py --json     # machine-readable
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from coordinator.memory import MemoryPrefetcher, Recaller  # noqa: E402
from coordinator.scripted_model import ScriptedModelServer  # noqa: E402
from protocol.model import ModelClient  # noqa: E402

LATENCIES_MS = (0, 100, 908, 3_000)
OLD_DEADLINE_S = 2.5


def make_project(base: Path, count: int = 20) -> Path:
    mem = base / ".specrun" / "memory"
    mem.mkdir(parents=True)
    for i in range(count):
        meta = {"name": f"Note {i}", "description": f"notes about subsystem {i}", "type": "project"}
        text = f"---\n{yaml.safe_dump(meta)}---\n\nDetails of subsystem {i}.\n"
        (mem / f"note-{i}.md").write_text(text)
    return base


def scenario() -> dict[str, object]:
    rules: list[dict[str, object]] = [
        {
            "when": {"purpose": "recall", "prompt_contains": f"Query: latency-{ms} "},
            "reply": {"json": {"selected_memories": []}, "latency_ms": ms},
        }
        for ms in LATENCIES_MS
    ]
    rules.append({"default": {"text": "ok"}})
    return {"name": "bench-recall", "rules": rules}


def ns_to_ms(values: list[int]) -> float:
    return statistics.median(values) / 1e6


async def control(samples: int) -> list[int]:
    """The same preparation (one real yield) with no recall at all."""
    out = []
    for _ in range(samples):
        t0 = time.perf_counter_ns()
        await asyncio.sleep(0)
        out.append(time.perf_counter_ns() - t0)
    return out


async def async_design(prefetcher: MemoryPrefetcher, query: str, samples: int) -> list[int]:
    out = []
    for _ in range(samples):
        t0 = time.perf_counter_ns()
        prefetcher.fire(query)
        await asyncio.sleep(0)  # the rest of the request preparation: at least one real yield
        prefetcher.consume_for_user_query()
        out.append(time.perf_counter_ns() - t0)
        # untimed: the turn goes on; give a fast recall a moment, then the next query arrives
        handle = prefetcher.pending
        if handle is not None:
            await asyncio.wait({handle.task}, timeout=0.01)
        prefetcher.abort_and_clear("bench: next query")
        if handle is not None:
            await asyncio.gather(handle.task, return_exceptions=True)
    return out


async def blocking_design(recaller: Recaller, query: str, samples: int) -> list[int]:
    """The old path: await recall before sending, giving up after a 2.5 s deadline."""
    out = []
    for _ in range(samples):
        t0 = time.perf_counter_ns()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(recaller(query, frozenset(), None), OLD_DEADLINE_S)
        out.append(time.perf_counter_ns() - t0)
    return out


async def bench(quick: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer(scenario()) as server:
        project = make_project(Path(tmp) / "project")
        client = ModelClient(server.base_url, max_retries=0)
        recaller = Recaller(project, model=client, model_name="fast", home=Path(tmp) / "home")
        prefetcher = MemoryPrefetcher(recaller)
        try:
            await blocking_design(recaller, "latency-0 warm up", 3)
            await async_design(prefetcher, "latency-0 warm up", 20)
            base = await control(2_000)
            rows = []
            for ms in LATENCIES_MS:
                query = f"latency-{ms} where is the deploy script"
                async_ns = await async_design(prefetcher, query, 100 if quick else 200)
                n_block = (5 if quick else 15) if ms <= 100 else 2 if quick else 3
                block_ns = await blocking_design(recaller, query, n_block)
                a, b = ns_to_ms(async_ns), ns_to_ms(block_ns)
                rows.append(
                    {
                        "recall_latency_ms": ms,
                        "blocking_median_ms": round(b, 3),
                        "async_median_ms": round(a, 4),
                        "async_added_ms": round(a - ns_to_ms(base), 4),
                        "async_p95_ms": round(sorted(async_ns)[int(len(async_ns) * 0.95)] / 1e6, 4),
                        "ratio": round(b / a, 1) if a > 0 else None,
                        "samples": {"async": len(async_ns), "blocking": len(block_ns)},
                    }
                )
            return {"control_median_ms": round(ns_to_ms(base), 4), "rows": rows}
        finally:
            await prefetcher.aclose()
            await client.aclose()


def main() -> int:
    from _interrupt import stop_like_ctrl_c  # scripts/ is sys.path[0] when run

    stop_like_ctrl_c()  # SIGTERM too stops what this script started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    report = asyncio.run(bench(args.quick))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    rows = report["rows"]
    assert isinstance(rows, list)
    print("User-visible latency added by memory recall (median, query arrival → request ready)")
    print(f"control (one yield, no recall): {report['control_median_ms']} ms\n")
    head = (
        f"{'recall latency':>14} | {'blocking (2.5 s deadline)':>25} | {'async prefetch':>14} "
        f"| {'async p95':>9} | {'ratio':>8} | < 1 ms"
    )
    print(head)
    print("-" * len(head))
    ok = True
    for r in rows:
        under = r["async_median_ms"] < 1.0
        ok &= under
        print(
            f"{r['recall_latency_ms']:>11} ms | {r['blocking_median_ms']:>22.1f} ms | "
            f"{r['async_median_ms']:>11.3f} ms | {r['async_p95_ms']:>6.3f} ms | "
            f"{r['ratio']:>7}x | {'yes' if under else 'NO'}"
        )
    print("\ngoal (< 1 ms added at every recall latency):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
