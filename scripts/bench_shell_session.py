#!/usr/bin/env python3
""""Build it", then "run the tests": two commands in one speculation against the same two
run directly, per toolchain (make, cargo, tsc, jest, a git-heavy suite).

A speculation's commands should see each other's work as a shell would: the second
command finds what the first built with its times, links and caches, so it has as little
to do as it has directly. For each project (``scripts/_shell_projects.py``; a toolchain
this machine lacks is skipped with one line) and each round, alternating:

* directly: a fresh copy of the project, the two commands one after the other in the
  user's environment; once with the copy on the disk (``/tmp`` here, as a user runs it)
  and once with the copy and ``TMPDIR`` on a tmpfs (``/dev/shm``), the file system a
  speculation's writes and ``/tmp`` are on: on a machine whose disk is busy, the disk
  alone makes the direct run several times slower, which is no measure of the sandbox;
* speculated: a real service (speculateShell on, the embedded scripted model) is asked a
  prompt, its suggestion is speculated, and the scripted model calls
  ``run_shell_command`` twice, build then test; the speculation is rejected afterwards, so
  the service's tree stays as cold as the direct copies.

Each command is timed inside its own shell (bash's ``EPOCHREALTIME`` around it), the same
way in both places, so the ratio is the command's own cost in the sandbox; the
speculation's tool results are read whole (``suggestion --transcript --full``). The table
shows medians and the ratio per command to the tmpfs baseline (goal: the second command
within 1.3x) and to the disk baseline; jest's direct baseline for its second run is a warm
run (its first run in the same copy filled the cache).

Usage: scripts/bench_shell_session.py [--rounds N] [--only NAME] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _bench_service import prepared_scenario, timed_turn  # noqa: E402
from _shell_projects import PairProject, available  # noqa: E402

from coordinator.cli.client import ServiceClient  # noqa: E402
from coordinator.cli.daemon import start_daemon, stop_daemon  # noqa: E402
from protocol.wire.control import (  # noqa: E402
    AskRequest,
    RejectRequest,
    ResetRequest,
    SuggestionReply,
    SuggestionRequest,
    TurnEnded,
)

PROMPT = "build it and run the tests"
_BENCH_LINE = re.compile(r"^BENCH rc=(-?\d+) us=(\d+)$", re.M)

SETTINGS = {
    "speculateShell": True,
    "speculationShellTimeoutS": 900,
    "speculationTimeoutS": 1800,
    "overlayQuotaFiles": 50_000,
    "overlayQuotaMb": 4096,
    "commandCpuSeconds": 900,
    "workerPool": 1,
}


def timed(command: str) -> str:
    """``command`` timed inside its own shell; prints ``BENCH rc=N us=N`` first, then the
    end of its output."""
    return (
        f"t0=$EPOCHREALTIME; out=$( {{ {command} ; }} 2>&1 ); rc=$?; t1=$EPOCHREALTIME; "
        'echo "BENCH rc=$rc us=$(( ${t1/./} - ${t0/./} ))"; printf "%s\\n" "${out: -1500}"'
    )


def parse(output: str) -> tuple[int, float] | None:
    found = _BENCH_LINE.search(output)
    return (int(found.group(1)), int(found.group(2)) / 1e6) if found else None


def scenario(project: PairProject) -> dict[str, Any]:
    calls = [
        {"name": "run_shell_command", "arguments": {"command": timed(c), "timeout": 900}}
        for c in (project.build, project.test)
    ]
    return prepared_scenario("bench-shell-session", PROMPT, "Ready.", [
        {
            "when": {"turn_user": PROMPT, "last_tool": "run_shell_command"},
            "reply": {"text": "Built and tested."},
        },
        {"when": {"last_user": PROMPT}, "reply": {"tool_calls": calls}},
    ])


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass
class Row:
    name: str
    direct: list[list[float]] = field(default_factory=lambda: [[], []])  # on the disk
    tmpfs: list[list[float]] = field(default_factory=lambda: [[], []])
    speculated: list[list[float]] = field(default_factory=lambda: [[], []])
    problem: str = ""

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"toolchain": self.name, "problem": self.problem}
        for i, which in enumerate(("build", "test")):
            d, t, s = (_median(v[i]) for v in (self.direct, self.tmpfs, self.speculated))
            out[which] = {
                "direct_s": d, "tmpfs_s": t, "speculated_s": s,
                "ratio": s / t if t and s else None,
                "ratio_disk": s / d if d and s else None,
                "direct_runs": self.direct[i], "tmpfs_runs": self.tmpfs[i],
                "speculated_runs": self.speculated[i],
            }
        return out


def run_directly(
    template: Path, base: Path, project: PairProject, *, tmpfs: bool = False
) -> list[tuple[int, float]]:
    copy = Path(tempfile.mkdtemp(prefix="direct-", dir="/dev/shm" if tmpfs else base))
    env = {**os.environ}
    if tmpfs:
        (copy / "tmp").mkdir()
        env["TMPDIR"] = str(copy / "tmp")
    try:
        root = copy / template.name
        shutil.copytree(template, root, symlinks=True)
        times = []
        for command in (project.build, project.test):
            done = subprocess.run(
                ["bash", "-c", timed(command)], cwd=root, capture_output=True, text=True,
                timeout=1800, env=env,
            )
            found = parse(done.stdout)
            if found is None:
                raise RuntimeError(f"no timing in: {done.stdout[-500:]} {done.stderr[-500:]}")
            times.append(found)
        return times
    finally:
        shutil.rmtree(copy, ignore_errors=True)


class Service:
    """A real service on the pristine project, driven over its control socket."""

    def __init__(self, project: PairProject, base: Path) -> None:
        self.root = project.root
        path = base / f"{project.root.name}-scenario.json"
        path.write_text(json.dumps(scenario(project)))
        state = project.root / ".specrun"
        state.mkdir(exist_ok=True)
        (state / "settings.json").write_text(json.dumps({**SETTINGS, "scenario": str(path)}))
        start_daemon(project.root, ["--approval-mode", "yolo"])
        self.client = ServiceClient(project.root, timeout_s=60)

    def speculate(self) -> list[tuple[int, float]] | str:
        self.client.request(ResetRequest(req_id=self.client.next_id()))
        self._turn(AskRequest(req_id=self.client.next_id(), text="prepare"))
        deadline = time.monotonic() + 3600
        while True:
            reply = self.client.request(SuggestionRequest(req_id=self.client.next_id()))
            assert isinstance(reply, SuggestionReply)
            spec = reply.speculation
            if spec is not None and spec.status != "running":
                break
            if time.monotonic() > deadline:
                raise SystemExit("the speculation never finished; see the service log")
            time.sleep(0.1)
        reply = self.client.request(
            SuggestionRequest(req_id=self.client.next_id(), transcript=0, full=True)
        )
        assert isinstance(reply, SuggestionReply)
        self.client.request(RejectRequest(req_id=self.client.next_id()))
        if spec.status != "completed":
            return f"speculation ended {spec.status}: {spec.boundary_reason or ''}"
        results = [e.text for e in reply.transcript if e.kind == "tool"
                   and e.tool == "run_shell_command"]
        times = [parse(text) for text in results]
        if len(times) != 2 or None in times:
            return f"no timing in the results: {[r[:300] for r in results]}"
        return [t for t in times if t is not None]

    def _turn(self, request: Any) -> TurnEnded:
        return timed_turn(self.client, request, timeout_s=1800)[1]

    def close(self) -> None:
        self.client.close()
        stop_daemon(self.root)


def measure(project: PairProject, rounds: int, base: Path) -> Row:
    row = Row(project.name)
    template = base / f"{project.root.name}-template"
    shutil.copytree(project.root, template, symlinks=True)
    service = Service(project, base)
    try:
        for _ in range(rounds):
            for times, tmpfs in ((row.direct, False), (row.tmpfs, True)):
                for i, (rc, seconds) in enumerate(
                    run_directly(template, base, project, tmpfs=tmpfs)
                ):
                    times[i].append(seconds)
                    if rc != 0:
                        row.problem = f"direct command {i + 1} exited {rc}"
            got = service.speculate()
            if isinstance(got, str):
                row.problem = got
                continue
            for i, (rc, seconds) in enumerate(got):
                row.speculated[i].append(seconds)
                if rc != 0:
                    row.problem = f"speculated command {i + 1} exited {rc}"
    finally:
        service.close()
    return row


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", action="append", default=[],
                        help="a toolchain's name (make, cargo, tsc, jest, git)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-shell-session-") as tmp:
        base = Path(tmp)
        for name, project, why in available(base):
            if args.only and not any(name.startswith(o) for o in args.only):
                continue
            if project is None:
                print(f"skipped {name}: {why}")
                continue
            rows.append(measure(project, args.rounds, base))
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    summaries = [r.summary() for r in rows]
    if args.json:
        print(json.dumps({"load": [load_before, load_after], "rows": summaries}, indent=2))
        return
    print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)};"
          f" medians of {args.rounds} alternating rounds; times inside each command's shell")
    print(f"{'toolchain':<10} {'command':<6} {'on disk':>9} {'on tmpfs':>9} {'speculated':>11}"
          f" {'ratio':>7} {'vs disk':>8}")
    for s in summaries:
        for which in ("build", "test"):
            m = s[which]
            print(f"{s['toolchain']:<10} {which:<6} {_fmt(m['direct_s'], '8.3f')}s "
                  f"{_fmt(m['tmpfs_s'], '8.3f')}s {_fmt(m['speculated_s'], '10.3f')}s "
                  f"{_fmt(m['ratio'], '6.2f')}x {_fmt(m['ratio_disk'], '7.2f')}x")
        if s["problem"]:
            print(f"  {s['toolchain']}: {s['problem']}")


if __name__ == "__main__":
    main()
