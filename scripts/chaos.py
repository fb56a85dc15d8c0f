#!/usr/bin/env python3
"""Chaos run: a real specrun service on the scripted model, one random fault per round.

Each round asks a main turn whose suggestion is speculated by a worker: the speculation
reads a file, runs read-only shell commands (one of them slow enough to be caught in the
act), writes four files into its overlay (three new, one existing) and answers. Then one
fault strikes at an aimed moment (or none), the speculation is accepted, rejected or
superseded by another query, and every invariant is checked:

* the real tree is byte-identical to the expected state: untouched, or exactly the
  accepted result, never a mix and never a truncated file;
* no overlay directory, journal, stage/backup or journal temp file is left behind (a live
  pool worker's own empty per-pid directory is the only thing allowed);
* no worker that is not in the pool, no zombie, no stopped process, no orphaned child of a
  worker, nothing alive after the coordinator died;
* the coordinator answers ``status`` within 1 s and the history file loads;
* the speculation ends in a terminal state that ``specrun suggestion --json`` reports;
* a prompt typed while a speculation runs (``type_while_running``) reaches the model within
  ``TYPED_AFTER_ABORT_BOUND_S`` of being sent: the abort never holds it up (the latency is
  reported as a distribution).

The service runs with ``speculationBranches`` set to ``--branches`` (3 by default), and
some rounds are branch rounds: the suggestion has three ranked alternatives, each
speculated by its own worker in its own overlay (the third one answers slowly, so it is
often still running while the others are done), each trying the same escapes and writing
its own files (all three overwrite the same existing file, with different contents). A
branch round accepts a non-first rank, kills one branch's worker while another is
accepted or before, or types text that keeps some branches and drops the others, then
accepts one of those left or types one out in full. On top of the checks above:

* after an accept, a reject or typing, every branch that was not kept has its worker dead
  and its overlay directory gone within a short bound (``BRANCH_GONE_BOUND_S``);
* the tree holds exactly the accepted branch's files (a mix of branches is ``corrupt``),
  the accept's transcript names them, and the history holds that branch's prompt;
* the next suggestion is the accepted branch's pipelined one (each branch's is distinct);
* a sibling's death leaves the other branches running to completion, the reply to typing
  lists exactly the branches the typed text is a prefix of, and accepting a rank that is
  gone answers ``not_found`` without touching anything;
* ``stats`` counts the accept under the accepted rank (and as ``prefix_kept`` or
  ``exact_match`` when typing led to it).

    .venv/bin/python scripts/chaos.py                     # 200 rounds, seed 1
    .venv/bin/python scripts/chaos.py --rounds 50 --seed 7 --json
    .venv/bin/python scripts/chaos.py --only enospc,hang_running --rounds 10 -v
    .venv/bin/python scripts/chaos.py --only branch_typing,branch_accept_rank --rounds 8 -v

The service runs with TMPDIR on a small tmpfs mounted for the run (so the ``enospc`` fault
can fill the overlay's disk); without root the fault is skipped with the reason printed.
The service is the real ``coordinator.service.service.Service`` in its own session, started by
this script's ``_serve`` entry, because ``specrun serve`` has no flag for the heartbeat:
``--heartbeat``/``--hang-after`` set the pool's heartbeat and hang limit (the CLI's
defaults are 1 s and 5 s; ``--cli-service`` runs the CLI's ``serve`` as is, through the
test suite's entry point ``tests/seamed_service.py``). Either way the service is built with
its workers' classifier bypassed and a pause at each apply checkpoint
(``protocol.wire.seams``, ``overlay.apply.set_process_checkpoint``): arguments, never the
environment.
Exit status: 0 when no invariant was violated, 1 otherwise, 2 on a setup error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import psutil
import zmq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.seams

from coordinator.cli.client import ServiceClient, ServiceNotRunning, ServiceTimeout
from coordinator.service.chat.history import HistoryStore
from coordinator.user_state import project_state_path
from protocol.wire import codec
from protocol.wire.chat import Message
from protocol.wire.control import (
    AcceptRequest,
    AskRequest,
    ControlReply,
    ErrorReply,
    OkReply,
    RejectRequest,
    StatsReply,
    StatsRequest,
    StatusReply,
    StatusRequest,
    StopRequest,
    SuggestionReply,
    SuggestionRequest,
    Transcript,
    TurnEnded,
    TypedRequest,
    WorkersReply,
    WorkersRequest,
)
from protocol.wire.endpoints import Endpoints
from protocol.wire.seams import WorkerSeams
from protocol.wire.work import (
    Completed,
    Heartbeat,
    Hello,
    SpeculationOutcome,
    WrittenFile,
)
from tests.seams import service_entry
from worker.contain.verify import ConnectionRecorder

REPO = Path(__file__).resolve().parent.parent
SAMPLE_PROJECT = REPO / "coordinator" / "cli" / "demo" / "sample_project"
# Every shell command counts as read-only: the hostile commands of each round meet the
# containment profile alone. A start argument of the service's workers, never a variable.
SEAMS = WorkerSeams(bypass_classifier=True)

TERMINAL = frozenset({"completed", "boundary", "aborted", "failed", "accepted"})
KINDS = (
    "none",
    "kill_before_model",
    "kill_mid_stream",
    "kill_mid_tool",
    "kill_mid_write",
    "kill_after_complete",
    "kill_idle_worker",
    "hang_running",
    "hang_after_complete",
    "kill_worker_during_accept",
    "kill_coordinator_during_accept",
    "garbage_frames",
    "enospc",
    "type_while_running",
)
# Branch rounds (three ranked alternatives, each speculated): each plays its own ending.
BRANCH_KINDS = (
    "branch_accept_rank",
    "branch_kill_during_accept",
    "branch_kill_one",
    "branch_typing",
)
ALL_KINDS = KINDS + BRANCH_KINDS
# Faults that end the round themselves (their final action is part of the fault).
SELF_FINISHING = frozenset({
    "kill_worker_during_accept", "kill_coordinator_during_accept", "type_while_running",
})
BRANCHES = 3  # alternatives of a branch round (the service's setting must allow as many)
SLOW_BRANCH = 2  # the rank whose final answer is slow
SLOW_BRANCH_LATENCY = 700
# After an accept, a reject or typing, a branch that is not kept has its worker dead and
# its overlay removed within this many seconds of the request (the accept itself waits
# for the kills). Quiet, it takes tens of ms; on a 2-core machine at a load average of 20
# the kill, the reap and the sandbox's namespace teardown took up to 1.2 s.
BRANCH_GONE_BOUND_S = 2.0
# The abort of a running speculation must never hold up the prompt typed instead (a death
# not seen at once once made it wait for the kill's 10 s bound). Quiet it takes ~12 ms;
# this bound only catches a wait, not a slow machine.
TYPED_AFTER_ABORT_BOUND_S = 3.0
# What a branch round types: a prefix of ranks 0 and 1 only, of rank 1 only, of none.
TYPED_SHARED = "write the chaos "
TYPED_NARROW = "write the chaos n"
TYPED_NONE = "write the chaos zebra"

# Scenario timing (ms). Turn 0 streams ~30 word groups, the window of `kill_mid_stream`.
SPEC_LATENCY_0 = 60
SPEC_CHUNK_0 = 4
SPEC_LATENCY_1 = 25
SPEC_LATENCY_2 = 10
PIPELINED_LATENCY = 150
SLOW_COMMAND = "head -c 24000000 /dev/urandom | wc -c"
TURN0_TEXT = (
    "I will look at the shared notes first, then check what git thinks of the working tree "
    "and list the chaos directory, so that the files I am about to write follow what is "
    "already there. After that I will write three new files for this round, run one more "
    "read-only command to see how long reading random data takes, and finally overwrite "
    "the shared notes with a line that says which round wrote them last. Nothing here "
    "touches the real tree until the speculation is accepted."
)


# --------------------------------------------------------------------------- scenario


def tag_of(n: int) -> str:
    return f"{n:04d}"


def suggestion_text(tag: str) -> str:
    return f"write the chaos files for round {tag}"


def branch_texts(tag: str) -> list[str]:
    """A branch round's ranked alternatives: the first is the plain round's suggestion;
    ``TYPED_SHARED`` leads to the first two, ``TYPED_NARROW`` to the second alone."""
    return [
        suggestion_text(tag),
        f"write the chaos notes for round {tag}",
        f"draft the chaos files for round {tag}",
    ]


def followup_text(tag: str, rank: int) -> str:
    """The pipelined suggestion of a branch round's branch of that rank."""
    return f"check the chaos branch {rank} of round {tag}"


def round_files(tag: str, rank: int = 0) -> dict[str, bytes]:
    """The four files a round's speculation (of a branch round, the branch of ``rank``)
    writes, in order, with their exact content: an existing file first (copy-up, shared by
    every branch), then three new ones; the slow shell command runs between the second and
    the third write."""
    who = tag if rank == 0 else f"{tag} branch {rank}"
    where = f"chaos/r{tag}" if rank == 0 else f"chaos/r{tag}b{rank}"

    def body(name: str, size: int) -> bytes:
        line = f"round {who} {name} " + "abcdefghijklmnopqrstuvwxyz0123456789" * 2
        lines, total = [], 0
        k = 0
        while total < size:
            text = f"{k:05d} {line}\n"
            lines.append(text)
            total += len(text)
            k += 1
        return "".join(lines).encode()

    return {
        "chaos/shared.txt": f"last written by round {who}\n".encode() + body("shared", 2048),
        f"{where}/alpha.txt": body("alpha", 8192),
        f"{where}/beta.py": b"# generated\n" + body("beta", 8192),
        f"{where}/nested/gamma.md": body("gamma", 4096),
    }


def speculation_rules(
    name: str, text: str, files: dict[str, bytes], hostile: tuple[str, ...], answer_ms: int
) -> list[dict[str, Any]]:
    """A speculation of ``text``: reads, shell commands (the hostile ones too), then the
    writes around the slow command, then the answer after ``answer_ms``."""
    anchored = f"^{text}$"
    writes = [
        {"name": "write_file", "arguments": {"file_path": rel, "content": data.decode()}}
        for rel, data in files.items()
    ]
    return [
        {
            "name": f"{name} spec answer",
            "when": {"purpose": "speculation", "turn_user": anchored, "last_tool": "write_file"},
            "reply": {"text": f"Wrote the files of: {text}.", "latency_ms": answer_ms},
        },
        {
            "name": f"{name} spec writes",
            "when": {"purpose": "speculation", "turn_user": anchored, "last_tool": "read_file"},
            "reply": {
                "latency_ms": SPEC_LATENCY_1,
                "chunk_ms": 1,
                "tool_calls": [
                    *writes[:2],
                    {"name": "run_shell_command", "arguments": {"command": SLOW_COMMAND}},
                    *writes[2:],
                ],
            },
        },
        {
            "name": f"{name} spec reads",
            "when": {"purpose": "speculation", "last_user": anchored},
            "reply": {
                "text": TURN0_TEXT,
                "latency_ms": SPEC_LATENCY_0,
                "chunk_ms": SPEC_CHUNK_0,
                "tool_calls": [
                    {"name": "read_file", "arguments": {"file_path": "chaos/shared.txt"}},
                    {"name": "run_shell_command", "arguments": {"command": "git status --short"}},
                    {"name": "run_shell_command", "arguments": {"command": "ls -la chaos"}},
                    *(
                        {"name": "run_shell_command", "arguments": {"command": command}}
                        for command in hostile
                    ),
                ],
            },
        },
    ]


def spare_slots(retries: int, with_branches: bool) -> list[bool]:
    """The spare rounds after a run's plan, True for a branch round: ``retries`` of each
    sort, alternately plain and branch (plain only when no branch kind is played)."""
    if not with_branches:
        return [False] * retries
    return [slot % 2 == 1 for slot in range(2 * retries)]


def next_spare(slots: list[bool], start: int, branch: bool) -> int | None:
    """The first spare slot at or after ``start`` of the sort a kind needs, or None."""
    return next((i for i in range(start, len(slots)) if slots[i] == branch), None)


