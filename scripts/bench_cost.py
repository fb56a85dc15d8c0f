#!/usr/bin/env python3
"""What speculation costs in tokens, and how much of it a provider's prefix cache serves.

A real service on the embedded scripted model, in a copy of the demo's sample project
with its shipped scenario: the fix query, Tab on "add a test for negative numbers", Tab on
the pipelined "show me the diff". The scripted model's usage simulates a provider prefix
cache (the longest run of leading request segments, tools then messages, shared with an
earlier request of the same model counts as cached). Read from `specrun stats` at the end:
  - measured: the cached share of the prompt tokens of `speculation` requests; it is high
    only if a fork's request starts with the main chat's bytes exactly (system, tools,
    history), which is what the cache-safe snapshot is for;
  - baseline: the cached share of the main chat's own prompt tokens in the same run (each
    main turn extends the previous one's request, the best case of a prefix cache);
  - also: the share of speculation tokens spent on accepted speculations, and the time
    saved per 1,000 speculation tokens.
Usage: scripts/bench_cost.py [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench_service import runtime_dir, timed_turn  # noqa: E402
from _sample_project import copy_sample_project  # noqa: E402

from coordinator.cli.client import ServiceClient  # noqa: E402
from coordinator.cli.daemon import start_daemon, stop_daemon  # noqa: E402
from protocol.wire.control import (  # noqa: E402
    AcceptRequest,
    AskRequest,
    StatsReply,
    StatsRequest,
    SuggestionReply,
    SuggestionRequest,
    TurnEnded,
)

FIX = "fix the failing test in tests/test_calc.py"
TABS = ("add a test for negative numbers", "show me the diff")


@dataclass
class Cost:
    speculation_prompt: int = 0
    speculation_cached: int = 0
    main_prompt: int = 0
    main_cached: int = 0
    speculation_tokens: int = 0
    accepted_tokens: int = 0
    time_saved_s: float = 0.0

    def add(self, stats: StatsReply) -> None:
        spec, main = stats.tokens["speculation"], stats.tokens["main"]
        self.speculation_prompt += spec.prompt
        self.speculation_cached += spec.cached_prompt
        self.main_prompt += main.prompt
        self.main_cached += main.cached_prompt
        self.speculation_tokens += stats.speculation_tokens.total
        self.accepted_tokens += stats.speculation_tokens.accepted
        self.time_saved_s += stats.time_saved_total_s

    @property
    def speculation_cached_share(self) -> float:
        return self.speculation_cached / self.speculation_prompt if self.speculation_prompt else 0.0

    @property
    def main_cached_share(self) -> float:
        return self.main_cached / self.main_prompt if self.main_prompt else 0.0

    @property
    def accepted_share(self) -> float:
        return self.accepted_tokens / self.speculation_tokens if self.speculation_tokens else 0.0

    @property
    def saved_per_1k_tokens_s(self) -> float:
        tokens = self.speculation_tokens
        return self.time_saved_s / (tokens / 1000) if tokens else 0.0


def _wait_completed(client: ServiceClient, text: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        reply = client.request(SuggestionRequest(req_id=client.next_id()))
        assert isinstance(reply, SuggestionReply)
        spec = reply.speculation
        if reply.text == text and spec is not None:
            if spec.status == "completed" and spec.pipelined_suggestion is not None:
                return  # its pipelined request is counted too
            if spec.status in ("failed", "boundary", "aborted"):
                raise RuntimeError(f"the speculation of {text!r} ended {spec.status}")
        time.sleep(0.01)
    raise RuntimeError(f"the speculation of {text!r} never completed")


def _turn(client: ServiceClient, request: AskRequest | AcceptRequest) -> TurnEnded:
    return timed_turn(client, request, timeout_s=120)[1]


def one_session(base: Path) -> StatsReply:
    """The demo's session in a fresh copy of the sample project; its stats."""
    project = base / "proj"
    copy_sample_project(project)
    with runtime_dir(base / "run"):
        start_daemon(project, ["--approval-mode", "auto-edit"])
        client = ServiceClient(project, timeout_s=120)
        try:
            end = _turn(client, AskRequest(req_id=client.next_id(), text=FIX))
            assert end.reason == "completed", end
            for text in TABS:
                _wait_completed(client, text)
                end = _turn(client, AcceptRequest(req_id=client.next_id(), method="tab"))
                assert end.reason == "accepted", end
            stats = client.request(StatsRequest(req_id=client.next_id()))
            assert isinstance(stats, StatsReply), stats
            return stats
        finally:
            client.close()
            stop_daemon(project)


def measure(rounds: int) -> Cost:
    cost = Cost()
    for _ in range(rounds):
        base = Path(tempfile.mkdtemp(prefix="sr-bench-cost-"))
        try:
            cost.add(one_session(base))
        finally:
            shutil.rmtree(base, ignore_errors=True)
    return cost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cost = measure(args.rounds)
    if args.json:
        print(json.dumps(asdict(cost)))
        return 0
    print(
        f"speculation prompt tokens cached: {cost.speculation_cached_share:.1%} "
        f"({cost.speculation_cached:,} of {cost.speculation_prompt:,})\n"
        f"main chat prompt tokens cached:   {cost.main_cached_share:.1%} "
        f"({cost.main_cached:,} of {cost.main_prompt:,})\n"
        f"speculation tokens on accepted speculations: {cost.accepted_share:.1%} of "
        f"{cost.speculation_tokens:,}; time saved {cost.saved_per_1k_tokens_s:.3f} s "
        "per 1,000 speculation tokens"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
