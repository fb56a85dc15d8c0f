#!/usr/bin/env python3
"""Real test suites in a speculation (speculateShell) against the same suites run directly.

For each ecosystem this machine has (Python: a venv made from the default python3 with a
unittest suite, and with pytest when it can be installed; Node: ``npm test``; Rust:
``cargo test --offline``), a small project whose suite forks hundreds of processes one
after another and dozens at once, runs git fixtures (init, commit, clone through file://
and a plain path) and renames and deletes build directories (``tests/toolchain_projects``).

Each round: the suite runs directly in the user's environment (timed); the tree is reset;
then a real service (speculateShell on, the embedded scripted model) is asked a prompt, its
suggestion "run the tests" is speculated (the scripted model calls run_shell_command with
the suite's command), and Tab accepts it; the tree is reset again. The speculated time is
the speculation's own elapsed time as the service reports it (worker, model calls, the
sandbox and the suite together), the direct time the suite's wall time. The table shows
both medians, their ratio (goal: at most 1.3x) and whether the speculated run passed
exactly the tests the direct run passed.

Usage: scripts/bench_toolchains.py [--rounds N] [--forks N] [--at-once N] [--only NAME]
       [--no-pytest] [--json]
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench_service import prepared_scenario, timed_turn  # noqa: E402

from coordinator.cli.client import ServiceClient  # noqa: E402
from coordinator.cli.daemon import start_daemon, stop_daemon  # noqa: E402
from coordinator.service.chat.history import HistoryStore  # noqa: E402
from coordinator.user_state import personal_settings_path, project_state_dir  # noqa: E402
from protocol.wire.control import (  # noqa: E402
    AcceptRequest,
    AskRequest,
    ResetRequest,
    SuggestionReply,
    SuggestionRequest,
    TurnEnded,
)
from tests.toolchain_projects import (  # noqa: E402
    Project,
    available,
    python_project,
    reset,
    run_directly,
)

PROMPT = "run the tests"


def scenario(command: str) -> dict[str, Any]:
    run = {"name": "run_shell_command", "arguments": {"command": command, "timeout": 900}}
    return prepared_scenario("bench-toolchains", PROMPT, "Ready.", [
        {
            "when": {"turn_user": PROMPT, "last_tool": "run_shell_command"},
            "reply": {"text": "The suite ran."},
        },
        {"when": {"last_user": PROMPT}, "reply": {"tool_calls": [run]}},
    ])


SETTINGS = {
    "speculateShell": True,
    "speculationShellTimeoutS": 900,
    # a cargo target/ or a venv's caches are many files: room for them, so the quota is
    # not what is measured
    "overlayQuotaFiles": 50_000,
    "overlayQuotaMb": 4096,
    "commandCpuSeconds": 900,
    "workerPool": 1,
}


@dataclass
class Row:
    name: str
    direct_s: list[float] = field(default_factory=list)
    speculated_s: list[float] = field(default_factory=list)
    direct_passed: list[int | None] = field(default_factory=list)
    speculated_passed: list[int | None] = field(default_factory=list)
    expected: int = 0
    files_written: int = 0
    problem: str = ""

    def summary(self) -> dict[str, Any]:
        direct = statistics.median(self.direct_s) if self.direct_s else None
        spec = statistics.median(self.speculated_s) if self.speculated_s else None
        same = bool(self.speculated_passed) and all(
            s == d == self.expected
            for s, d in zip(self.speculated_passed, self.direct_passed, strict=True)
        )
        return {
            "ecosystem": self.name,
            "direct_s": direct,
            "speculated_s": spec,
            "ratio": spec / direct if direct and spec else None,
            "tests": self.expected,
            "direct_passed": self.direct_passed,
            "speculated_passed": self.speculated_passed,
            "same_as_direct": same,
            "files_written": self.files_written,
            "problem": self.problem,
        }


class Service:
    """A real service for one project, driven over its control socket."""

    def __init__(self, project: Project, base: Path) -> None:
        self.project = project
        path = base / f"{project.root.name}-scenario.json"
        path.write_text(json.dumps(scenario(project.command)))
        project_state_dir(project.root)  # the person's own settings, as `config set` keeps them
        personal_settings_path(project.root).write_text(
            json.dumps({**SETTINGS, "scenario": str(path)}))
        start_daemon(project.root, ["--approval-mode", "yolo"])
        self.client = ServiceClient(project.root, timeout_s=60)

    def speculate(self) -> tuple[float, int | None, str, int]:
        """(speculation's elapsed s, tests passed, the tool output, files written)."""
        self.client.request(ResetRequest(req_id=self.client.next_id()))
        self._turn(AskRequest(req_id=self.client.next_id(), text="prepare"))
        deadline = time.monotonic() + 1800
        while True:
            reply = self.client.request(SuggestionRequest(req_id=self.client.next_id()))
            assert isinstance(reply, SuggestionReply)
            spec = reply.speculation
            if spec is not None and spec.status not in ("running",):
                break
            if time.monotonic() > deadline:
                raise SystemExit("the speculation never finished; see the service log")
            time.sleep(0.05)
        if spec.status != "completed":
            why = spec.boundary_reason or spec.status
            return spec.elapsed_s, None, f"speculation ended {spec.status}: {why}", 0
        end = self._turn(AcceptRequest(req_id=self.client.next_id(), method="tab"))
        if end.reason != "accepted":
            return spec.elapsed_s, None, f"accept: {end.reason} {end.message}", 0
        output = self._last_shell_output()
        return spec.elapsed_s, self.project.passed(output), output, len(spec.files_written)

    def _turn(self, request: Any) -> TurnEnded:
        return timed_turn(self.client, request, timeout_s=1800)[1]

    def _last_shell_output(self) -> str:
        for message in reversed(HistoryStore(self.project.root).load()):
            for result in message.tool_results:
                if result.name == "run_shell_command":
                    return result.output or result.error or ""
        return ""

    def close(self) -> None:
        self.client.close()
        stop_daemon(self.project.root)


def _install_pytest(project: Project) -> bool:
    """pytest into the project's venv, from pip's cache or the index (best effort)."""
    python = str(project.root / ".venv" / "bin" / "python")
    steps = ([python, "-m", "ensurepip"], [python, "-m", "pip", "install", "-q", "pytest"])
    for argv in steps:
        if subprocess.run(argv, capture_output=True, timeout=300).returncode != 0:
            return False
    return True


def measure(name: str, project: Project, rounds: int, base: Path) -> Row:
    row = Row(name, expected=project.expected)
    service = Service(project, base)
    try:
        for i in range(rounds):
            # alternate which goes first, so neither always meets the colder caches
            for how in ("direct", "speculated") if i % 2 == 0 else ("speculated", "direct"):
                reset(project)
                if how == "direct":
                    code, output, seconds = run_directly(project)
                    row.direct_s.append(seconds)
                    row.direct_passed.append(project.passed(output) if code == 0 else None)
                    continue
                spec_s, passed, spec_output, files = service.speculate()
                row.speculated_s.append(spec_s)
                row.speculated_passed.append(passed)
                row.files_written = files
                if passed != project.expected and not row.problem:
                    row.problem = spec_output[-1500:]
            reset(project)
    finally:
        service.close()
    return row


def projects(
    base: Path, forks: int, at_once: int, only: str | None, pytest: bool
) -> list[tuple[str, Project]]:
    made: list[tuple[str, Project]] = []
    for name, builder in available().items():
        if only and name != only:
            continue
        made.append((name, builder(base / name, sequential=forks, concurrent=at_once)))
        if name == "python" and pytest:
            candidate = python_project(
                base / "python-pytest", sequential=forks, concurrent=at_once, pytest=True
            )
            if _install_pytest(candidate):
                made.append(("python (pytest)", candidate))
            else:
                print("pytest could not be installed: its row is left out", file=sys.stderr)
    return made


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    from _interrupt import stop_like_ctrl_c  # scripts/ is sys.path[0] when run

    stop_like_ctrl_c()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--forks", type=int, default=400, help="processes one after another")
    parser.add_argument("--at-once", type=int, default=40, help="processes at the same time")
    parser.add_argument("--only", choices=["python", "node", "rust"])
    parser.add_argument("--no-pytest", action="store_true", help="skip the pytest row")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="sr-tc-"))
    os.environ["SPECRUN_RUNTIME_DIR"] = str(base / "run")
    rows: list[dict[str, Any]] = []
    try:
        for name, project in projects(
            base, args.forks, args.at_once, args.only, not args.no_pytest
        ):
            rows.append(measure(name, project, args.rounds, base).summary())
    finally:
        if os.environ.get("SPECRUN_BENCH_KEEP"):
            print(f"kept {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(rows))
        return
    print(
        f"suites forking {args.forks} processes in a row and {args.at_once} at once, git "
        f"fixtures, build directories; medians of {args.rounds} rounds"
    )
    print(
        f"{'ecosystem':18} {'tests':>5} {'direct s':>9} {'speculated s':>13} {'ratio':>6} "
        f"{'same as direct':>15} {'files written':>14}"
    )
    for r in rows:
        print(
            f"{r['ecosystem']:18} {r['tests']:5d} {_fmt(r['direct_s'], '9.2f')} "
            f"{_fmt(r['speculated_s'], '13.2f')} {_fmt(r['ratio'], '5.2f')}x "
            f"{'yes' if r['same_as_direct'] else 'NO':>15} {r['files_written']:14d}"
        )
    for r in rows:
        if r["problem"]:
            print(f"\n{r['ecosystem']}: the speculated run did not pass as directly:\n"
                  f"{r['problem']}")


if __name__ == "__main__":
    main()
