#!/usr/bin/env python3
"""Speculation branches (``speculationBranches``): accept latency by rank, and what three
branches cost against one.

A real service on the scripted model (150 ms per model call) with ``speculationBranches``
3, in a copy of the sample project. After a main turn ("prepare three" or "prepare one")
the suggestion has three ranked alternatives, or one; each is speculated by its own
worker: 3 model turns, a read-only shell command and two files written in its overlay.

  - accept by rank: once all three completed (``suggestion --settled``), Tab with
    ``AcceptRequest.index`` = 0, 1 or 2 (in turn), from sending it to ``TurnEnded`` (the
    files are on disk, the other two overlays removed). Baseline: rank 0, same run.
  - 3 branches vs 1: rounds alternate between the two kinds of suggestion on the same
    service. Wall: from the main turn's end to every branch completed. CPU: user + system
    seconds of the service's whole process tree (psutil: the service, its fork server,
    the workers, their sandbox helpers and commands; an exited process counts through its
    parent's reaped-children times) from the main turn's end until the branches' workers
    have exited and the pool is warm again, so replacing the used workers counts too.

Usage: scripts/bench_branches.py [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _bench_service import use_runtime_dir  # noqa: E402
from _sample_project import copy_sample_project  # noqa: E402

from coordinator.cli.client import ServiceClient  # noqa: E402
from coordinator.cli.daemon import start_daemon, stop_daemon  # noqa: E402
from coordinator.service.pool.cpu import tree_cpu_seconds  # noqa: E402
from coordinator.user_state import personal_settings_path, project_state_dir  # noqa: E402
from protocol.wire.control import (  # noqa: E402
    AcceptRequest,
    AskRequest,
    ResetRequest,
    StatusReply,
    StatusRequest,
    SuggestionReply,
    SuggestionRequest,
    TurnEnded,
)

LATENCY_MS = 150
BRANCHES = 3
PROMPTS = (
    "write the release notes",
    "write the upgrade guide",
    "draft the announcement",
)
SHELL = {"name": "run_shell_command", "arguments": {"command": "git status --short"}}


def branch_files(rank: int) -> dict[str, str]:
    return {
        f"docs/b{rank}/{name}.md": f"# {name} (branch {rank})\n\n- fixed add()\n"
        for name in ("RELEASE", "CHANGELOG")
    }


def scenario() -> dict[str, Any]:
    rules: list[dict[str, Any]] = [
        {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
        {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
        {
            "when": {"purpose": "suggestion", "prompt_contains": "Ready for three."},
            "reply": {"suggestions": list(PROMPTS)},
        },
        {
            "when": {"purpose": "suggestion", "prompt_contains": "Ready for one."},
            "reply": {"suggestions": [PROMPTS[0]]},
        },
        {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}},
    ]
    for word in ("three", "one"):
        rules += [
            {
                "when": {"last_user": f"^prepare {word}$"},
                "reply": {"tool_calls": [{"name": "list_directory", "arguments": {"path": "."}}]},
            },
            {
                "when": {"turn_user": f"^prepare {word}$", "last_tool": "list_directory"},
                "reply": {"text": f"Ready for {word}."},
            },
        ]
    for rank, prompt in enumerate(PROMPTS):
        release, changelog = (
            {"name": "write_file", "arguments": {"file_path": rel, "content": body}}
            for rel, body in branch_files(rank).items()
        )
        rules += [
            {
                "when": {"turn_user": f"^{prompt}$", "last_tool": "run_shell_command"},
                "reply": {"text": f"Done: {prompt}."},
            },
            {
                "when": {"turn_user": f"^{prompt}$", "last_tool": "write_file"},
                "reply": {"tool_calls": [changelog, SHELL]},
            },
            {"when": {"last_user": f"^{prompt}$"}, "reply": {"tool_calls": [release]}},
        ]
    rules.append({"default": {"text": "ok"}})
    return {"name": "bench-branches", "latency_ms": LATENCY_MS, "chunk_ms": 1, "rules": rules}


def tree_cpu_s(pid: int) -> float:
    """The CPU seconds of ``pid``'s tree as the service counts a speculation's (its reaped
    children included), 0 once it is gone."""
    return tree_cpu_seconds(pid) or 0.0


class BranchService:
    """A real service (``specrun serve``) with ``speculationBranches`` 3."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="sr-branches-"))
        self.project = self.base / "proj"
        copy_sample_project(self.project)
        project_state_dir(self.project)  # the person's own settings, as `config set` keeps them
        settings = personal_settings_path(self.project)
        settings.write_text(json.dumps({"speculationBranches": BRANCHES, "enableMemory": False}))
        path = self.base / "scenario.json"
        path.write_text(json.dumps(scenario()))
        self._restore = use_runtime_dir(self.base / "run")
        try:
            start_daemon(self.project, ["--scenario", str(path), "--approval-mode", "auto-edit"])
        except BaseException:
            self._restore()
            shutil.rmtree(self.base, ignore_errors=True)
            raise
        self.client = ServiceClient(self.project, timeout_s=120)
        self.pid = self.status().pid

    def status(self) -> StatusReply:
        reply = self.client.request(StatusRequest(req_id=self.client.next_id()))
        assert isinstance(reply, StatusReply), reply
        return reply

    def prepare(self, word: str) -> float:
        """A fresh session and its main turn; returns the perf_counter at its end."""
        self.client.request(ResetRequest(req_id=self.client.next_id()))
        request = AskRequest(req_id=self.client.next_id(), text=f"prepare {word}")
        self.client.send(request)
        *_, end = self.client.replies(request.req_id, timeout_s=120)
        assert isinstance(end, TurnEnded) and end.reason == "completed", end
        return time.perf_counter()

    def settled(self, branches: int) -> SuggestionReply:
        """Until no branch runs (one request: the service answers when they are done)."""
        request = SuggestionRequest(req_id=self.client.next_id(), wait_settled=True)
        reply = self.client.request(request, timeout_s=120)
        assert isinstance(reply, SuggestionReply), reply
        statuses = [b.speculation and b.speculation.status for b in reply.branches]
        assert statuses == ["completed"] * branches, reply
        return reply

    def wait_idle(self, pids: list[int]) -> None:
        """The branches' workers have exited and the pool is warm again."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            gone = all(not psutil.pid_exists(pid) or _zombie(pid) for pid in pids)
            status = self.status()
            if gone and status.pool_warm and all(w.state == "idle" for w in status.workers):
                return
            time.sleep(0.02)
        raise RuntimeError(f"workers {pids} or the pool did not settle within 60 s")

    def clear_files(self) -> None:
        shutil.rmtree(self.project / "docs", ignore_errors=True)

    def close(self) -> None:
        try:
            self.client.close()
            stop_daemon(self.project)
        finally:
            self._restore()
            shutil.rmtree(self.base, ignore_errors=True)


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _worker_pids(reply: SuggestionReply) -> list[int]:
    specs = [b.speculation for b in reply.branches if b.speculation is not None]
    return [s.worker_pid for s in specs if s.worker_pid]


def accept_by_rank(svc: BranchService, rounds: int) -> dict[int, list[float]]:
    """Seconds from Tab (index = rank) to TurnEnded, by rank, all three completed."""
    took: dict[int, list[float]] = {rank: [] for rank in range(BRANCHES)}
    for _ in range(rounds):
        for rank in range(BRANCHES):
            svc.prepare("three")
            reply = svc.settled(BRANCHES)
            svc.wait_idle(_worker_pids(reply))
            request = AcceptRequest(req_id=svc.client.next_id(), method="tab", index=rank)
            t0 = time.perf_counter()
            svc.client.send(request)
            *_, end = svc.client.replies(request.req_id, timeout_s=120)
            elapsed = time.perf_counter() - t0
            assert isinstance(end, TurnEnded) and end.reason == "accepted", end
            for rel, body in branch_files(rank).items():
                assert (svc.project / rel).read_text() == body, rel
            others = {p for r in range(BRANCHES) if r != rank for p in branch_files(r)}
            assert not any((svc.project / rel).exists() for rel in others)
            took[rank].append(elapsed)
            svc.clear_files()
    return took


def cost_one_vs_three(svc: BranchService, rounds: int) -> dict[int, dict[str, list[float]]]:
    """Wall (turn end -> all completed) and tree CPU seconds, for 1 and for 3 branches."""
    out: dict[int, dict[str, list[float]]] = {n: {"wall": [], "cpu": []} for n in (1, BRANCHES)}
    for i in range(2 * rounds):
        n = BRANCHES if i % 2 else 1
        svc.client.request(ResetRequest(req_id=svc.client.next_id()))
        svc.wait_idle([])
        # The main turn is the same for both; what follows its end is what branches cost.
        t_end = svc.prepare("three" if n == BRANCHES else "one")
        cpu_end = tree_cpu_s(svc.pid)
        reply = svc.settled(n)
        wall = time.perf_counter() - t_end
        svc.wait_idle(_worker_pids(reply))
        out[n]["wall"].append(wall)
        out[n]["cpu"].append(tree_cpu_s(svc.pid) - cpu_end)
    return out


def measure(rounds: int) -> dict[str, Any]:
    svc = BranchService()
    try:
        cost_one_vs_three(svc, 1)  # warm-up: first imports, first spawns
        ranks = accept_by_rank(svc, rounds)
        cost = cost_one_vs_three(svc, rounds)
    finally:
        svc.close()
    ms = 1000.0
    return {
        "rounds": rounds,
        "model_latency_ms": LATENCY_MS,
        "accept_ms_by_rank": {r: statistics.median(v) * ms for r, v in ranks.items()},
        "wall_ms": {n: statistics.median(c["wall"]) * ms for n, c in cost.items()},
        "cpu_s": {n: statistics.median(c["cpu"]) for n, c in cost.items()},
        "samples": {
            "accept_ms_by_rank": {r: [round(x * ms, 2) for x in v] for r, v in ranks.items()},
            "wall_ms": {n: [round(x * ms, 1) for x in c["wall"]] for n, c in cost.items()},
            "cpu_s": {n: [round(x, 3) for x in c["cpu"]] for n, c in cost.items()},
        },
    }


def main() -> None:
    from _interrupt import stop_like_ctrl_c  # scripts/ is sys.path[0] when run

    stop_like_ctrl_c()  # SIGTERM too stops what this script started
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="samples per rank and per kind")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = measure(args.rounds)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    print(f"scripted model at {LATENCY_MS} ms per call; medians of {r['rounds']} samples")
    for rank, value in r["accept_ms_by_rank"].items():
        print(f"accept of rank {rank} (3 completed branches)  {value:9.2f} ms")
    for n in (1, BRANCHES):
        print(
            f"{n} branch{'es' if n > 1 else '  '} to completion: wall {r['wall_ms'][n]:8.1f} ms, "
            f"CPU {r['cpu_s'][n]:.3f} s"
        )


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