def build_scenario(
    rounds: int,
    first_round: int = 1,
    hostile: tuple[str, ...] = (),
    branch_rounds: Collection[int] = (),
) -> dict[str, Any]:
    """Per-round rules, newest round first: a suggestion request carries older rounds'
    text in its history, and the first matching rule must be the current round's. The
    rounds in ``branch_rounds`` suggest ``branch_texts`` (three ranked alternatives), each
    speculated with its own files and its own pipelined suggestion (``followup_text``,
    whose own speculation answers at once and suggests nothing); the others suggest one
    text, whose pipelined suggestion is empty."""
    rules: list[dict[str, Any]] = [
        {
            "name": "recall",
            "when": {"purpose": "recall"},
            "reply": {"json": {"selected_memories": []}},
        },
    ]
    nothing_next = {"json": {"suggestion": ""}, "latency_ms": PIPELINED_LATENCY}
    for n in range(rounds, first_round - 1, -1):
        tag = tag_of(n)
        texts = branch_texts(tag) if n in branch_rounds else [suggestion_text(tag)]
        prepared = f"Prepared [round {tag}]."
        suggestion: dict[str, Any] = (
            {"suggestions": texts} if len(texts) > 1 else {"json": {"suggestion": texts[0]}}
        )
        rules += [
            {
                "name": f"r{tag} main",
                "when": {"purpose": "main", "last_user": f"^chaos round {tag}$"},
                "reply": {"text": prepared, "latency_ms": 5},
            },
            {
                "name": f"r{tag} suggestion",
                "times": 1,
                "when": {"purpose": "suggestion", "prompt_contains": prepared},
                "reply": {**suggestion, "latency_ms": 5},
            },
        ]
        for rank, text in enumerate(texts):
            name = f"r{tag}" if len(texts) == 1 else f"r{tag}b{rank}"
            answer_ms = SLOW_BRANCH_LATENCY if len(texts) > 1 and rank == SLOW_BRANCH else 0
            rules += speculation_rules(
                name, text, round_files(tag, rank), hostile, answer_ms or SPEC_LATENCY_2
            )
        if len(texts) == 1:
            rules.append(
                {
                    "name": f"r{tag} pipelined",
                    "when": {"purpose": "pipelined", "prompt_contains": texts[0]},
                    "reply": nothing_next,
                }
            )
            continue
        # A follow-up's history holds its branch's text too: its rules come first.
        for rank in range(len(texts)):
            followup = followup_text(tag, rank)
            rules += [
                {
                    "name": f"r{tag}b{rank} follow-up spec",
                    "when": {"purpose": "speculation", "last_user": f"^{followup}$"},
                    "reply": {"text": "Nothing to do for the follow-up.", "latency_ms": 5},
                },
                {
                    "name": f"r{tag}b{rank} follow-up pipelined",
                    "when": {"purpose": "pipelined", "prompt_contains": followup},
                    "reply": {"json": {"suggestion": ""}, "latency_ms": 5},
                },
            ]
        for rank, text in enumerate(texts):
            rules.append(
                {
                    "name": f"r{tag}b{rank} pipelined",
                    "when": {"purpose": "pipelined", "prompt_contains": text},
                    "reply": {
                        "json": {"suggestion": followup_text(tag, rank)},
                        "latency_ms": PIPELINED_LATENCY,
                    },
                }
            )
    rules += [
        {"name": "pipelined: nothing", "when": {"purpose": "pipelined"}, "reply": nothing_next},
        {
            "name": "suggestion: nothing",
            "when": {"purpose": "suggestion"},
            "reply": {"json": {"suggestion": ""}, "latency_ms": 5},
        },
        {"default": {"text": "Noted.", "latency_ms": 5}},
    ]
    return {
        "name": "chaos",
        "description": "specrun chaos rounds",
        "latency_ms": 0,
        "chunk_ms": 1,
        "models": ["scripted"],
        "rules": rules,
    }


# --------------------------------------------------------------------------- helpers


def snapshot_tree(root: Path) -> dict[str, bytes]:
    """Every file under root except .git and .specrun, as bytes."""
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in (".git", ".specrun") or "__pycache__" in rel:
            continue
        if path.is_file() and not path.is_symlink():
            out[rel] = path.read_bytes()
    return out


def make_project(dest: Path, state: Path, branches: int = 1) -> Path:
    """The sample project, with the person's own settings for it in ``state`` (its
    directory in specrun's state root, where ``config set`` writes them)."""
    shutil.copytree(SAMPLE_PROJECT, dest, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "chaos").mkdir()
    (dest / "chaos" / "shared.txt").write_text("shared notes, not written by any round yet\n")
    settings = state / "settings.json"
    settings.parent.mkdir(parents=True, mode=0o700)
    settings.write_text(
        json.dumps(
            {"maxSessionTurns": 1_000_000, "enableMemory": False, "speculationBranches": branches}
        )
    )
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "chaos",
        "GIT_AUTHOR_EMAIL": "chaos@example.com",
        "GIT_COMMITTER_NAME": "chaos",
        "GIT_COMMITTER_EMAIL": "chaos@example.com",
    }
    (dest / ".gitignore").write_text(".specrun/\n")
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=dest, check=True, env=env, capture_output=True)
    return dest


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


@dataclass
class LastingProblems:
    """What every look of a check found while it waited for a passing state."""

    last: list[str]  # the final look's problems
    looks: int
    distinct: int  # different problems over all looks: one that stays is a leak, many churn

    def __bool__(self) -> bool:
        return bool(self.last)

    def __str__(self) -> str:
        return (
            f"{'; '.join(self.last)} [found by each of {self.looks} looks, "
            f"{self.distinct} different problems in all]"
        )


def lasting_problems(
    look: Callable[[], list[str]], timeout: float, interval: float
) -> LastingProblems:
    """The problems ``look`` finds at every look for ``timeout`` seconds; none once one
    look passes. A look that passes ends the check: a state seen half-way on a later
    look (a refill's worker forked and not yet in the pool, a restarted fork server's
    containment probe) is no leak, and without a wait after it would be reported as one."""
    deadline = time.monotonic() + timeout
    looks = 0
    seen: set[str] = set()
    while True:
        found = look()
        looks += 1
        if not found:
            return LastingProblems([], looks, 0)
        seen.update(problem.split(" (")[0] for problem in found)
        if time.monotonic() >= deadline:
            return LastingProblems(found, looks, len(seen))
        time.sleep(interval)


def is_fork_server(coordinator: psutil.Process, child: psutil.Process) -> bool:
    """Is ``child`` (of the coordinator) the pool's fork server: a fork of the coordinator
    (its command line), or ``multiprocess``'s fresh interpreter when it could not fork
    (``coordinator.service.pool.fork_server``)?"""
    command = child.cmdline()
    return command == coordinator.cmdline() or "forkserver" in " ".join(command)


def pid_running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def describe_process(pid: int) -> str:
    """A process's command line and age, for a violation message."""
    try:
        proc = psutil.Process(pid)
        age = time.time() - proc.create_time()
        return f"{' '.join(proc.cmdline())[:80]}; {age:.1f} s old, {proc.status()}"
    except psutil.Error:
        return "gone"


def describe_lineage(pid: int, chain: list[int], coordinator: int) -> str:
    """Where a process sits, for a violation message: its ancestors up to the coordinator
    (each with its age), its session and its children."""
    now = time.time()
    parts = []
    for ancestor in chain[: chain.index(coordinator) + 1] if coordinator in chain else chain:
        try:
            parts.append(f"{ancestor} ({now - psutil.Process(ancestor).create_time():.1f} s)")
        except psutil.Error:
            parts.append(f"{ancestor} (gone)")
    try:
        session = os.getsid(pid)
        children = [c.pid for c in psutil.Process(pid).children()]
    except (OSError, psutil.Error):
        session, children = -1, []
    # A worker leads its own session (worker_entry); a helper the fork server forks for
    # its containment probe stays in the coordinator's.
    leads = "its own" if session == pid else str(session)
    return f"parents {' < '.join(parts)}; session {leads}; children {children}"


def describe_pool(pool: dict[int, Any]) -> str:
    """The pool's list as the service reported it: each worker's pid, state and age."""
    return ", ".join(f"{pid} {w.state} {w.age_s:.1f} s" for pid, w in pool.items()) or "empty"


def exited(pid: int) -> Callable[[], bool]:
    return lambda: not pid_running(pid)


