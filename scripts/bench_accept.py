#!/usr/bin/env python3
"""Accept latency with speculation vs the same prompt as a normal turn, and abort latency.

A real service on the scripted model (800 ms per model call): a main turn, then the
suggestion "write the release notes", whose speculation takes 3 model turns and writes two
files in its overlay. Measured from the client, through the real control socket:
  - accept: from sending Tab to the transcript and the files being on disk;
  - baseline: the same prompt typed as a normal turn (model and tools for real);
  - abort: `reject` of a running speculation that has written into its overlay, i.e. kill
    the worker's process group, reap it and remove the overlay (median, p99).
Usage: scripts/bench_accept.py [--rounds N] [--aborts N] [--json]
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench_service import prepared_scenario, timed_turn  # noqa: E402
from _sample_project import copy_sample_project  # noqa: E402

from coordinator.cli.client import ServiceClient  # noqa: E402
from coordinator.cli.daemon import start_daemon, stop_daemon  # noqa: E402
from protocol.wire.control import (  # noqa: E402
    AcceptRequest,
    AskRequest,
    RejectRequest,
    ResetRequest,
    SuggestionReply,
    SuggestionRequest,
    TurnEnded,
)

PROMPT = "write the release notes"


def notes(name: str) -> dict[str, Any]:
    body = f"# {name}\n\n- fixed add()\n"
    return {"name": "write_file", "arguments": {"file_path": f"docs/{name}.md", "content": body}}


def scenario(latency_ms: int, stall_third_turn: bool) -> dict[str, Any]:
    third = {"text": "Wrote the release notes and the changelog."}
    if stall_third_turn:
        third["latency_ms"] = 600_000  # still running when it is aborted
    return prepared_scenario("bench-accept", PROMPT, "Ok.", [
        {"when": {"last_user": PROMPT}, "reply": {"tool_calls": [notes("RELEASE")]}},
        {
            "when": {
                "turn_user": PROMPT,
                "last_tool": "write_file",
                "prompt_contains": "CHANGELOG.md (",
            },
            "reply": third,
        },
        {
            "when": {"turn_user": PROMPT, "last_tool": "write_file"},
            "reply": {"tool_calls": [notes("CHANGELOG")]},
        },
    ], latency_ms=latency_ms, chunk_ms=1)


class Service:
    def __init__(self, latency_ms: int, stall: bool) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="sr-acc-"))
        try:
            self.project = self.base / "proj"
            copy_sample_project(self.project)
            (self.project / "docs").mkdir()
            path = self.base / "scenario.json"
            path.write_text(json.dumps(scenario(latency_ms, stall)))
            os.environ["SPECRUN_RUNTIME_DIR"] = str(self.base / "run")
            start_daemon(self.project, ["--scenario", str(path), "--approval-mode", "auto-edit"])
        except BaseException:  # Ctrl-C while it starts: start_daemon stopped the service
            shutil.rmtree(self.base, ignore_errors=True)
            raise
        self.client = ServiceClient(self.project, timeout_s=60)

    def turn(self, request: Any) -> tuple[float, TurnEnded]:
        return timed_turn(self.client, request, timeout_s=120)

    def reset(self) -> None:
        """A fresh session per round: the scenario keys on what this round's history holds."""
        self.client.request(ResetRequest(req_id=self.client.next_id()))

    def ask(self, text: str) -> tuple[float, TurnEnded]:
        return self.turn(AskRequest(req_id=self.client.next_id(), text=text))

    def speculation(self, statuses: tuple[str, ...], need_files: int = 0) -> SuggestionReply:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            reply = self.client.request(SuggestionRequest(req_id=self.client.next_id()))
            assert isinstance(reply, SuggestionReply)
            spec = reply.speculation
            if spec and spec.status in statuses and spec.tool_uses >= need_files:
                return reply
            time.sleep(0.005)
        raise SystemExit("the speculation never got ready; see the service log")

    def close(self) -> None:
        self.client.close()
        stop_daemon(self.project)
        if os.environ.get("SPECRUN_BENCH_KEEP"):
            print(f"kept {self.base}", file=sys.stderr)
            return
        shutil.rmtree(self.base, ignore_errors=True)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def measure(rounds: int, aborts: int, latency_ms: int = 800) -> dict[str, Any]:
    accept, normal = [], []
    svc = Service(latency_ms=latency_ms, stall=False)
    try:
        for _ in range(rounds):
            svc.reset()
            svc.ask("prepare")
            svc.speculation(("completed",))
            took, end = svc.turn(AcceptRequest(req_id=svc.client.next_id(), method="tab"))
            assert end.reason == "accepted", end
            assert (svc.project / "docs" / "CHANGELOG.md").exists()
            accept.append(took)
            for f in (svc.project / "docs").iterdir():
                f.unlink()
            svc.reset()
            svc.ask("prepare")
            svc.client.request(RejectRequest(req_id=svc.client.next_id()))
            took, end = svc.ask(PROMPT)  # the baseline: the same prompt as a normal turn
            assert end.reason == "completed", end
            normal.append(took)
            for f in (svc.project / "docs").iterdir():
                f.unlink()
    finally:
        svc.close()

    abort = []
    svc = Service(latency_ms=2, stall=True)
    try:
        for _ in range(aborts):
            svc.reset()
            svc.ask("prepare")
            svc.speculation(("running",), need_files=2)  # both files are in the overlay
            t0 = time.perf_counter()
            svc.client.request(RejectRequest(req_id=svc.client.next_id()))
            abort.append(time.perf_counter() - t0)
    finally:
        svc.close()

    ms = 1000.0
    return {
        "accept_ms": statistics.median(accept) * ms,
        "normal_turn_ms": statistics.median(normal) * ms,
        "abort_median_ms": statistics.median(abort) * ms,
        "abort_p99_ms": p99(abort) * ms,
        "rounds": rounds,
        "aborts": aborts,
    }


def main() -> None:
    from _interrupt import stop_like_ctrl_c  # scripts/ is sys.path[0] when run

    stop_like_ctrl_c()  # SIGTERM too stops what this script started
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="accept vs normal turn rounds")
    parser.add_argument("--aborts", type=int, default=100)
    parser.add_argument("--latency-ms", type=int, default=800, help="scripted model latency")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = measure(args.rounds, args.aborts, args.latency_ms)
    if args.json:
        print(json.dumps(r))
        return
    print(
        f"scripted model at {args.latency_ms} ms per call, 3-turn speculation; "
        f"medians of {r['rounds']} rounds"
    )
    print(f"{'what':44} {'ms':>10}")
    print(f"{'accept with speculation (Tab to files+transcript)':44} {r['accept_ms']:10.1f}")
    print(f"{'same prompt as a normal turn (baseline)':44} {r['normal_turn_ms']:10.1f}")
    print(f"{'speed-up':44} {r['normal_turn_ms'] / r['accept_ms']:9.0f}x")
    print(f"abort (kill + reap + overlay removed), {r['aborts']} aborts")
    print(f"{'  median':44} {r['abort_median_ms']:10.2f}")
    print(f"{'  p99':44} {r['abort_p99_ms']:10.2f}")


if __name__ == "__main__":
    main()
