#!/usr/bin/env python3
"""A long session against a finite context window: does turn 200 cost what turn 10 did?

A real service on a copy of the demo's sample project; the embedded scripted model plays
a context window (``--window`` tokens: it refuses a longer request with OpenAI's 400, and
counts tokens with specrun's own estimator). Every turn asks the model to read a 10 KB
file (one read_file call on a real worker, then a short answer), so without compaction
the history would pass the window within a few turns. Suggestions and memory are off:
only the main chat and compaction talk to the model.

Printed, over ``--rounds`` sessions: the median latency of turns 6-25 (the same-run
baseline, "turn 10"; the first compaction comes near turn 7) and of the last 20 turns,
their ratio per session and its median (the goal: at most 1.2), the median of the turns
that compacted, how many compactions ran, the largest request the model got against the
window, how many requests it refused (the goal: none), and how large the request would
have been with the full history. Medians of 20 turns, several rounds: the machine this
runs on is shared, and single turns take 80 to 300 ms depending on the load; so the
coordinator's own CPU time per turn (it runs the chat, the compactions and the embedded
scripted model) is printed as well, which the load of other processes barely moves.
Usage: scripts/bench_context.py [--turns N] [--window TOKENS] [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _sample_project import copy_sample_project  # noqa: E402

from coordinator.cli.client import ServiceClient  # noqa: E402
from coordinator.cli.daemon import start_daemon, stop_daemon  # noqa: E402
from coordinator.scripted_model.engine import request_tokens  # noqa: E402
from coordinator.service.history import HistoryStore  # noqa: E402
from protocol.control import (  # noqa: E402
    AskRequest,
    Notice,
    StatusReply,
    StatusRequest,
    TurnEnded,
)
from protocol.model.tokens import estimate_messages  # noqa: E402

BIG = "".join(
    f"line {i:04d}: the quick brown fox jumps over the lazy dog 0123456789\n" for i in range(150)
)  # ~10 KB

RULES = [
    {
        "when": {"purpose": "compaction"},
        "reply": {"text": "The person reads big.txt again and again; nothing changed."},
    },
    {"when": {"purpose": "main", "last_tool": "read_file"}, "reply": {"text": "Read it."}},
    {
        "when": {"purpose": "main", "last_user": "read"},
        "reply": {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "big.txt"}}]},
    },
    {"default": {"text": "ok"}},
]


@dataclass
class Result:
    turns: int
    window: int
    turn10_median_s: float
    last10_median_s: float
    ratio: float
    compaction_turn_median_s: float
    compactions: int
    refused_requests: int
    largest_request_tokens: int
    full_history_tokens: int
    completed_turns: int
    turn10_cpu_ms: float  # the coordinator's CPU per turn (it also runs the scripted model)
    last_cpu_ms: float
    latencies_ms: list[int]  # every turn's, in order (--json)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def run_session(base: Path, turns: int, window: int) -> Result:
    project = copy_sample_project(base / "proj")
    (project / "big.txt").write_text(BIG)
    scenario = base / "context.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {"name": "bench-context", "chunk_ms": 0, "context_window": window, "rules": RULES}
        )
    )
    (project / ".specrun").mkdir(exist_ok=True)
    settings = {
        "scenario": str(scenario),
        "enableFollowupSuggestions": False,
        "enableMemory": False,
        "maxSessionTurns": max(200, turns),
    }
    (project / ".specrun" / "settings.json").write_text(json.dumps(settings))
    log = base / "model.jsonl"
    saved = {k: os.environ.get(k) for k in ("SPECRUN_RUNTIME_DIR", "SPECRUN_MODEL_LOG")}
    os.environ["SPECRUN_RUNTIME_DIR"] = str(base / "run")
    os.environ["SPECRUN_MODEL_LOG"] = str(log)
    latencies: list[float] = []
    cpu: list[float] = []
    compacting: list[float] = []
    completed = 0
    try:
        start_daemon(project, [])
        client = ServiceClient(project, timeout_s=120)
        try:
            first = client.request(StatusRequest(req_id=client.next_id()))
            assert isinstance(first, StatusReply)
            service = psutil.Process(first.pid)

            def cpu_s() -> float:
                times = service.cpu_times()
                return float(times.user + times.system)

            for n in range(turns):
                cpu_before = cpu_s()
                request = AskRequest(req_id=client.next_id(), text=f"read big.txt ({n})")
                began = time.perf_counter()
                client.send(request)
                replies = list(client.replies(request.req_id, timeout_s=120))
                took = time.perf_counter() - began
                cpu.append(cpu_s() - cpu_before)
                end = replies[-1]
                completed += isinstance(end, TurnEnded) and end.reason == "completed"
                latencies.append(took)
                if any(isinstance(r, Notice) and r.text.startswith("Compacted") for r in replies):
                    compacting.append(took)
            status = client.request(StatusRequest(req_id=client.next_id()))
            assert isinstance(status, StatusReply) and status.context is not None
            compactions = status.context.compactions
        finally:
            client.close()
            stop_daemon(project)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    requests = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    posts = [r for r in requests if r["method"] == "POST" and r["purpose"] == "main"]
    refused = sum(1 for r in posts if r["status"] != 200)
    largest = max((request_tokens(r["body"], r["body"]["messages"]) for r in posts), default=0)
    full = HistoryStore(project).load_report().full_messages
    baseline = latencies[5:25]
    last = latencies[-20:]
    return Result(
        turns=turns,
        window=window,
        turn10_median_s=_median(baseline),
        last10_median_s=_median(last),
        ratio=_median(last) / _median(baseline) if baseline else 0.0,
        compaction_turn_median_s=_median(compacting),
        compactions=compactions,
        refused_requests=refused,
        largest_request_tokens=largest,
        full_history_tokens=estimate_messages(full),
        completed_turns=completed,
        turn10_cpu_ms=_median(cpu[5:25]) * 1000,
        last_cpu_ms=_median(cpu[-20:]) * 1000,
        latencies_ms=[round(t * 1000) for t in latencies],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--window", type=int, default=32_768)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = []
    for _ in range(args.rounds):
        base = Path(tempfile.mkdtemp(prefix="sr-bench-context-"))
        try:
            results.append(run_session(base, args.turns, args.window))
        finally:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps([asdict(r) for r in results]))
        return 0

    def ms(values: list[float]) -> str:
        return f"{_median(values) * 1000:.0f} ms"

    turns, window = args.turns, args.window
    ratios = [r.ratio for r in results]
    rows = [
        ("sessions x turns completed", f"{len(results)} x {[r.completed_turns for r in results]}"),
        ("turn 10 (median of turns 6-25), baseline", ms([r.turn10_median_s for r in results])),
        (f"turn {turns} (median of the last 20)", ms([r.last10_median_s for r in results])),
        ("ratio per session", ", ".join(f"{x:.2f}" for x in ratios)),
        ("ratio, median (goal <= 1.2)", f"{_median(ratios):.2f}"),
        (
            "coordinator CPU per turn, turn 10 -> last 20",
            f"{_median([r.turn10_cpu_ms for r in results]):.1f} -> "
            f"{_median([r.last_cpu_ms for r in results]):.1f} ms (ratio "
            f"{_median([r.last_cpu_ms / max(r.turn10_cpu_ms, 1e-9) for r in results]):.2f})",
        ),
        ("turns that compacted (median)", ms([r.compaction_turn_median_s for r in results])),
        ("compactions per session", ", ".join(str(r.compactions) for r in results)),
        (
            "largest request / window",
            f"{max(r.largest_request_tokens for r in results):,} / {window:,}",
        ),
        ("requests refused as too long (goal 0)", str(sum(r.refused_requests for r in results))),
        ("the full history would be", f"{results[0].full_history_tokens:,} tokens"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