class ModelLog:
    """Tails the scripted model's request log (``SPECRUN_MODEL_LOG``), which records each
    request when it arrives, before the scripted latency: the anchor for aimed faults."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.entries: list[tuple[float, str | None]] = []  # (arrival time, purpose)

    def poll(self) -> None:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            self.entries.append((float(entry.get("time", 0.0)), entry.get("purpose")))

    def speculation_requests(self, since: float) -> list[float]:
        return self.requests("speculation", since)

    def requests(self, purpose: str, since: float) -> list[float]:
        self.poll()
        return [t for t, p in self.entries if p == purpose and t >= since]

    def wait_speculation_request(self, index: int, since: float, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.speculation_requests(since)
            if len(found) > index:
                return found[index]
            time.sleep(0.001)
        return None


# --------------------------------------------------------------------------- the service


@dataclass
class ServiceProc:
    project: Path
    env: dict[str, str]
    argv: list[str]
    log_file: Path
    popen: subprocess.Popen[bytes] | None = None
    client: ServiceClient | None = None
    pid: int = 0
    epoch: int = 0

    def start(self, timeout: float = 30.0) -> float:
        """Start it detached; returns the seconds until it answered ``status``."""
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        with self.log_file.open("ab") as log:
            self.popen = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.project,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise SetupError(f"the service exited during start-up; see {self.log_file}")
            try:
                client = ServiceClient(self.project, timeout_s=5.0)
            except ServiceNotRunning:
                time.sleep(0.002)
                continue
            try:
                reply = client.request(StatusRequest(req_id=client.next_id()), timeout_s=0.5)
            except ServiceTimeout:
                client.close()
                continue
            if isinstance(reply, StatusReply):
                elapsed = time.perf_counter() - started
                self.client, self.pid, self.epoch = client, reply.pid, reply.epoch
                return elapsed
            client.close()
        raise SetupError(f"the service did not answer within {timeout:.0f}s; see {self.log_file}")

    def close_client(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def reap(self) -> None:
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=10)

    def stop(self) -> None:
        if self.client is not None:
            with contextlib.suppress(ServiceTimeout, zmq.ZMQError):
                self.client.request(StopRequest(req_id=self.client.next_id()), timeout_s=5.0)
        self.close_client()
        if self.popen is not None:
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)


class SetupError(RuntimeError):
    pass


def serve_child(argv: list[str]) -> int:
    """``chaos.py _serve``: the real Service with a configurable heartbeat and hang limit."""
    parser = argparse.ArgumentParser(prog="chaos.py _serve")
    parser.add_argument("--project", type=Path, required=True)
    parser.add_argument("--heartbeat", type=float, required=True)
    parser.add_argument("--hang-after", type=float, required=True)
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--apply-pause-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    from coordinator.service.service import Service
    from coordinator.settings import load_settings
    from overlay.apply import set_process_checkpoint
    from tests.seams import checkpoint_hook

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = load_settings(
        args.project,
        flags={"approvalMode": "auto-edit", "scenario": args.scenario, "workerPool": 2},
    )
    if args.apply_pause_ms > 0:
        set_process_checkpoint(checkpoint_hook(f"sleep={args.apply_pause_ms / 1000}"))
    service = Service(args.project, settings, heartbeat_s=args.heartbeat, worker_seams=SEAMS)
    service.pool.hang_after_s = args.hang_after
    asyncio.run(service.run())
    return 0


# --------------------------------------------------------------------------- bookkeeping


@dataclass
class RoundRecord:
    n: int
    kind: str
    action: str
    landed: bool | None = None
    status: str | None = None  # the speculation's terminal status before the final action
    outcome: str = ""  # accepted | untouched | partial ...
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0
    note: str = ""
    rank: int | None = None  # branch rounds: the rank whose files were accepted


@dataclass
class Metrics:
    detect_s: list[float] = field(default_factory=list)  # SIGKILL -> gone from `workers`
    exit_s: list[float] = field(default_factory=list)  # SIGKILL -> our pidfd readable
    hang_s: list[float] = field(default_factory=list)  # SIGSTOP -> gone from `workers`
    restart_s: list[float] = field(default_factory=list)  # restart -> answers `status`
    down_s: list[float] = field(default_factory=list)  # coordinator SIGKILL -> serving again
    family_exit_s: list[float] = field(default_factory=list)  # coordinator SIGKILL -> all gone
    mid_apply: int = 0  # coordinator kills that left an apply journal behind
    applied_without_history: int = 0  # ... whose files were rolled forward, transcript lost
    garbage_replies: int = 0
    garbage_sent: int = 0
    # Branch rounds: accept/reject/typing (or a kill) -> the dropped branches' workers dead
    # and overlays gone; follow-ups checked to be the accepted branch's pipelined text;
    # accepts of a rank no longer live that answered not_found.
    branch_gone_s: list[float] = field(default_factory=list)
    pipelined_checked: int = 0
    not_found_checked: int = 0
    siblings_completed: int = 0  # branches that completed although a sibling was killed
    # Typing something else while a speculation runs: the prompt sent -> its main request
    # at the model (the abort of the running speculation stands between them).
    typed_after_abort_s: list[float] = field(default_factory=list)


class Violation(Exception):
    pass


class HostileTargets:
    """What every round's speculation tries to reach (its shell commands run with the
    classifier bypassed, so only the containment profile stands in the way): a guard file
    in the project (contents and metadata), $HOME and the host's /tmp, a loopback TCP
    listener, a unix socket in the runtime directory, this script as a signal target."""

    def __init__(self, project: Path, home: Path, tmp: Path, runtime: Path) -> None:
        self.guard = project / "chaos" / "guard.txt"
        self.guard.write_text("no round may touch this file\n")
        self.planted = [home / "chaos-planted", tmp / "chaos-planted"]
        self.tcp = ConnectionRecorder.tcp()
        self.port = self.tcp.port
        self.unix_path = runtime / "chaos-probe.sock"
        self.unix = ConnectionRecorder.unix(self.unix_path)
        self.signals = 0
        signal.signal(signal.SIGUSR1, self._signalled)
        self.guard_state = self._guard_state()

    def _signalled(self, *_: Any) -> None:
        self.signals += 1

    def _guard_state(self) -> tuple[int, int, bytes]:
        info = self.guard.stat()
        return info.st_mode, info.st_mtime_ns, self.guard.read_bytes()

    def commands(self) -> list[str]:
        guard = "chaos/guard.txt"
        return [
            f"chmod 777 {guard}; touch -d 2001-01-01 {guard}; echo x >> {guard}; true",
            "; ".join(f"echo x > {p}" for p in self.planted) + "; true",
            f"echo x > /dev/tcp/127.0.0.1/{self.port}; true",
            "python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect("
            f"'{self.unix_path}')\" 2>/dev/null; true",
            f"kill -USR1 {os.getpid()} 2>/dev/null; true",
        ]

    def problems(self) -> list[str]:
        reached = self.tcp.connections + self.unix.connections
        found = [f"a speculation reached the {name}" for name in reached]
        found += [f"a speculation wrote {p}" for p in self.planted if p.exists()]
        if self.signals:
            found.append(f"a speculation signalled the harness {self.signals} time(s)")
        if self._guard_state() != self.guard_state:
            found.append("a speculation changed chaos/guard.txt (contents or metadata)")
        return found

    def close(self) -> None:
        self.tcp.close()
        self.unix.close()


@dataclass(frozen=True)
class BranchRef:
    """One branch of a branch round, as the service reported it once its worker started."""

    rank: int
    text: str
    spec_id: str
    pid: int | None
    overlay: Path | None  # <speculation base>/<worker pid>/<speculation id>

    def gone(self) -> bool:
        """Its worker is dead (or a zombie) and its overlay directory does not exist."""
        if self.pid and pid_running(self.pid):
            return False
        return self.overlay is None or not self.overlay.exists()

    def left(self) -> str:
        parts = []
        if self.pid and pid_running(self.pid):
            parts.append(f"worker {self.pid} alive")
        if self.overlay is not None and self.overlay.exists():
            parts.append(f"overlay {self.overlay.name} there")
        return f"branch {self.rank}: {', '.join(parts) or 'gone'}"


class GoneWatcher:
    """Polls, in a thread, every 0.5 ms from ``t0`` (perf_counter) until each branch given
    has its worker dead and its overlay gone, so the time is taken while the request that
    drops them (an accept, a reject, typing) is still being answered."""

    # An abort waits ABORT_WAIT_S for the kill's reap, then lets the overlay go in the
    # background (the service logs "is not reaped yet"): on a loaded machine that can take
    # seconds, so the watch waits as long as the process check does. Never gone is a leak.
    LIMIT_S = 30.0

    def __init__(self, refs: list[BranchRef], t0: float | None = None) -> None:
        self.refs = list(refs)
        self.t0 = time.perf_counter() if t0 is None else t0
        self.took: float | None = None
        self._deadline = time.monotonic() + self.LIMIT_S
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while time.monotonic() < self._deadline:
            if all(ref.gone() for ref in self.refs):
                self.took = time.perf_counter() - self.t0
                return
            time.sleep(0.0005)

    def result(
        self, record: RoundRecord, what: str, backgrounded: Callable[[str], bool]
    ) -> float | None:
        """Seconds until all were gone, or None. Never is a violation of the round, which
        goes on: its tree and the rest still count; so is past ``BRANCH_GONE_BOUND_S``,
        unless the service said it left a slow reap to the background (``backgrounded``,
        by speculation id), as it may."""
        self._thread.join()
        if self.took is None:
            left = "; ".join(ref.left() for ref in self.refs if not ref.gone())
            record.violations.append(
                f"{what}: dropped branches still there after {self.LIMIT_S:.0f} s: {left}"
            )
        elif self.took > BRANCH_GONE_BOUND_S and not any(
            backgrounded(ref.spec_id) for ref in self.refs
        ):
            ranks = [ref.rank for ref in self.refs]
            record.violations.append(
                f"{what}: branches {ranks} took {self.took * 1000:.0f} ms to have their workers "
                f"dead and overlays gone (bound {BRANCH_GONE_BOUND_S * 1000:.0f} ms)"
            )
        return self.took


# --------------------------------------------------------------------------- the run


class Chaos:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.base = Path(tempfile.mkdtemp(prefix="chaos-"))
        # specrun's own records (sessions, journals, logs) live in its state directory.
        self.state_root = self.base / "state"
        self.state = project_state_path(self.base / "proj",
                                        state_root=self.state_root / "specrun")
        self.project = make_project(self.base / "proj", self.state, args.branches)
        self.runtime = self.base / "run"
        self.runtime.mkdir(mode=0o700)
        self.home = self.base / "home"
        self.home.mkdir()
        self.tmpfs = self.base / "tmp"
        self.tmpfs.mkdir()
        self.tmpfs_reason = self._mount_tmpfs()
        self.spec_base = self.tmpfs / f"specrun-speculation-{os.geteuid()}"
        self.hostile = HostileTargets(self.project, self.home, self.tmpfs, self.runtime)
        self.model_log = ModelLog(self.base / "model-requests.jsonl")
        scenario = self.scenario = self.base / "chaos.json"  # JSON: loads fast on restarts
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "DASHSCOPE_", "SPECRUN_"))
        }
        env.update(
            HOME=str(self.home),
            SPECRUN_RUNTIME_DIR=str(self.runtime),
            TMPDIR=str(self.tmpfs),
            SPECRUN_MODEL_LOG=str(self.model_log.path),
            PYTHONUNBUFFERED="1",
            XDG_STATE_HOME=str(self.state_root),
        )
        pause = f"sleep={args.apply_pause_ms / 1000}" if args.apply_pause_ms > 0 else None
        os.environ["SPECRUN_RUNTIME_DIR"] = str(self.runtime)  # for our own ServiceClient
        if args.cli_service:
            argv = [
                sys.executable,
                "-P",
                *service_entry(SEAMS, pause),
                "--project",
                str(self.project),
                "serve",
                "--approval-mode",
                "auto-edit",
                "--scenario",
                str(scenario),
            ]
        else:
            argv = [
                sys.executable,
                "-P",
                str(Path(__file__).resolve()),
                "_serve",
                "--project",
                str(self.project),
                "--heartbeat",
                str(args.heartbeat),
                "--hang-after",
                str(args.hang_after),
                "--scenario",
                str(scenario),
                "--apply-pause-ms",
                str(args.apply_pause_ms),
            ]
        self.env = env
        self.service = ServiceProc(
            self.project, env, argv, self.state / "logs" / "service.log"
        )
        self.metrics = Metrics()
        self.records: list[RoundRecord] = []
        self.expected: dict[str, bytes] = {}
        self.seen_workers: set[int] = set()
        self.round_pids: list[int] = []  # a branch round's other workers (follow-ups)
        self.kinds = [k for k in ALL_KINDS if k in args.only] if args.only else list(ALL_KINDS)
        if "enospc" in self.kinds and self.tmpfs_reason:
            print(f"skipping the enospc fault: {self.tmpfs_reason}", file=sys.stderr)
            self.kinds.remove("enospc")
        if args.branches < BRANCHES:
            dropped = [k for k in self.kinds if k in BRANCH_KINDS]
            if dropped:
                print(
                    f"skipping {', '.join(dropped)}: --branches {args.branches} < {BRANCHES}",
                    file=sys.stderr,
                )
            self.kinds = [k for k in self.kinds if k not in BRANCH_KINDS]
        self.filler = self.tmpfs / "filler"
        # Every round's fault is drawn up front: the scenario must know the branch rounds.
        self.plan = self.make_plan()
        # Spare rounds after the plan (``--retries``), alternately plain and branch ones, for
        # a fault kind whose every round missed its aim: True marks a branch slot.
        self.spare_branch = spare_slots(args.retries, any(k in BRANCH_KINDS for k in self.kinds))
        self.retried: list[str] = []
        self.stopped_early = False
        self.write_scenario(first_round=1)

    # -- setup / teardown ----------------------------------------------------------

    def make_plan(self) -> list[str]:
        """The fault of every round: the kinds dealt from shuffled decks (``none`` twice)."""
        plan: list[str] = []
        deck: list[str] = []
        for _ in range(self.args.rounds):
            if not deck:
                deck = list(self.kinds) + (["none"] if "none" in self.kinds else [])
                self.rng.shuffle(deck)
            plan.append(deck.pop())
        return plan

    def write_scenario(self, first_round: int) -> None:
        """A restarted coordinator reloads the scenario with fresh `times` counters, so
        it gets only the rounds still to come (older suggestion rules would fire again)."""
        branch_rounds = {n for n, kind in enumerate(self.plan, 1) if kind in BRANCH_KINDS}
        first_spare = len(self.plan) + 1
        branch_rounds |= {first_spare + i for i, branch in enumerate(self.spare_branch) if branch}
        data = build_scenario(
            len(self.plan) + len(self.spare_branch),
            first_round,
            tuple(self.hostile.commands()),
            branch_rounds,
        )
        self.scenario.write_text(json.dumps(data))

    def _mount_tmpfs(self) -> str:
        """'' when a tmpfs is mounted on self.tmpfs, else why not."""
        if self.args.no_tmpfs:
            return "--no-tmpfs was given"
        if os.geteuid() != 0:
            return "mounting a tmpfs needs root"
        proc = subprocess.run(
            [
                "mount",
                "-t",
                "tmpfs",
                "-o",
                f"size={self.args.tmpfs_mb}m,mode=1777",
                "tmpfs",
                str(self.tmpfs),
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            return f"mount -t tmpfs failed: {proc.stderr.strip() or proc.returncode}"
        return ""

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.service.stop()
        self.hostile.close()
        for proc in self.marked_processes():
            with contextlib.suppress(psutil.Error):
                proc.kill()
        if not self.tmpfs_reason:
            subprocess.run(["umount", "-l", str(self.tmpfs)], capture_output=True)
        if self.args.keep:
            print(f"kept {self.base}", file=sys.stderr)
        else:
            shutil.rmtree(self.base, ignore_errors=True)

    @property
    def client(self) -> ServiceClient:
        assert self.service.client is not None
        return self.service.client

    # -- control helpers -------------------------------------------------------------

    def stream(self, request: Any, timeout: float = 30.0) -> list[ControlReply]:
        self.client.send(request)
        return list(self.client.replies(request.req_id, timeout_s=timeout))

    def ask(self, text: str) -> list[ControlReply]:
        return self.stream(AskRequest(req_id=self.client.next_id(), text=text))

    def suggestion(self) -> SuggestionReply:
        reply = self.client.request(SuggestionRequest(req_id=self.client.next_id()), timeout_s=5)
        assert isinstance(reply, SuggestionReply), reply
        return reply

    def workers(self) -> list[Any]:
        reply = self.client.request(WorkersRequest(req_id=self.client.next_id()), timeout_s=5)
        assert isinstance(reply, WorkersReply), reply
        for w in reply.workers:
            self.seen_workers.add(w.pid)
        return list(reply.workers)

    def worker_gone_after(
        self, pid: int, t0: float, timeout: float, interval: float = 0.0
    ) -> float | None:
        """Seconds from ``t0`` (perf_counter) until ``pid`` is no longer in `workers`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(w.pid != pid for w in self.workers()):
                return time.perf_counter() - t0
            if interval:
                time.sleep(interval)
        return None

    def cli_json(self, *args: str) -> Any:
        proc = subprocess.run(
            [sys.executable, "-m", "coordinator", "--project", str(self.project), *args, "--json"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        if proc.returncode != 0:
            raise Violation(
                f"`specrun {' '.join(args)} --json` exited {proc.returncode}: {proc.stderr.strip()}"
            )
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def marked_processes(self) -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["pid"]):
            with contextlib.suppress(psutil.Error):
                if proc.environ().get("SPECRUN_RUNTIME_DIR") == str(self.runtime):
                    found.append(proc)
        return found

    # -- the run ---------------------------------------------------------------------

    def run(self) -> int:
        self.metrics.restart_s.append(self.service.start())
        self.expected = snapshot_tree(self.project)
        for text in ("chaos warm up one", "chaos warm up two"):
            self.ask(text)
        started = time.monotonic()
        for n, kind in enumerate(self.plan, 1):
            if not self.play(n, kind, started):
                return 0
        self.retry_missed(started)
        return 0

    def play(self, n: int, kind: str, started: float) -> bool:
        """Round ``n`` with fault ``kind``; False once ``--max-seconds`` is reached."""
        record = self.branch_round(n, kind) if kind in BRANCH_KINDS else self.one_round(n, kind)
        self.records.append(record)
        if self.args.verbose or record.violations:
            extra = f" VIOLATIONS: {record.violations}" if record.violations else ""
            print(
                f"round {n:4d} {kind:32s} {record.action:12s} landed={record.landed} "
                f"status={record.status} -> {record.outcome} ({record.seconds:.2f}s)"
                f"{' ' + record.note if record.note else ''}{extra}",
                file=sys.stderr,
                flush=True,
            )
        if self.args.max_seconds and time.monotonic() - started > self.args.max_seconds:
            print(f"stopping after {n} rounds: --max-seconds reached", file=sys.stderr)
            self.stopped_early = True
            return False
        return True

    def missed_kinds(self) -> list[str]:
        """The fault kinds none of whose rounds landed where it was aimed."""
        landed = {r.kind for r in self.records if r.landed}
        return [k for k in self.kinds if k != "none" and k not in landed]

    def retry_missed(self, started: float) -> None:
        """Replay each kind that missed its aim in the next spare round of its sort (a
        short run deals every kind once, and a loaded machine can make a timed fault come
        too late). Spare rounds are played in order: a restarted coordinator's scenario
        holds only the rounds after the last one played."""
        first_spare = len(self.plan) + 1
        next_slot = 0
        for kind in self.missed_kinds():
            while True:
                slot = next_spare(self.spare_branch, next_slot, kind in BRANCH_KINDS)
                if slot is None:
                    break
                next_slot = slot + 1
                self.retried.append(kind)
                if not self.play(first_spare + slot, kind, started):
                    return
                if kind not in self.missed_kinds():
                    break

    def one_round(self, n: int, kind: str) -> RoundRecord:
        tag = tag_of(n)
        text = suggestion_text(tag)
        record = RoundRecord(n, kind, action="")
        started = time.perf_counter()
        before = dict(self.expected)
        files = round_files(tag)
        since = time.time()
        try:
            self.ask(f"chaos round {tag}")
            spec = self.wait_speculation(text)
            assert spec.speculation is not None
            pid = spec.speculation.worker_pid
            spec_id = spec.speculation.id
            if pid:
                self.seen_workers.add(pid)
            fault = getattr(self, f"fault_{kind}")
            allowed = fault(record, tag, text, pid, spec_id, since)
            if kind not in SELF_FINISHING:
                allowed = self.finish(record, text, spec_id)
            self.settle(record, pid)
            self.check_tree(record, before, files, allowed)
            self.check_leftovers(record)
            self.check_processes(record)
            escaped = self.hostile.problems()
            if escaped:
                raise Violation("; ".join(escaped))
            reported = record.outcome == "accepted" and kind != "kill_coordinator_during_accept"
            self.check_service(record, text if reported else None)
            if kind == "kill_coordinator_during_accept" and record.outcome == "accepted":
                history = HistoryStore(self.project, sessions_dir=self.state / "sessions").load()
                if not any(m.role == "user" and m.text == text for m in history[-12:]):
                    # Files and history must agree: the pending-accept record settles a
                    # crash between the apply and the history append at the next start.
                    self.metrics.applied_without_history += 1
                    record.violations.append(
                        "the accepted files are on disk but the turn is not in the history"
                    )
        except Violation as exc:
            record.violations.append(str(exc))
        except Exception as exc:  # the harness or the service broke: fail the round, go on
            record.violations.append(f"{type(exc).__name__}: {exc}")
            self.recover_service(record)
        finally:
            with contextlib.suppress(FileNotFoundError):
                self.filler.unlink()
        self.resync(record)
        record.seconds = time.perf_counter() - started
        return record

    def resync(self, record: RoundRecord) -> None:
        """A round cut short by a violation may have changed the tree before its check;
        the next round starts from the tree as it is, so one violation is counted once."""
        if record.violations and not record.outcome:
            self.expected = snapshot_tree(self.project)

    def branch_round(self, n: int, kind: str) -> RoundRecord:
        """A round whose suggestion has ``BRANCHES`` ranked alternatives, each speculated;
        the fault plays the round's end and returns the rank whose files were accepted."""
        tag = tag_of(n)
        texts = branch_texts(tag)
        record = RoundRecord(n, kind, action="")
        started = time.perf_counter()
        before = dict(self.expected)
        self.round_pids = []
        try:
            self.ask(f"chaos round {tag}")
            refs = self.wait_branches(texts)
            fault = getattr(self, f"fault_{kind}")
            rank = fault(record, tag, refs)
            record.rank = rank
            self.settle_pids([*(ref.pid for ref in refs), *self.round_pids])
            files = round_files(tag, rank) if rank is not None else {}
            outcome = "accepted" if rank is not None else "untouched"
            self.check_tree(record, before, files, {outcome})
            self.check_leftovers(record)
            self.check_processes(record)
            escaped = self.hostile.problems()
            if escaped:
                raise Violation("; ".join(escaped))
            self.check_service(record, texts[rank] if rank is not None else None)
        except Violation as exc:
            record.violations.append(str(exc))
        except Exception as exc:  # the harness or the service broke: fail the round, go on
            record.violations.append(f"{type(exc).__name__}: {exc}")
            self.recover_service(record)
        self.resync(record)
        record.seconds = time.perf_counter() - started
        return record

    def wait_speculation(self, text: str) -> SuggestionReply:
        deadline = time.monotonic() + 15
        last = None
        while time.monotonic() < deadline:
            last = self.suggestion()
            if last.text == text and last.speculation is not None:
                return last
            time.sleep(0.001)
        raise Violation(f"no speculation of {text!r} started within 15 s (last: {last})")

    def wait_status(self, spec_id: str, statuses: frozenset[str], timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        status = None
        while time.monotonic() < deadline:
            reply = self.suggestion()
            s = reply.speculation
            if s is None or s.id != spec_id:
                return None
            status = s.status
            if status in statuses:
                return status
            time.sleep(0.002)
        return status

    # -- final actions -----------------------------------------------------------------

    def finish(self, record: RoundRecord, text: str, spec_id: str) -> set[str]:
        """Wait for a terminal state (reported by the CLI), then accept, reject or type
        something else. Returns the allowed tree outcomes."""
        status = self.wait_status(spec_id, TERMINAL, timeout=10)
        if status not in TERMINAL:
            raise Violation(f"speculation {spec_id} still {status} 10 s after the fault")
        record.status = status
        reported = self.cli_json("suggestion")
        if record.kind == "enospc":
            info = reported.get("speculation") or {}
            written = len(info.get("files_written") or [])
            record.note += f"boundary={info.get('boundary_reason')} files={written}"
        spec = reported.get("speculation") or {}
        if spec.get("id") != spec_id or spec.get("status") not in TERMINAL:
            raise Violation(
                f"`specrun suggestion --json` does not report {spec_id} as terminal: {reported}"
            )
        action = self.rng.choice(("accept", "accept", "reject", "type_other"))
        record.action = action
        if action == "accept":
            replies = self.stream(AcceptRequest(req_id=self.client.next_id(), method="tab"))
            end = replies[-1]
            if not isinstance(end, TurnEnded):
                raise Violation(f"accept ended with {end}")
            if end.reason == "accepted":
                if status != "completed":
                    raise Violation(f"a {status} speculation was accepted")
                return (
                    {"accepted"} if record.kind != "enospc" else {"accepted", "subset", "untouched"}
                )
            return {"untouched"}
        if action == "reject":
            reply = self.client.request(RejectRequest(req_id=self.client.next_id()), timeout_s=10)
            if not isinstance(reply, OkReply):
                raise Violation(f"reject answered {reply}")
        else:
            self.ask(f"chaos aside {record.n:04d}")
        return {"untouched"}

    def settle(self, record: RoundRecord, pid: int | None) -> None:
        """The speculation's worker exits (one speculation per worker process)."""
        if pid and not wait_for(lambda: not pid_running(pid), timeout=5.0):
            state = "?"
            with contextlib.suppress(psutil.Error):
                state = psutil.Process(pid).status()
            raise Violation(
                f"the speculation's worker {pid} is still alive ({state}) 5 s after the round"
            )
        current = self.suggestion()
        if current.speculation is not None and current.speculation.status == "running":
            raise Violation(
                f"a speculation is still running after the round: {current.speculation}"
            )

    # -- invariants --------------------------------------------------------------------

    def check_tree(
        self,
        record: RoundRecord,
        before: dict[str, bytes],
        files: dict[str, bytes],
        allowed: set[str],
    ) -> None:
        actual = snapshot_tree(self.project)
        outcome = classify_tree(actual, before, files)
        record.outcome = outcome
        self.expected = actual
        if outcome not in allowed:
            changed = sorted(k for k in set(actual) | set(before) if actual.get(k) != before.get(k))
            shown = []
            for rel in changed[:6]:
                size = len(actual[rel]) if rel in actual else "absent"
                want = len(files[rel]) if rel in files else "unchanged"
                shown.append(f"{rel} ({size} bytes, round wrote {want})")
            raise Violation(
                f"tree is {outcome}, expected {sorted(allowed)}; changed: {', '.join(shown)}"
            )

    def fork_servers(self) -> set[int]:
        """The pids of the service's fork server (``is_fork_server``)."""
        pids = set()
        with contextlib.suppress(psutil.Error):
            coordinator = psutil.Process(self.service.pid)
            for child in coordinator.children():
                with contextlib.suppress(psutil.Error):
                    if is_fork_server(coordinator, child):
                        pids.add(child.pid)
        return pids

    def check_leftovers(self, record: RoundRecord) -> None:
        def problems() -> list[str]:
            live = {w.pid for w in self.workers()}
            # The fork server's own directory holds its containment probe's mount point
            # while it probes at start-up (seen for 2 s after a restart under load).
            servers = self.fork_servers()
            found = []
            if self.spec_base.exists():
                for entry in self.spec_base.iterdir():
                    if entry.name.isdigit() and int(entry.name) in live | servers:
                        # allowed: an empty tmp, the sandbox helper's empty mount point
                        allowed: tuple[str, ...] = ("tmp", "sandbox", "sandbox/root")
                        if int(entry.name) in servers:
                            allowed += ("sandbox/probe",)
                        inner = [
                            p
                            for p in entry.rglob("*")
                            if not (
                                p.is_dir()
                                and str(p.relative_to(entry)) in allowed
                                and (p.name == "sandbox" or not any(p.iterdir()))
                            )
                        ]
                        if inner:
                            kept = [str(p.relative_to(entry)) for p in inner][:4]
                            found.append(f"live worker {entry.name} keeps {kept}")
                        continue
                    found.append(f"overlay leftover {entry.relative_to(self.tmpfs)}")
            journal = self.state / "journal"
            if journal.exists() and any(journal.iterdir()):
                found.append(f"journal leftover {[p.name for p in journal.iterdir()]}")
            for path in self.project.rglob("*"):
                name = path.name
                if any(
                    mark in name
                    for mark in (".specrun-stage-", ".specrun-backup-", ".specrun-write-")
                ):
                    found.append(f"apply leftover {path.relative_to(self.project)}")
            return found

        # As for processes (check_processes): a leak stays, a live helper's passing state
        # goes. Its one-off userxattr trial directory was seen for over 5 s on a loaded
        # machine, right after a coordinator restart.
        lasting = lasting_problems(problems, timeout=30.0, interval=0.05)
        if lasting:
            raise Violation(str(lasting))

    def process_problems(self) -> list[str]:
        """One consistent look at the service's processes. Each process carrying the run's
        runtime dir is placed by its own parent chain, read when it is looked at, not
        against a listing of the tree taken a moment earlier: a fork server or worker
        started between two listings (a refill, a restart) is where it belongs, not a
        stray. The pool's list is read after the processes, so a worker forked by then
        is in it; one that is not (forked, not yet handed to the pool) shows as a
        problem that the caller's re-check sees go."""
        coordinator = self.service.pid
        problems: list[str] = []
        if not pid_running(coordinator):
            return [f"the coordinator {coordinator} is gone"]
        marked = self.marked_processes()
        chains: dict[int, list[int]] = {}  # pid -> its ancestors, nearest first
        for proc in marked:
            with contextlib.suppress(psutil.Error):
                chains[proc.pid] = [p.pid for p in proc.parents()]
        pool = {w.pid: w for w in self.workers()}
        helpers: set[int] = set()
        for pid, chain in chains.items():
            if chain[:1] != [coordinator]:
                continue
            try:
                child = psutil.Process(pid)
                cmd = " ".join(child.cmdline())
                fork_server = is_fork_server(psutil.Process(coordinator), child)
            except psutil.Error:
                continue
            if fork_server or "resource_tracker" in cmd:
                helpers.add(pid)
            else:
                problems.append(f"unexpected child of the coordinator {pid}: {cmd[:80]}")
        for pid, chain in chains.items():
            if pid == coordinator or coordinator not in chain:
                if pid != coordinator:
                    problems.append(f"stray process {pid} ({describe_process(pid)})")
                continue
            below = chain[: chain.index(coordinator)]  # between it and the coordinator
            if not below or below[-1] not in helpers:
                continue  # a fork server itself, or under a child already reported
            if len(below) == 1:  # a child of the fork server: must be a pool worker
                if pid not in pool and pid_running(pid):
                    problems.append(
                        f"worker {pid} is not in the pool ({describe_process(pid)}; "
                        f"{describe_lineage(pid, chain, coordinator)}; pool: "
                        f"{describe_pool(pool)})"
                    )
                continue
            worker = below[-2]
            info = pool.get(worker)
            if info is None:
                continue  # its worker is reported above
            # Every worker has one sandbox helper child; an idle one has nothing else,
            # and its helper runs no command.
            if info.state == "idle" and pid != sandbox_helper_of(worker):
                problems.append(f"idle worker {worker} has child {pid}")
        for pid in pool:
            parents = chains.get(pid)
            if parents is None:
                with contextlib.suppress(psutil.Error):
                    parents = [p.pid for p in psutil.Process(pid).parents()]
            if parents is not None and (not parents or parents[0] not in helpers):
                problems.append(f"pool worker {pid} is not a child of the fork server")
        for proc in marked:
            with contextlib.suppress(psutil.Error):
                status = proc.status()
                if status == psutil.STATUS_ZOMBIE:
                    problems.append(f"zombie {proc.pid}")
                elif status == psutil.STATUS_STOPPED:
                    problems.append(f"stopped process {proc.pid}")
        dead_leaders = {pid for pid in self.seen_workers if not pid_running(pid)}
        if dead_leaders:
            for proc in psutil.process_iter(["pid"]):
                try:
                    sid = os.getsid(proc.pid)
                except OSError:
                    continue
                if sid in dead_leaders and proc.pid != sid:
                    with contextlib.suppress(psutil.Error):
                        cmd = " ".join(proc.cmdline())[:60]
                        problems.append(f"orphan {proc.pid} of dead worker {sid}: {cmd}")
                elif sid in dead_leaders and proc.pid == sid:
                    with contextlib.suppress(psutil.Error):
                        if proc.status() == psutil.STATUS_ZOMBIE:
                            problems.append(f"zombie worker {proc.pid}")
        return problems

    def check_processes(self, record: RoundRecord) -> None:
        # A real leak stays; what a busy machine shows half-way (a refill, a death being
        # reaped, a restarted service's fork server still probing its sandbox) goes. Quiet,
        # this passes at the first look; in a loaded full test run it once took over 10 s.
        lasting = lasting_problems(self.process_problems, timeout=30.0, interval=0.1)
        if lasting:
            raise Violation(str(lasting))

    def check_service(self, record: RoundRecord, accepted_text: str | None) -> None:
        t0 = time.perf_counter()
        try:
            reply = self.client.request(StatusRequest(req_id=self.client.next_id()), timeout_s=1.0)
        except ServiceTimeout:
            raise Violation("the coordinator did not answer status within 1 s") from None
        if not isinstance(reply, StatusReply) or time.perf_counter() - t0 > 1.0:
            raise Violation(f"status answered {reply} after {time.perf_counter() - t0:.2f}s")
        try:
            history = HistoryStore(self.project, sessions_dir=self.state / "sessions").load()
        except Exception as exc:
            raise Violation(f"the history does not load: {exc!r}") from None
        if accepted_text is not None and not any(
            m.role == "user" and m.text == accepted_text for m in history[-12:]
        ):
            raise Violation("the accepted speculation is not in the history")

    # -- recovering the harness after a broken round -------------------------------------

    def recover_service(self, record: RoundRecord) -> None:
        """A wedged or vanished service fails the round; start a fresh one to go on."""
        self.service.close_client()
        try:
            self.service.client = ServiceClient(self.project, timeout_s=5.0)
            self.service.client.request(
                StatusRequest(req_id=self.service.client.next_id()), timeout_s=2
            )
            return
        except (ServiceNotRunning, ServiceTimeout):
            self.service.close_client()
        for proc in self.marked_processes():
            with contextlib.suppress(psutil.Error):
                proc.kill()
        self.service.reap()
        self.write_scenario(first_round=record.n + 1)
        self.metrics.restart_s.append(self.service.start())
        record.note += " (service restarted by the harness)"

    # -- faults ------------------------------------------------------------------------
    # Each returns the allowed tree outcomes when it finished the round itself.

    def _kill(self, record: RoundRecord, pid: int | None, measure: bool = True) -> None:
        if not pid:
            record.landed = False
            return
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            record.landed = False
            return
        try:
            t0 = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            if measure:
                # Our own pidfd says when the kernel finished the process (the floor any
                # detector can reach); `workers` says when the coordinator noticed.
                select.select([pidfd], [], [], 5.0)
                self.metrics.exit_s.append(time.perf_counter() - t0)
                gone = self.worker_gone_after(pid, t0, timeout=5)
                if gone is None:
                    raise Violation(f"killed worker {pid} still listed in `workers` after 5 s")
                self.metrics.detect_s.append(gone)
        finally:
            os.close(pidfd)

    def fault_none(self, record: RoundRecord, *_: Any) -> set[str]:
        return set()

    def fault_kill_before_model(
        self, record: RoundRecord, tag: str, text: str, pid: int | None, spec_id: str, since: float
    ) -> set[str]:
        t_kill = time.time()
        self._kill(record, pid)
        if record.landed is None:
            first = self.model_log.speculation_requests(since)
            record.landed = not first or first[0] > t_kill
        return set()

    def fault_kill_mid_stream(
        self, record: RoundRecord, tag: str, text: str, pid: int | None, spec_id: str, since: float
    ) -> set[str]:
        arrived = self.model_log.wait_speculation_request(0, since, timeout=5)
        if arrived is None:
            record.landed = False
            return set()
        stream_s = 30 * SPEC_CHUNK_0 / 1000
        at = arrived + SPEC_LATENCY_0 / 1000 + self.rng.uniform(0.15, 0.85) * stream_s
        time.sleep(max(0.0, at - time.time()))
        self._kill(record, pid)
        if record.landed is None:
            record.landed = len(self.model_log.speculation_requests(since)) == 1
        return set()

    def fault_kill_mid_tool(
        self, record: RoundRecord, tag: str, text: str, pid: int | None, spec_id: str, since: float
    ) -> set[str]:
        landed = self.wait_child(pid, timeout=5)
        self._kill(record, pid)
        record.landed = landed if record.landed is None else False
        return set()

    def wait_child(self, pid: int | None, timeout: float) -> bool:
        """Until the worker runs a tool subprocess (the slow shell command); True if it does."""

        def has_child() -> bool:
            try:
                return bool(psutil.Process(pid or 0).children())
            except psutil.Error:
                return True  # gone: stop waiting

        wait_for(has_child, timeout=timeout, interval=0.0005)
        try:
            return bool(psutil.Process(pid or 0).children())
        except psutil.Error:
            return False

    def fault_kill_mid_write(
        self, record: RoundRecord, tag: str, text: str, pid: int | None, spec_id: str, since: float
    ) -> set[str]:
        overlay = self.spec_base / str(pid) / spec_id
        first = overlay / f"chaos/r{tag}/alpha.txt"
        last = overlay / f"chaos/r{tag}/nested/gamma.md"
        wait_for(lambda: first.exists() or not pid_running(pid or 0), timeout=5, interval=0.0002)
        landed = first.exists() and not last.exists()
        self._kill(record, pid)
        record.landed = landed if record.landed is None else False
        return set()

    def fault_kill_after_complete(
        self, record: RoundRecord, tag: str, text: str, pid: int | None, spec_id: str, since: float
    ) -> set[str]:
        self.wait_status(spec_id, TERMINAL, timeout=10)
        record.landed = pid_running(pid or 0)
        self._kill(record, pid, measure=bool(record.landed))
        return set()

    def fault_kill_idle_worker(
        self, record: RoundRecord, tag: str, text: str, pid: int | None, spec_id: str, since: float
    ) -> set[str]:
        idle = [w.pid for w in self.workers() if w.state == "idle" and w.pid != pid]
        if not idle:
            record.landed = False
            return set()
        victim = self.rng.choice(idle)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "coordinator",
                "--project",
                str(self.project),
                "debug",
                "kill-worker",
                str(victim),
                "--json",
            ],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        record.landed = proc.returncode == 0
        if not record.landed:
            record.note = proc.stderr.strip()[:80]
            return set()
        gone = self.worker_gone_after(victim, t0, timeout=5)
        if gone is None:
            raise Violation(f"killed idle worker {victim} still listed after 5 s")
        if not wait_for(lambda: sum(w.state == "idle" for w in self.workers()) >= 1, timeout=10):
            raise Violation("the pool did not replace a killed idle worker within 10 s")
        return set()

    def _hang(self, record: RoundRecord, pid: int | None) -> None:
        if not pid or not pid_running(pid):
            record.landed = False
            return
        t0 = time.perf_counter()
        os.kill(pid, signal.SIGSTOP)
        record.landed = True
        gone = self.worker_gone_after(pid, t0, timeout=self.args.hang_after + 10, interval=0.01)
        if gone is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            raise Violation(
                f"SIGSTOPped worker {pid} was not killed as hung "
                f"within {self.args.hang_after + 10:.0f}s"
            )
        self.metrics.hang_s.append(gone)

    def fault_type_while_running(
        self, record: RoundRecord, tag: str, text: str, pid: int | None, spec_id: str, since: float
    ) -> set[str]:
        """The person types another prompt while the speculation runs: its worker is killed
        and its overlay removed, and that must never hold up the prompt (measured)."""
        arrived = self.model_log.wait_speculation_request(0, since, timeout=5)
        if arrived is not None:
            time.sleep(self.rng.uniform(0, (SPEC_LATENCY_0 + 30 * SPEC_CHUNK_0) / 1000))
        record.action = "type_other"
        record.status = self.suggestion_status(spec_id)
        record.landed = record.status == "running"  # aimed at a speculation still running
        sent = time.time()
        end = self.ask(f"chaos aside {record.n:04d}")[-1]
        if not isinstance(end, TurnEnded) or end.reason != "completed":
            raise Violation(f"the typed prompt ended with {end}")
        reached = self.model_log.requests("main", sent)
        if not reached:
            raise Violation("the typed prompt's request never reached the model")
        waited = reached[0] - sent
        self.metrics.typed_after_abort_s.append(waited)
        if waited > TYPED_AFTER_ABORT_BOUND_S:
            raise Violation(f"the typed prompt reached the model {waited:.1f} s after it was sent")
        return {"untouched"}

    def suggestion_status(self, spec_id: str) -> str | None:
        spec = self.suggestion().speculation
        return spec.status if spec is not None and spec.id == spec_id else None

    def fault_hang_running(
        self, record: RoundRecord, tag: str, text: str, pid: int | None, spec_id: str, since: float
    ) -> set[str]:
        arrived = self.model_log.wait_speculation_request(0, since, timeout=5)
        if arrived is not None:
            time.sleep(self.rng.uniform(0, (SPEC_LATENCY_0 + 30 * SPEC_CHUNK_0) / 1000))
        self._hang(record, pid)
        return set()

    def fault_hang_after_complete(
        self, record: RoundRecord, tag: str, text: str, pid: int | None, spec_id: str, since: float
    ) -> set[str]:
        self.wait_status(spec_id, TERMINAL, timeout=10)
        self._hang(record, pid)
        return set()

    def fault_kill_worker_during_accept(
        self, record: RoundRecord, tag: str, text: str, pid: int | None, spec_id: str, since: float
    ) -> set[str]:
        status = self.wait_status(spec_id, TERMINAL, timeout=10)
        record.status = status
        record.action = "accept"
        request = AcceptRequest(req_id=self.client.next_id(), method="tab")
        self.client.send(request)
        time.sleep(self.rng.uniform(0, 0.004))
        record.landed = bool(pid) and pid_running(pid or 0)
        if record.landed:
            os.kill(pid or 0, signal.SIGKILL)
        replies = list(self.client.replies(request.req_id, timeout_s=30))
        end = replies[-1]
        if not isinstance(end, TurnEnded):
            raise Violation(f"accept ended with {end}")
        if end.reason == "accepted":
            return {"accepted"}
        if status == "completed":
            raise Violation(
                f"accepting a completed speculation while its worker died fell back: {end}"
            )
        return {"untouched"}

    def fault_kill_coordinator_during_accept(
        self, record: RoundRecord, tag: str, text: str, pid: int | None, spec_id: str, since: float
    ) -> set[str]:
        record.status = self.wait_status(spec_id, TERMINAL, timeout=10)
        record.action = "accept"
        coordinator = self.service.pid
        family = [
            psutil.Process(coordinator),
            *psutil.Process(coordinator).children(recursive=True),
        ]
        self.write_scenario(first_round=record.n + 1)  # what the restarted one loads
        request = AcceptRequest(req_id=self.client.next_id(), method="tab")
        self.client.send(request)
        time.sleep(self.rng.uniform(0, 0.04))
        t_kill = time.perf_counter()
        os.kill(coordinator, signal.SIGKILL)
        self.service.close_client()
        self.service.reap()
        if not wait_for(
            lambda: not [p for p in family if pid_running(p.pid)], timeout=5, interval=0.001
        ):
            left = [p.pid for p in family if pid_running(p.pid)]
            for p in family:
                with contextlib.suppress(psutil.Error):
                    p.kill()
            raise Violation(f"processes outlived the coordinator by 5 s: {left}")
        self.metrics.family_exit_s.append(time.perf_counter() - t_kill)
        # The family was listed just before the kill; a worker the fork server was forking
        # then is not in it, and exits once it runs far enough to see the coordinator gone
        # (worker_entry). It must be gone before the restart: the new service's process
        # check would otherwise meet it, an orphan of the old one.
        if not wait_for(lambda: not self.marked_processes(), timeout=30, interval=0.01):
            late = [f"{p.pid} ({describe_process(p.pid)})" for p in self.marked_processes()]
            raise Violation(f"processes outlived the coordinator by 30 s: {late}")
        journal = self.state / "journal"
        if journal.exists() and any(journal.iterdir()):
            self.metrics.mid_apply += 1
            record.landed = True
            record.note = "killed mid-apply"
        else:
            record.landed = False
        restart = self.service.start()
        self.metrics.restart_s.append(restart)
        self.metrics.down_s.append(time.perf_counter() - t_kill)
        return {"untouched", "accepted"}

    def fault_garbage_frames(
        self, record: RoundRecord, tag: str, text: str, pid: int | None, spec_id: str, since: float
    ) -> set[str]:
        endpoints = Endpoints.for_project(self.project, create=False)
        ctx = zmq.Context()
        try:
            control = ctx.socket(zmq.DEALER)
            control.setsockopt(zmq.LINGER, 0)
            control.connect(endpoints.control)
            frames = garbage_frames(self.rng, self.service.epoch)
            for frame in frames:
                control.send(frame)
                self.metrics.garbage_sent += 1
                if not control.poll(2000):
                    raise Violation(f"no reply to a bad control frame {frame[:24]!r}")
                reply = codec.coordinator_to_client().decode(control.recv())
                if not isinstance(reply, ErrorReply):
                    raise Violation(f"a bad control frame got {type(reply).__name__}, not an error")
                self.metrics.garbage_replies += 1
            workers = ctx.socket(zmq.DEALER)
            workers.setsockopt(zmq.LINGER, 0)
            forged_file = self.base / f"forged-{tag}.txt"
            forged_file.write_text("forged\n")
            for identity in (f"w{pid}".encode(), b"w4194999", os.urandom(6)):
                sock = ctx.socket(zmq.DEALER)
                sock.setsockopt(zmq.LINGER, 0)
                sock.setsockopt(zmq.IDENTITY, identity)
                sock.connect(endpoints.workers)
                for frame in [
                    *frames,
                    *forged_events(self.service.epoch, spec_id, pid or 0, forged_file, tag),
                ]:
                    sock.send(frame)
                sock.close()
            workers.close()
        finally:
            ctx.destroy(linger=0)
        record.landed = True
        return set()

    def fault_enospc(
        self, record: RoundRecord, tag: str, text: str, pid: int | None, spec_id: str, since: float
    ) -> set[str]:
        if self.rng.random() < 0.5:
            # Before the writes: the copy-up of the existing file fails (a boundary).
            record.landed = self.model_log.wait_speculation_request(1, since, timeout=5) is not None
            record.note = "full before the writes; "
        else:
            # During the slow command: the last two new files hit ENOSPC mid-write.
            turn1 = self.model_log.wait_speculation_request(1, since, timeout=5)
            record.landed = turn1 is not None and self.wait_child(pid, timeout=5)
            record.note = "full mid-writes; "
        fill_disk(self.filler, keep_pages=self.rng.choice((0, 1, 2)))
        self.wait_status(spec_id, TERMINAL, timeout=10)
        self.filler.unlink()
        return set()


    # -- branch rounds -------------------------------------------------------------------
    # Each fault plays the round's end and returns the rank whose files were accepted.

    def wait_branches(self, texts: list[str]) -> list[BranchRef]:
        """Until every alternative has a speculation with a worker (or one that ended);
        the reply must list them in rank order with the scenario's texts, the top one's
        being the reply's own ``text``/``speculation``."""
        expected = list(enumerate(texts))
        deadline = time.monotonic() + 15
        last = None
        while time.monotonic() < deadline:
            last = self.suggestion()
            if last.text != texts[0]:
                time.sleep(0.001)
                continue
            listed = [(b.rank, b.text) for b in last.branches]
            if listed != expected:
                raise Violation(f"the suggestion lists the branches {listed}, not {expected}")
            specs = [b.speculation for b in last.branches]
            if all(s is not None and (s.worker_pid or s.status in TERMINAL) for s in specs):
                top = last.speculation
                if top is None or specs[0] is None or top.id != specs[0].id:
                    raise Violation(f"the reply's speculation {top} is not rank 0's {specs[0]}")
                refs = []
                for b, spec in zip(last.branches, specs, strict=True):
                    assert spec is not None
                    pid = spec.worker_pid
                    overlay = self.spec_base / str(pid) / spec.id if pid else None
                    refs.append(BranchRef(b.rank, b.text, spec.id, pid, overlay))
                    if pid:
                        self.seen_workers.add(pid)
                if len({ref.pid for ref in refs}) != len(refs):
                    raise Violation(f"branches share a worker: {[ref.pid for ref in refs]}")
                return refs
            time.sleep(0.001)
        raise Violation(f"the {len(texts)} branches did not all start within 15 s (last: {last})")

    def wait_terminal(self, refs: list[BranchRef], timeout: float = 30.0) -> dict[int, str]:
        """Until each of these branches' speculation is terminal; their statuses by rank.
        Each must stay listed meanwhile (nothing here drops a branch). The bound is loose:
        a branch beyond the top one runs at nice +10, and on a loaded machine its eight
        sandboxed shell commands alone can take several seconds."""
        deadline = time.monotonic() + timeout
        statuses: dict[int, str] = {}
        while time.monotonic() < deadline:
            reply = self.suggestion()
            live = {b.rank: b.speculation for b in reply.branches}
            for ref in refs:
                spec = live.get(ref.rank)
                if spec is None or spec.id != ref.spec_id:
                    raise Violation(
                        f"branch {ref.rank} ({ref.spec_id}) is no longer listed: "
                        f"{[(b.rank, b.speculation and b.speculation.id) for b in reply.branches]}"
                    )
                statuses[ref.rank] = spec.status
            if all(status in TERMINAL for status in statuses.values()):
                return statuses
            time.sleep(0.002)
        raise Violation(f"branches still {statuses} {timeout:.0f} s after they started")

    def reap_backgrounded(self, spec_id: str) -> bool:
        """The service logged that it left this speculation's reap and overlay removal to
        the background (``runner.ABORT_WAIT_S`` passed first)."""
        mark = f"speculation {spec_id}: its worker is not reaped yet"
        try:
            return mark in self.service.log_file.read_text(errors="replace")
        except OSError:
            return False

    def logged_failure(self, spec_id: str) -> str:
        """Why the service says this speculation failed: no reply carries the reason."""
        mark = f"speculation {spec_id} failed: "
        try:
            lines = self.service.log_file.read_text(errors="replace").splitlines()
        except OSError as exc:
            return f"no service log: {exc}"
        found = [line.split(mark, 1)[1] for line in lines if mark in line]
        return found[-1] if found else "no reason logged"

    def branch_status(self, rank: int) -> str | None:
        reply = self.suggestion()
        spec = next((b.speculation for b in reply.branches if b.rank == rank), None)
        return spec.status if spec is not None else None

    def stats(self) -> StatsReply:
        reply = self.client.request(StatsRequest(req_id=self.client.next_id()), timeout_s=5)
        if not isinstance(reply, StatsReply):
            raise Violation(f"stats answered {reply}")
        return reply

    def note_gone(self, record: RoundRecord, watcher: GoneWatcher, what: str) -> None:
        took = watcher.result(record, what, self.reap_backgrounded)
        if took is not None:
            self.metrics.branch_gone_s.append(took)

    def typed(
        self, record: RoundRecord, text: str, refs: list[BranchRef], keep: list[int]
    ) -> SuggestionReply:
        """Tell the service what is typed: the reply must list exactly the ranks in
        ``keep`` (of the live ``refs``), and the others must be gone within the bound."""
        dropped = [ref for ref in refs if ref.rank not in keep]
        watcher = GoneWatcher(dropped)
        reply = self.client.request(TypedRequest(req_id=self.client.next_id(), text=text), 10)
        if not isinstance(reply, SuggestionReply):
            raise Violation(f"typing {text!r} answered {reply}")
        ranks = [b.rank for b in reply.branches]
        if ranks != keep:
            raise Violation(f"typing {text!r} left the branches {ranks}, expected {keep}")
        top = next((ref.text for ref in refs if keep and ref.rank == keep[0]), None)
        if reply.text != top:
            raise Violation(f"typing {text!r}: the reply shows {reply.text!r}, not {top!r}")
        if dropped:
            self.note_gone(record, watcher, f"typing {text!r}")
        return reply

    def expect_not_found(self, index: int) -> None:
        """An accept of a rank that is not live is refused, and changes nothing."""
        request = AcceptRequest(req_id=self.client.next_id(), method="tab", index=index)
        reply = self.client.request(request, timeout_s=10)
        if not (isinstance(reply, ErrorReply) and reply.code == "not_found"):
            raise Violation(f"accepting rank {index}, which is not live, answered {reply}")
        self.metrics.not_found_checked += 1

    def accept_branch(
        self,
        record: RoundRecord,
        tag: str,
        refs: list[BranchRef],
        rank: int,
        status: str,
        *,
        victim: BranchRef | None = None,
        typed_text: str | None = None,
        typing: str | None = None,
    ) -> int | None:
        """Accept the branch of ``rank``: Tab with ``AcceptRequest.index``, or by submitting
        ``typed_text``, a prompt equal to it. ``victim``: a sibling whose worker gets
        SIGKILL 0-4 ms after the request is sent. ``status``: the branch's status before
        (a typed prompt may take a running one: the service waits for it). Checks that
        every other branch is gone within the bound, the transcript names this branch's
        files, and ``stats`` counts the accept under this rank (and under ``typing``).
        Returns ``rank`` when its files were applied, None when it fell back."""
        others = [ref for ref in refs if ref.rank != rank]
        stats_before = self.stats()
        t0 = time.perf_counter()
        watcher = GoneWatcher(others, t0)
        request: AcceptRequest | AskRequest
        if typed_text is None:
            request = AcceptRequest(req_id=self.client.next_id(), method="tab", index=rank)
        else:
            request = AskRequest(req_id=self.client.next_id(), text=typed_text)
        self.client.send(request)
        if victim is not None and victim.pid:
            time.sleep(self.rng.uniform(0, 0.004))
            record.landed = pid_running(victim.pid)
            if record.landed:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim.pid, signal.SIGKILL)
        replies = list(self.client.replies(request.req_id, timeout_s=30))
        end = replies[-1]
        if not isinstance(end, TurnEnded):
            raise Violation(f"accepting rank {rank} ended with {end}")
        self.note_gone(record, watcher, f"accept of rank {rank}")
        can_apply = status in ("completed", "running" if typed_text is not None else "completed")
        if end.reason != "accepted":
            if can_apply:
                raise Violation(f"accepting rank {rank} ({status}) fell back: {end}")
            return None
        if not can_apply:
            raise Violation(f"rank {rank} was accepted although its speculation was {status}")
        files = set(round_files(tag, rank))
        shown = [r for r in replies if isinstance(r, Transcript)]
        if len(shown) != 1 or set(shown[0].files) != files:
            named = [sorted(r.files) for r in shown]
            raise Violation(f"accepting rank {rank}: the transcript names {named}")
        text = next(ref.text for ref in refs if ref.rank == rank)
        if not shown[0].entries or shown[0].entries[0].text != text:
            raise Violation(f"accepting rank {rank}: the transcript starts {shown[0].entries[:1]}")
        after = self.stats()
        counts = [
            (
                f"rank {rank}",
                stats_before.accepted_by_rank.get(rank, 0),
                after.accepted_by_rank.get(rank, 0),
                1,
            )
        ]
        for how in ("prefix_kept", "exact_match"):
            was = stats_before.accepted_by_typing.get(how, 0)
            now = after.accepted_by_typing.get(how, 0)
            counts.append((how, was, now, int(how == typing)))
        for label, was, now, want in counts:
            if now - was != want:
                raise Violation(
                    f"accepting rank {rank} (typing: {typing}): stats count {label} "
                    f"{was} -> {now}, expected +{want}"
                )
        return rank

    def check_followup(self, tag: str, rank: int) -> None:
        """After an accept of ``rank``: the next suggestion is that branch's pipelined one
        (never another branch's); it is then rejected, killing its speculation. The wait is
        loose: the accepted worker may still be in its pipelined step, at nice +10."""
        want = followup_text(tag, rank)
        others = {followup_text(tag, r) for r in range(BRANCHES)} - {want}
        deadline = time.monotonic() + 15
        reply = None
        while time.monotonic() < deadline:
            reply = self.suggestion()
            if reply.text in others:
                raise Violation(
                    f"after accepting rank {rank} the next suggestion is {reply.text!r}, "
                    "another branch's pipelined suggestion"
                )
            if reply.text == want:
                if [b.text for b in reply.branches] != [want]:
                    raise Violation(f"the follow-up lists the branches {reply.branches}")
                if reply.speculation is not None and reply.speculation.worker_pid:
                    self.round_pids.append(reply.speculation.worker_pid)
                    self.seen_workers.add(reply.speculation.worker_pid)
                ok = self.client.request(RejectRequest(req_id=self.client.next_id()), 10)
                if not isinstance(ok, OkReply):
                    raise Violation(f"reject of the follow-up answered {ok}")
                self.metrics.pipelined_checked += 1
                return
            time.sleep(0.002)
        shown = reply.text if reply is not None else None
        raise Violation(
            f"no follow-up {want!r} within 15 s of accepting rank {rank} (shown: {shown!r})"
        )

    def settle_pids(self, pids: list[int | None]) -> None:
        """Every worker of the round exits; no speculation is left running."""
        for pid in pids:
            if pid and not wait_for(exited(pid), timeout=5.0):
                raise Violation(f"the round's worker {pid} is still alive 5 s after the round")
        current = self.suggestion()
        running = [
            b.speculation.id
            for b in current.branches
            if b.speculation is not None and b.speculation.status == "running"
        ]
        if running:
            raise Violation(f"speculations still running after the round: {running}")

    def fault_branch_accept_rank(
        self, record: RoundRecord, tag: str, refs: list[BranchRef]
    ) -> int | None:
        """Accept a rank, mostly not the first, once it ended (the slow third branch is
        often still running when the first or second is taken); or reject them all."""
        if self.rng.random() < 0.15:
            statuses = self.wait_terminal(refs)
            record.action, record.status = "reject", statuses[0]
            watcher = GoneWatcher(refs)
            reply = self.client.request(RejectRequest(req_id=self.client.next_id()), 10)
            if not isinstance(reply, OkReply):
                raise Violation(f"reject answered {reply}")
            self.note_gone(record, watcher, "reject")
            record.landed = True
            return None
        k = self.rng.choice((1, 2, 1, 2, 0))
        status = self.wait_terminal([refs[k]])[k]
        record.action, record.status = f"accept {k}", status
        rank = self.accept_branch(record, tag, refs, k, status)
        record.landed = rank == k
        if rank is not None:
            self.check_followup(tag, rank)
        return rank

    def fault_branch_kill_during_accept(
        self, record: RoundRecord, tag: str, refs: list[BranchRef]
    ) -> int | None:
        """Accept the first or second rank once it completed and SIGKILL a sibling's
        worker (the slow third one still running, or one in its pipelined step) 0-4 ms
        after sending Tab."""
        k = self.rng.choice((0, 1))
        status = self.wait_terminal([refs[k]])[k]
        record.action, record.status = f"accept {k}", status
        alive = [ref for ref in refs if ref.rank != k and ref.pid and pid_running(ref.pid)]
        victim = self.rng.choice(alive) if alive else None
        if victim is None:
            record.landed = False
        else:
            record.note = f"killed rank {victim.rank}"
        rank = self.accept_branch(record, tag, refs, k, status, victim=victim)
        if rank is not None:
            self.check_followup(tag, rank)
        return rank

    def fault_branch_kill_one(
        self, record: RoundRecord, tag: str, refs: list[BranchRef]
    ) -> int | None:
        """SIGKILL one branch's worker while it runs a tool subprocess: it fails, its
        overlay goes, the other branches complete; then accept one of those, or the dead
        one (which runs its prompt as a normal turn and kills the others)."""
        j = self.rng.randrange(BRANCHES)
        victim = refs[j]
        mid_tool = self.wait_child(victim.pid, timeout=5)
        t0 = time.perf_counter()
        self._kill(record, victim.pid)
        record.landed = mid_tool if record.landed is None else False
        record.note = f"killed rank {j}"
        self.note_gone(record, GoneWatcher([victim], t0), f"kill of rank {j}")
        statuses = self.wait_terminal(refs)
        if record.landed and statuses[j] != "failed":
            raise Violation(f"rank {j} was killed mid-tool but ended {statuses[j]}")
        for sibling, ended in statuses.items():
            if sibling != j and ended != "completed":
                why = self.logged_failure(refs[sibling].spec_id)
                raise Violation(
                    f"rank {sibling} ended {ended} after its sibling {j} was killed ({why})"
                )
        self.metrics.siblings_completed += BRANCHES - 1
        k = self.rng.choice([r for r in range(BRANCHES) if r != j] + [j])
        record.action, record.status = f"accept {k}", statuses[k]
        rank = self.accept_branch(record, tag, refs, k, statuses[k])
        if rank is not None:
            self.check_followup(tag, rank)
        return rank

    def fault_branch_typing(
        self, record: RoundRecord, tag: str, refs: list[BranchRef]
    ) -> int | None:
        """Type a prefix of the first two ranks only (the third is dropped at once, its
        accept refused), then: narrow to the second and Tab it; type one out in full
        (another case, a final period) while it may still run; diverge from both; or clear
        the typing and Tab the first."""
        time.sleep(self.rng.uniform(0, 0.4))
        third = refs[2]
        record.landed = bool(third.pid) and pid_running(third.pid or 0)
        self.typed(record, TYPED_SHARED, refs, keep=[0, 1])
        self.expect_not_found(2)
        mode = self.rng.choice(("narrow", "exact", "exact", "diverge", "clear"))
        record.action = f"type {mode}"
        live = refs[:2]
        if mode == "diverge":
            self.typed(record, TYPED_NONE, live, keep=[])
            self.expect_not_found(0)
            record.status = "aborted"
            return None
        if mode == "exact":
            k = self.rng.choice((0, 1))
            text = self.rng.choice((refs[k].text, refs[k].text.capitalize() + "."))
            status = self.branch_status(k) or "gone"
            record.status = status
            rank = self.accept_branch(
                record, tag, live, k, status, typed_text=text, typing="exact_match"
            )
        else:
            k, typing = (1, "prefix_kept") if mode == "narrow" else (0, None)
            if mode == "narrow":
                self.typed(record, TYPED_NARROW, live, keep=[1])
                live = [refs[1]]
            else:
                self.typed(record, "", live, keep=[0, 1])  # cleared: none back, none gone
            status = self.wait_terminal([refs[k]])[k]
            record.status = status
            rank = self.accept_branch(record, tag, live, k, status, typing=typing)
        if rank is not None:
            self.check_followup(tag, rank)
        return rank


