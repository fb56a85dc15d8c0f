#!/usr/bin/env python3
"""A long session against a finite context window: does turn 200 cost what turn 10 did?

A real service on a copy of the demo's sample project; the embedded scripted model plays
a context window (``--window`` tokens: it refuses a longer request with OpenAI's 400, and
counts tokens with specrun's own estimator). Every turn asks the model to read a 10 KB
file (one read_file call on a real worker, then a short answer), so without compaction
the history would pass the window within a few turns. Suggestions and memory are off:
only the main chat and compaction talk to the model.

The machine this runs on is shared, and its load moves a turn's wall time by 2x within a
minute, far more than anything the session's length does. So each round runs two
services side by side: a long session plays its first ``--turns`` - 25 turns alone, then
a fresh session starts and the two alternate turn by turn (which goes first alternating
too), so the fresh session's turns 6-25 ("turn 10", the first compaction comes near turn
7) run in the same seconds as the long one's last 20 ("turn 200"). Printed, over
``--rounds`` rounds: the median wall time of those two windows, their ratio per round, and
the ratio of the medians of all rounds' turns pooled (the goal: at most 1.2); the same
ratio within the long session alone (its turns 6-25, minutes earlier); the coordinator's
CPU time per turn in both windows (it runs the chat, the compactions and the embedded
scripted model; the load of other processes barely moves it); the median of the turns
that compacted, compactions per session, the largest request the model got against the
window, how many requests it refused (the goal: none), and how large the full history
would have been. ``--hog N`` runs N busy-looping processes beside it all.
Usage: scripts/bench_context.py [--turns N] [--window TOKENS] [--rounds N] [--hog N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench_service import use_runtime_dir  # noqa: E402
from _sample_project import copy_sample_project  # noqa: E402

from coordinator.cli.client import ServiceClient  # noqa: E402
from coordinator.cli.daemon import start_daemon, stop_daemon  # noqa: E402
from coordinator.scripted_model.engine import request_tokens  # noqa: E402
from coordinator.service.chat.history import HistoryStore  # noqa: E402
from coordinator.user_state import personal_settings_path, project_state_dir  # noqa: E402
from protocol.model.tokens import estimate_messages  # noqa: E402
from protocol.wire.control import (  # noqa: E402
    AskRequest,
    Notice,
    StatusReply,
    StatusRequest,
    TurnEnded,
)

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

INTERLEAVED = 25  # the fresh session's turns, each beside one of the long session's last
WINDOW = 20  # turns per median: 6-25 against the last 20
FIRST = 6  # of the "turn 10" window


@dataclass
class Turn:
    wall_s: float
    cpu_s: float  # the coordinator's (it also runs the scripted model)
    compacted: bool
    completed: bool


class Session:
    """One service on its own copy of the sample project, played one turn at a time."""

    def __init__(self, base: Path, window: int, turns: int) -> None:
        self.project = copy_sample_project(base / "proj")
        (self.project / "big.txt").write_text(BIG)
        scenario = base / "context.yaml"
        scenario.write_text(
            yaml.safe_dump(
                {"name": "bench-context", "chunk_ms": 0, "context_window": window, "rules": RULES}
            )
        )
        project_state_dir(self.project)  # the person's own settings, as `config set` keeps them
        settings = {
            "scenario": str(scenario),
            "enableFollowupSuggestions": False,
            "enableMemory": False,
            "maxSessionTurns": max(200, turns),
        }
        personal_settings_path(self.project).write_text(json.dumps(settings))
        self.log = base / "model.jsonl"
        start_daemon(self.project, [], env={**os.environ, "SPECRUN_MODEL_LOG": str(self.log)})
        self.client = ServiceClient(self.project, timeout_s=120)
        first = self.client.request(StatusRequest(req_id=self.client.next_id()))
        assert isinstance(first, StatusReply)
        self.service = psutil.Process(first.pid)
        self.turns: list[Turn] = []

    def _cpu_s(self) -> float:
        times = self.service.cpu_times()
        return float(times.user + times.system)

    def turn(self) -> None:
        cpu_before = self._cpu_s()
        request = AskRequest(req_id=self.client.next_id(), text=f"read big.txt ({len(self.turns)})")
        began = time.perf_counter()
        self.client.send(request)
        replies = list(self.client.replies(request.req_id, timeout_s=120))
        took = time.perf_counter() - began
        end = replies[-1]
        self.turns.append(
            Turn(
                wall_s=took,
                cpu_s=self._cpu_s() - cpu_before,
                compacted=any(
                    isinstance(r, Notice) and r.text.startswith("Compacted") for r in replies
                ),
                completed=isinstance(end, TurnEnded) and end.reason == "completed",
            )
        )

    def compactions(self) -> int:
        status = self.client.request(StatusRequest(req_id=self.client.next_id()))
        assert isinstance(status, StatusReply) and status.context is not None
        return status.context.compactions

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            stop_daemon(self.project)

    def requests_refused_and_largest(self) -> tuple[int, int]:
        lines = self.log.read_text().splitlines()
        requests = [json.loads(line) for line in lines if line.strip()]
        posts = [r for r in requests if r["method"] == "POST" and r["purpose"] == "main"]
        refused = sum(1 for r in posts if r["status"] != 200)
        largest = max((request_tokens(r["body"], r["body"]["messages"]) for r in posts), default=0)
        return refused, largest


@dataclass
class Result:
    """One round: the long session, and the fresh one that ran beside its last turns."""

    turns: int
    window: int
    turn10_s: float  # the fresh session's turns 6-25, beside the long one's last 20
    last_s: float  # the long session's last ten
    ratio: float  # last_s / turn10_s: the goal is at most 1.2
    same_session_turn10_s: float  # the long session's own turns 6-25, minutes earlier
    same_session_ratio: float
    turn10_cpu_ms: float  # the mean over the window (the clock ticks in 10 ms)
    last_cpu_ms: float
    compaction_turn_s: float
    compactions: int
    refused_requests: int  # in both sessions
    largest_request_tokens: int
    full_history_tokens: int
    completed_turns: int  # of the long session
    fresh_completed_turns: int
    latencies_ms: list[int]  # the long session's, every turn in order
    fresh_latencies_ms: list[int]


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _window(turns: list[Turn], first: int) -> list[Turn]:
    """Turns ``first`` .. ``first + WINDOW - 1`` (counted from 1)."""
    return turns[first - 1 : first - 1 + WINDOW]


def _wall(turns: list[Turn]) -> float:
    return _median([t.wall_s for t in turns])


def _cpu_ms(turns: list[Turn]) -> float:
    return sum(t.cpu_s for t in turns) / len(turns) * 1000


def run_round(base: Path, turns: int, window: int) -> Result:
    """The long session alone up to ``turns - INTERLEAVED``, then turn by turn beside a
    fresh one; whichever went second in a pair goes first in the next."""
    long = Session(base / "long", window, turns)
    fresh: Session | None = None
    try:
        for _ in range(turns - INTERLEAVED):
            long.turn()
        fresh = Session(base / "fresh", window, turns)
        for n in range(INTERLEAVED):
            pair = (long, fresh) if n % 2 else (fresh, long)
            for session in pair:
                session.turn()
        compactions = long.compactions()
    finally:
        try:
            long.close()
        finally:
            if fresh is not None:
                fresh.close()
    refused, largest = long.requests_refused_and_largest()
    fresh_refused, fresh_largest = fresh.requests_refused_and_largest()
    full = HistoryStore(long.project).load_report().full_messages
    last_first = turns - WINDOW + 1
    fresh10, last_turns = _window(fresh.turns, FIRST), _window(long.turns, last_first)
    turn10, last, own10 = _wall(fresh10), _wall(last_turns), _wall(_window(long.turns, FIRST))
    return Result(
        turns=turns,
        window=window,
        turn10_s=turn10,
        last_s=last,
        ratio=last / turn10,
        same_session_turn10_s=own10,
        same_session_ratio=last / own10,
        turn10_cpu_ms=_cpu_ms(fresh10),
        last_cpu_ms=_cpu_ms(last_turns),
        compaction_turn_s=_median([t.wall_s for t in long.turns if t.compacted]),
        compactions=compactions,
        refused_requests=refused + fresh_refused,
        largest_request_tokens=max(largest, fresh_largest),
        full_history_tokens=estimate_messages(full),
        completed_turns=sum(t.completed for t in long.turns),
        fresh_completed_turns=sum(t.completed for t in fresh.turns),
        latencies_ms=[round(t.wall_s * 1000) for t in long.turns],
        fresh_latencies_ms=[round(t.wall_s * 1000) for t in fresh.turns],
    )


def start_hogs(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--window", type=int, default=32_768)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hog", type=int, default=0, help="busy-looping processes beside it")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.turns < INTERLEAVED + WINDOW:
        parser.error(f"--turns must be at least {INTERLEAVED + WINDOW}")
    results = []
    load = os.getloadavg()
    hogs = start_hogs(args.hog)
    base = Path(tempfile.mkdtemp(prefix="sr-bench-context-"))
    restore = use_runtime_dir(base / "run")
    try:
        for n in range(args.rounds):
            results.append(run_round(base / f"round{n}", args.turns, args.window))
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        restore()
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps([asdict(r) for r in results]))
        return 0

    def ms(values: list[float]) -> str:
        return f"{_median(values) * 1000:.0f} ms"

    def per_round(values: list[float]) -> str:
        return ", ".join(f"{x:.2f}" for x in values)

    turns, window = args.turns, args.window
    last_turns = f"{turns - WINDOW + 1}-{turns}"
    early = slice(FIRST - 1, FIRST - 1 + WINDOW)
    fresh10 = [t for r in results for t in r.fresh_latencies_ms[early]]
    own10 = [t for r in results for t in r.latencies_ms[early]]
    last = [t for r in results for t in r.latencies_ms[-WINDOW:]]
    rows = [
        (
            "rounds x turns completed (long + fresh)",
            f"{len(results)} x "
            + ", ".join(f"{r.completed_turns}+{r.fresh_completed_turns}" for r in results),
        ),
        ("busy-looping processes beside it", str(args.hog)),
        ("load average (1 min), start -> end", f"{load[0]:.1f} -> {os.getloadavg()[0]:.1f}"),
        (
            "turn 10 (a fresh session's turns 6-25)",
            f"{statistics.median(fresh10):.0f} ms (per round {ms([r.turn10_s for r in results])})",
        ),
        (
            f"turn {turns} (turns {last_turns}, interleaved)",
            f"{statistics.median(last):.0f} ms (per round {ms([r.last_s for r in results])})",
        ),
        ("ratio per round", per_round([r.ratio for r in results])),
        (
            "ratio of the pooled medians (goal <= 1.2)",
            f"{statistics.median(last) / statistics.median(fresh10):.2f}",
        ),
        ("the same session's turns 6-25, minutes earlier", f"{statistics.median(own10):.0f} ms"),
        (
            "same-session ratio, per round / pooled",
            f"{per_round([r.same_session_ratio for r in results])} / "
            f"{statistics.median(last) / statistics.median(own10):.2f}",
        ),
        (
            f"coordinator CPU per turn, turn 10 -> {turns}",
            f"{_median([r.turn10_cpu_ms for r in results]):.1f} -> "
            f"{_median([r.last_cpu_ms for r in results]):.1f} ms",
        ),
        ("turns that compacted (median)", ms([r.compaction_turn_s for r in results])),
        ("compactions per long session", ", ".join(str(r.compactions) for r in results)),
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