# --------------------------------------------------------------------------- fault material


def classify_tree(
    actual: dict[str, bytes], before: dict[str, bytes], files: dict[str, bytes]
) -> str:
    """untouched | accepted | subset (some round files, each exact) | corrupt | mixed."""
    changed = {k for k in set(actual) | set(before) if actual.get(k) != before.get(k)}
    if not changed:
        return "untouched"
    if changed - set(files):
        return "corrupt"
    if any(actual.get(k) != files[k] for k in changed):
        return "corrupt"
    return "accepted" if changed == set(files) else "subset"


def sandbox_helper_of(worker: int) -> int | None:
    """The worker's sandbox helper: its direct child forked from it (same command line)."""
    try:
        parent = psutil.Process(worker)
        line = parent.cmdline()
        for child in parent.children():
            if child.cmdline() == line:
                return child.pid
    except psutil.Error:
        return None
    return None


def garbage_frames(rng: random.Random, epoch: int) -> list[bytes]:
    """Bad control frames: random bytes, truncated and retagged requests, wrong types."""
    enc = msgspec.msgpack.Encoder()
    valid = codec.client_to_coordinator().encode(StatusRequest(req_id=77))
    frames = [
        rng.randbytes(rng.randint(1, 64)),
        valid[: rng.randint(1, len(valid) - 1)],
        enc.encode({"type": "no_such_request", "req_id": 78}),
        enc.encode({"type": "ask", "req_id": 79, "text": 12345}),
        enc.encode({"type": "status", "req_id": 1e300}),
        enc.encode({"type": "suggestion", "req_id": 81, "wait_visible": "yes"}),
        enc.encode([1, 2, 3]),
        b"",
        enc.encode(Heartbeat(pid=1, epoch=epoch)),
    ]
    rng.shuffle(frames)
    return frames


def forged_events(epoch: int, spec_id: str, pid: int, forged_file: Path, tag: str) -> list[bytes]:
    """Worker events a stranger might send: a Completed for the running speculation that
    would apply a file of our choosing, a Hello, stale-epoch events."""
    enc = codec.worker_to_coordinator()
    outcome = SpeculationOutcome(
        messages=(Message.assistant("forged"),),
        written_files={f"chaos/FORGED-{tag}.txt": WrittenFile(overlay_path=str(forged_file))},
        tool_use_count=1,
        turns=1,
    )
    return [
        enc.encode(Completed(job_id=spec_id, epoch=epoch, outcome=outcome)),
        enc.encode(Completed(job_id=spec_id, epoch=epoch ^ 1, outcome=outcome)),
        enc.encode(Hello(pid=pid, epoch=epoch, sandbox="none")),
        enc.encode(Heartbeat(pid=pid, epoch=epoch, job_id=spec_id)),
    ]


def fill_disk(path: Path, keep_pages: int) -> None:
    """Fill the file system holding ``path`` until ENOSPC, then free ``keep_pages`` pages."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        free = shutil.disk_usage(path.parent).free
        chunk = b"\0" * (1 << 20)
        written = 0
        with contextlib.suppress(OSError):
            while written + len(chunk) <= free:
                written += os.write(fd, chunk)
        with contextlib.suppress(OSError):
            while True:
                written += os.write(fd, b"\0" * 4096)
        if keep_pages:
            os.ftruncate(fd, max(0, written - keep_pages * 4096))
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- report


def summarize(chaos: Chaos, elapsed: float) -> dict[str, Any]:
    by_kind: dict[str, dict[str, Any]] = {}
    for kind in chaos.kinds:
        rows = [r for r in chaos.records if r.kind == kind]
        by_kind[kind] = {
            "rounds": len(rows),
            "landed": sum(1 for r in rows if r.landed),
            "statuses": dict(Counter(r.status or "-" for r in rows)),
            "outcomes": dict(Counter(r.outcome or "-" for r in rows)),
            "violations": sum(len(r.violations) for r in rows),
        }
        if kind in BRANCH_KINDS:
            by_kind[kind]["actions"] = dict(Counter(r.action or "-" for r in rows))
            by_kind[kind]["accepted_ranks"] = dict(
                Counter(r.rank for r in rows if r.rank is not None)
            )
    m = chaos.metrics

    def dist(values: list[float]) -> dict[str, float | int]:
        if not values:
            return {"n": 0}
        return {
            "n": len(values),
            "median_ms": round(statistics.median(values) * 1000, 2),
            "p99_ms": round(percentile(values, 0.99) * 1000, 2),
            "max_ms": round(max(values) * 1000, 2),
        }

    return {
        "rounds": len(chaos.records),
        "planned_rounds": len(chaos.plan),
        "retried": chaos.retried,
        "stopped_early": chaos.stopped_early,
        "seed": chaos.args.seed,
        "speculation_branches": chaos.args.branches,
        "base_dir": str(chaos.base),
        "elapsed_s": round(elapsed, 1),
        "heartbeat_s": None if chaos.args.cli_service else chaos.args.heartbeat,
        "hang_after_s": None if chaos.args.cli_service else chaos.args.hang_after,
        "tmpfs": chaos.tmpfs_reason or f"{chaos.args.tmpfs_mb} MiB",
        "by_kind": by_kind,
        "violations": [f"round {r.n} {r.kind}: {v}" for r in chaos.records for v in r.violations],
        "dead_worker_exit": dist(m.exit_s),
        "detect_dead_worker": dist(m.detect_s),
        "detect_hung_worker": dist(m.hang_s),
        "restart_to_serving": dist(m.restart_s[1:]),
        "kill_to_all_exited": dist(m.family_exit_s),
        "kill_to_serving": dist(m.down_s),
        "coordinator_killed_mid_apply": m.mid_apply,
        "rolled_forward_without_transcript": m.applied_without_history,
        "garbage_frames": {"sent": m.garbage_sent, "error_replies": m.garbage_replies},
        "branch_rounds": sum(1 for r in chaos.records if r.kind in BRANCH_KINDS),
        "dropped_branches_gone": dist(m.branch_gone_s),
        "followups_checked": m.pipelined_checked,
        "gone_rank_accepts_refused": m.not_found_checked,
        "siblings_completed_after_a_kill": m.siblings_completed,
        "typed_prompt_after_abort": dist(m.typed_after_abort_s),
    }


def print_table(summary: dict[str, Any]) -> None:
    head = (
        f"{'fault':32s} {'rounds':>6s} {'landed':>6s} {'accepted':>8s} {'untouched':>9s} "
        f"{'subset':>6s} {'violations':>10s}  terminal states"
    )
    print(head)
    print("-" * len(head))
    total = 0
    for kind, row in summary["by_kind"].items():
        outcomes = row["outcomes"]
        subset = outcomes.get("subset", 0)  # ENOSPC: only the writes that succeeded, each exact
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(row["statuses"].items()))
        print(
            f"{kind:32s} {row['rounds']:6d} {row['landed']:6d} {outcomes.get('accepted', 0):8d} "
            f"{outcomes.get('untouched', 0):9d} {subset:6d} {row['violations']:10d}  {statuses}"
        )
        total += row["violations"]
    print("-" * len(head))
    print(f"{'all':32s} {summary['rounds']:6d} {'':6s} {'':8s} {'':9s} {'':6s} {total:10d}")

    def line(label: str, d: dict[str, Any]) -> None:
        if d.get("n"):
            print(
                f"{label:44s} n={d['n']:<4d} median {d['median_ms']:9.2f} ms   "
                f"p99 {d['p99_ms']:9.2f} ms"
            )
        else:
            print(f"{label:44s} n=0")

    print()
    line("dead worker: SIGKILL -> exited (own pidfd)", summary["dead_worker_exit"])
    line("dead worker: SIGKILL -> gone from `workers`", summary["detect_dead_worker"])
    hb = summary["heartbeat_s"]
    hang_label = "hung worker: SIGSTOP -> killed, gone" + (
        f" (hb {hb}s, limit {summary['hang_after_s']}s)" if hb else ""
    )
    line(hang_label, summary["detect_hung_worker"])
    line("coordinator restart -> answers `status`", summary["restart_to_serving"])
    line("coordinator SIGKILL -> its workers all exited", summary["kill_to_all_exited"])
    line("coordinator SIGKILL -> serving again", summary["kill_to_serving"])
    line("typed while running -> request at the model", summary["typed_prompt_after_abort"])
    print(
        f"coordinator kills that landed mid-apply: {summary['coordinator_killed_mid_apply']} "
        "(files rolled forward without the transcript: "
        f"{summary['rolled_forward_without_transcript']}); "
        f"garbage control frames: {summary['garbage_frames']['sent']} sent, "
        f"{summary['garbage_frames']['error_replies']} error replies; "
        f"overlay tmpfs: {summary['tmpfs']}"
    )
    if summary["branch_rounds"]:
        line(
            "dropped branches: workers dead, overlays gone",
            summary["dropped_branches_gone"],
        )
        ranks: Counter[int] = Counter()
        for kind in BRANCH_KINDS:
            ranks.update(summary["by_kind"].get(kind, {}).get("accepted_ranks", {}))
        print(
            f"branch rounds: {summary['branch_rounds']} (speculationBranches "
            f"{summary['speculation_branches']}); accepted by rank: "
            + ", ".join(f"{k}: {v}" for k, v in sorted(ranks.items()))
            + f"; follow-up was the accepted branch's: {summary['followups_checked']}; "
            f"accepts of a dropped rank refused: {summary['gone_rank_accepts_refused']}; "
            f"branches that completed after a sibling was killed: "
            f"{summary['siblings_completed_after_a_kill']}"
        )
    print(f"{summary['rounds']} rounds, seed {summary['seed']}, {summary['elapsed_s']} s")
    for v in summary["violations"]:
        print("VIOLATION", v)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--only",
        type=lambda s: [k.strip() for k in s.split(",") if k.strip()],
        default=None,
        help=f"comma-separated fault kinds from: {', '.join(ALL_KINDS)}",
    )
    parser.add_argument(
        "--branches",
        type=int,
        default=BRANCHES,
        help=f"the service's speculationBranches (branch rounds need {BRANCHES})",
    )
    parser.add_argument("--heartbeat", type=float, default=0.25, help="worker heartbeat (s)")
    parser.add_argument(
        "--hang-after", type=float, default=1.5, help="silence that counts as hung (s)"
    )
    parser.add_argument(
        "--cli-service",
        action="store_true",
        help="run the CLI's `serve` (default heartbeat 1 s, hang 5 s)",
    )
    parser.add_argument("--tmpfs-mb", type=int, default=64)
    parser.add_argument(
        "--no-tmpfs", action="store_true", help="do not mount a tmpfs (skips enospc)"
    )
    parser.add_argument(
        "--apply-pause-ms",
        type=float,
        default=2.0,
        help="pause at each apply checkpoint (a seam the service is built with) to widen "
        "the window of a coordinator kill during accept; 0 disables",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=0,
        help="spare rounds (of each sort, plain and branch) to replay a fault kind none of "
        "whose rounds landed where it was aimed",
    )
    parser.add_argument("--max-seconds", type=float, default=0.0, help="stop early after this long")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, project)")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per round")
    args = parser.parse_args(argv)
    if args.only:
        unknown = set(args.only) - set(ALL_KINDS)
        if unknown:
            parser.error(f"unknown fault kinds: {', '.join(sorted(unknown))}")
    return args


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_serve"]:
        return serve_child(argv[1:])
    args = parse_args(argv)
    started = time.monotonic()
    signal.signal(signal.SIGTERM, _interrupt)  # a timeout still stops the service and unmounts
    try:
        chaos = Chaos(args)
    except (SetupError, OSError, subprocess.CalledProcessError) as exc:
        print(f"chaos: setup failed: {exc}", file=sys.stderr)
        return 2
    try:
        try:
            chaos.run()
        except SetupError as exc:
            print(f"chaos: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
        summary = summarize(chaos, time.monotonic() - started)
        with contextlib.suppress(Exception):
            stats = chaos.client.request(StatsRequest(req_id=chaos.client.next_id()), timeout_s=5)
            if isinstance(stats, StatsReply):
                summary["service_stats"] = msgspec.to_builtins(stats)
    finally:
        chaos.close()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_table(summary)
    return 1 if summary["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
