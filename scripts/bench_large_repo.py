#!/usr/bin/env python3
"""A speculation in a 200,000-file git repository against the same in a 2,000-file one,
and against bare git and rg on the same tree.

    .venv/bin/python scripts/bench_large_repo.py [--rounds 3] [--files 200000] [--keep] [--json]
        [--repo PATH --word WORD --glob GLOB]

Both repositories are generated (16 small Python files a directory, three levels deep, one
tracked file modified so ``git status`` and ``git diff`` have something to say), committed,
and kept under ``$TMPDIR/specrun-bench-large-repo/`` while the run lasts; ``--keep`` keeps
them for the next run (the 200k one takes about half a minute to make), otherwise they are
removed at the end. ``--repo`` puts a real repository's work tree (a clone of linux,
cpython, ...) in the place of the generated large one: ``--word`` is a word that occurs
in a few of its files and ``--glob`` a glob for one directory's files; the bench appends
a line to its first tracked file for the run and puts the file back at the end.

A real service (``specrun serve``) on a scripted model served by this process (its request
log gives the arrival time of every model request), approval mode auto-edit. Each round:
a main turn, its suggestion, and the speculation of that suggestion, whose model calls
``git status --short``, ``git diff --stat``, ``git grep`` for the edited line and
``git log -p -1`` (read-only shell, in the sandbox, after the repository hazard check),
``grep_search`` for a rare word, ``glob`` for one directory's files and ``write_file``;
then Tab. Measured (medians over ``--rounds``):

  - speculation start: the suggestion request's arrival to the speculation's first model
    request, less the scripted latency (suggestion parsing, overlay, worker hand-off);
  - each tool: the arrival of the request that asked for it to the next request's, less
    the scripted latency (gate, hazard check, sandbox, the tool, the result's way back);
  - accept: Tab to ``TurnEnded`` (the file on disk), from the client;
  - memory: PSS of the service's whole process tree once the pool is warm again after the
    rounds, with the project open;
  - bare: the same git commands run directly, ``rg`` for the same word, ``rg --files``
    with the same glob, in the same tree;
  - the hazard check alone in this process: a first (cold) scan and a repeat one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _bench_service import timed_turn, use_runtime_dir, wait_completed  # noqa: E402

from coordinator.cli.client import ServiceClient  # noqa: E402
from coordinator.cli.daemon import start_daemon, stop_daemon  # noqa: E402
from coordinator.scripted_model import ScriptedModelServer  # noqa: E402
from coordinator.user_state import project_state_path  # noqa: E402
from protocol.wire.control import (  # noqa: E402
    AcceptRequest,
    AskRequest,
    ResetRequest,
    StatusReply,
    StatusRequest,
    TurnEnded,
)
from worker.shell import git_tree_scan  # noqa: E402
from worker.shell.git_config import git_config_hazard  # noqa: E402
from worker.tools.rg import rg_binary  # noqa: E402

LATENCY_MS = 20
PROMPT = "check the tree and write the notes"
RARE = "frobnicate_widget"
GLOB = "pkg01/mod03/**/*.py"
PER_DIR = 16
GENERATOR = "2"  # bump when the generated tree changes
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@invalid",
}
EDIT = "# edited"  # the line appended to one tracked file; ``git grep`` looks for it
GIT_GREP = f"git grep -n -F '{EDIT}'"
GIT_LOG = "git log -p -1 --format=LOGMARK%n"  # the marker says the log's result is in
TOOLS = ("git status", "grep_search", "glob", "git diff", "git grep", "git log", "write_file")


# --- the repository -------------------------------------------------------------------------


def cache_dir() -> Path:
    return Path(tempfile.gettempdir()) / "specrun-bench-large-repo"


def _git(root: Path, *argv: str) -> None:
    subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *argv],
        cwd=root,
        env={**os.environ, **GIT_ENV},
        check=True,
        stdout=subprocess.DEVNULL,
    )


def generate(root: Path, files: int) -> Path:
    """``files`` files committed in a fresh repository at ``root``, one of them modified.

    Their times are set an hour back before ``git add``, so no index entry is "racily
    clean" (git would hash those files again on every status, which no real repository
    of that age does), and so are the directories' (the hazard check keeps what it
    listed only for directories that did not change in the last two seconds)."""
    root.mkdir(parents=True)
    old = time.time() - 3600
    dirs: set[Path] = set()
    for i in range(files):
        a, rest = divmod(i // PER_DIR, 500)
        b, c = divmod(rest, 25)
        d = root / f"pkg{a:02d}" / f"mod{b:02d}" / f"sub{c:02d}"
        if d not in dirs:
            d.mkdir(parents=True)
            dirs.add(d)
        path = d / f"file{i % PER_DIR:02d}.py"
        word = RARE if i % 50_000 == 7 else "value"
        path.write_text(f'"""Module {i}."""\n\n\ndef {word}_{i}(x):\n    return x + {i}\n')
        os.utime(path, (old, old))
    (root / ".gitignore").write_text(".specrun/\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "generated")
    first = root / "pkg00" / "mod00" / "sub00" / "file00.py"
    first.write_text(first.read_text() + f"{EDIT}\n")
    for d in sorted(dirs | {p.parent for p in dirs} | {root}, reverse=True):
        os.utime(d, (old, old))
    return root


def repository(files: int) -> Path:
    """The cached repository of ``files`` files, made if it is missing or stale."""
    root = cache_dir() / f"{files}"
    marker = cache_dir() / f"{files}.done"
    if marker.exists() and marker.read_text() == GENERATOR and root.is_dir():
        return root
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    generate(root, files)
    marker.write_text(GENERATOR)
    print(f"generated {files:,} files in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return root


# --- the service ----------------------------------------------------------------------------


def scenario(word: str = RARE, pattern: str = GLOB) -> dict[str, Any]:
    def call(name: str, **arguments: Any) -> dict[str, Any]:
        return {"tool_calls": [{"name": name, "arguments": arguments}]}

    step = {"turn_user": PROMPT}
    return {
        "name": "bench-large-repo",
        "latency_ms": LATENCY_MS,
        "chunk_ms": 0,
        "rules": [
            {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
            {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
            {"when": {"purpose": "suggestion", "prompt_contains": "Ready."},
             "reply": {"json": {"suggestion": PROMPT}}},
            {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}},
            {"when": {"last_user": "^prepare$"}, "reply": call("list_directory", path=".")},
            {"when": {"turn_user": "^prepare$", "last_tool": "list_directory"},
             "reply": {"text": "Ready."}},
            {"when": {"last_user": f"^{PROMPT}$"},
             "reply": call("run_shell_command", command="git status --short")},
            {"when": {**step, "last_tool": "write_file"}, "reply": {"text": "Done."}},
            {"when": {**step, "last_tool": "glob"},
             "reply": call("run_shell_command", command="git diff --stat")},
            # Each shell step is told by what its output holds, the latest step first.
            {"when": {**step, "last_tool": "run_shell_command", "prompt_contains": "LOGMARK"},
             "reply": call("write_file", file_path="NOTES.md", content="# Notes\n")},
            {"when": {**step, "last_tool": "run_shell_command", "prompt_contains": EDIT},
             "reply": call("run_shell_command", command=GIT_LOG)},
            {"when": {**step, "last_tool": "run_shell_command", "prompt_contains": "insertion(+)"},
             "reply": call("run_shell_command", command=GIT_GREP)},
            {"when": {**step, "last_tool": "run_shell_command"},
             "reply": call("grep_search", pattern=word)},
            {"when": {**step, "last_tool": "grep_search"}, "reply": call("glob", pattern=pattern)},
            {"default": {"text": "ok"}},
        ],
    }  # fmt: skip


def family_pss(pid: int) -> dict[str, float]:
    """PSS in MB of the service and of every process below it, by pid."""
    out: dict[str, float] = {}
    proc = psutil.Process(pid)
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            out[f"{p.pid}"] = p.memory_full_info().pss / 2**20
    return out


class Service:
    def __init__(self, project: Path, server: ScriptedModelServer) -> None:
        self.project = project
        self.server = server
        self.runtime = Path(tempfile.mkdtemp(prefix="sr-large-"))
        self._restore_runtime = use_runtime_dir(self.runtime)
        try:
            args = ["--base-url", f"{server.base_url}", "--approval-mode", "auto-edit"]
            start_daemon(project, args, env={**os.environ, "OPENAI_API_KEY": "bench"})
        except BaseException:
            self._restore()
            raise
        self.client = ServiceClient(project, timeout_s=120)

    def turn(self, request: Any) -> tuple[float, TurnEnded]:
        return timed_turn(self.client, request)

    def status(self) -> StatusReply:
        reply = self.client.request(StatusRequest(req_id=self.client.next_id()))
        assert isinstance(reply, StatusReply), reply
        return reply

    def wait_completed(self) -> None:
        wait_completed(self.client, poll_s=0.01, detail=lambda: f"\n{self.log_tail()}")

    def wait_warm(self) -> StatusReply:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            reply = self.status()
            if reply.pool_warm:
                return reply
            time.sleep(0.05)
        raise RuntimeError("the pool never got warm again")

    def log_tail(self) -> str:
        log = project_state_path(self.project, "logs", "service.log")
        with contextlib.suppress(OSError):
            return "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        return ""

    def _restore(self) -> None:
        self._restore_runtime()
        shutil.rmtree(self.runtime, ignore_errors=True)

    def close(self) -> None:
        self.client.close()
        stop_daemon(self.project)
        self._restore()


def one_round(svc: Service, server: ScriptedModelServer) -> dict[str, float]:
    """A main turn, its speculation (the five tools) and Tab; seconds for each part."""
    svc.client.request(ResetRequest(req_id=svc.client.next_id()))
    before = len(server.requests)
    svc.turn(AskRequest(req_id=svc.client.next_id(), text="prepare"))
    svc.wait_completed()
    took, end = svc.turn(AcceptRequest(req_id=svc.client.next_id(), method="tab"))
    assert end.reason == "accepted", end
    notes = svc.project / "NOTES.md"
    assert notes.read_text() == "# Notes\n"
    notes.unlink()
    log = server.requests[before:]
    latency = LATENCY_MS / 1000
    suggestion = next(r["time"] for r in log if r["purpose"] == "suggestion")
    spec = [r["time"] for r in log if r["purpose"] == "speculation"]
    assert len(spec) == len(TOOLS) + 1, f"{len(spec)} speculation requests"
    out = {"speculation start": spec[0] - suggestion - latency, "accept": took}
    for name, start, end_t in zip(TOOLS, spec, spec[1:], strict=False):
        out[name] = end_t - start - latency
    return out


# --- bare baselines -------------------------------------------------------------------------


def _median_s(fn: Callable[[], object], runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bare(root: Path, runs: int, word: str = RARE, pattern: str = GLOB) -> dict[str, float]:
    rg = rg_binary(root)
    assert rg is not None
    env = {**os.environ, **GIT_ENV, "GIT_OPTIONAL_LOCKS": "0"}

    def run(*argv: str) -> Callable[[], None]:
        def go() -> None:
            done = subprocess.run(argv, cwd=root, env=env, capture_output=True, check=False)
            assert done.returncode in (0, 1), done.stderr

        return go

    def hazard_cold() -> None:
        git_tree_scan.forget()
        assert git_config_hazard(str(root)) is None

    def hazard_warm() -> None:
        assert git_config_hazard(str(root)) is None

    return {
        "git status": _median_s(run("git", "status", "--short"), runs),
        "git diff": _median_s(run("git", "diff", "--stat"), runs),
        "git grep": _median_s(run("git", "grep", "-n", "-F", EDIT), runs),
        "git log": _median_s(run("git", "log", "-p", "-1", "--format=LOGMARK%n"), runs),
        "grep_search": _median_s(run(rg, word), runs),
        "glob": _median_s(run(rg, "--files", "--glob", pattern), runs),
        "hazard check, first scan": _median_s(hazard_cold, runs),
        "hazard check, repeated": _median_s(hazard_warm, runs),
    }


# --- the run --------------------------------------------------------------------------------


def measure_tree(files: int, rounds: int) -> dict[str, Any]:
    return measure_root(repository(files), files, rounds)


def measure_real(root: Path, rounds: int, word: str, pattern: str) -> dict[str, Any]:
    """A real repository's work tree, one tracked file edited for the run."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True
    ).stdout.split(b"\0")
    first = root / os.fsdecode(listed[0])
    before = first.read_bytes()
    first.write_bytes(before.rstrip(b"\n") + f"\n{EDIT}\n".encode())
    try:
        return measure_root(root, len(listed) - 1, rounds, word, pattern)
    finally:
        first.write_bytes(before)


def measure_root(
    root: Path, files: int, rounds: int, word: str = RARE, pattern: str = GLOB
) -> dict[str, Any]:
    with ScriptedModelServer(scenario(word, pattern)) as server:
        svc = Service(root, server)
        try:
            results = [one_round(svc, server) for _ in range(rounds + 1)][1:]  # 1 warm-up
            reply = svc.wait_warm()
            pss = family_pss(reply.pid)
        finally:
            svc.close()
            shutil.rmtree(root / ".specrun", ignore_errors=True)
    medians = {k: statistics.median(r[k] for r in results) * 1000 for k in results[0]}
    baseline = {k: v * 1000 for k, v in bare(root, max(3, rounds), word, pattern).items()}
    return {
        "files": files,
        "service_ms": medians,
        "bare_ms": baseline,
        "pss_mb": round(sum(pss.values()), 1),
        "processes": len(pss),
    }


def measure(
    files: int = 200_000,
    small: int = 2_000,
    rounds: int = 3,
    keep: bool = False,
    real: tuple[Path, str, str] | None = None,
) -> dict[str, Any]:
    """``real``: a repository's work tree, a word and a glob to use instead of the
    generated large tree."""
    try:
        return {
            "small": measure_tree(small, rounds),
            "large": measure_real(real[0], rounds, real[1], real[2])
            if real
            else measure_tree(files, rounds),
        }
    finally:
        if not keep:
            shutil.rmtree(cache_dir(), ignore_errors=True)


def table(report: dict[str, Any]) -> list[tuple[str, float, float, float]]:
    """(what, large ms, small ms, bare ms on the large tree or nan)."""
    small, large = report["small"], report["large"]
    rows = []
    for key in ("speculation start", *TOOLS, "accept"):
        rows.append((key, large["service_ms"][key], small["service_ms"][key],
                     large["bare_ms"].get(key, float("nan"))))
    for key in ("hazard check, first scan", "hazard check, repeated"):
        rows.append((key, large["bare_ms"][key], small["bare_ms"][key],
                     large["bare_ms"]["git status"]))
    return rows  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=200_000)
    parser.add_argument("--small", type=int, default=2_000)
    parser.add_argument("--keep", action="store_true", help="keep the generated repositories")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repo", type=Path, help="a real repository's work tree instead")
    parser.add_argument("--word", default=RARE, help="with --repo: a word in a few files")
    parser.add_argument("--glob", default=GLOB, help="with --repo: one directory's files")
    args = parser.parse_args(argv)
    real = (args.repo.resolve(), args.word, args.glob) if args.repo else None
    report = measure(args.files, args.small, args.rounds, args.keep, real)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    large, small = report["large"]["files"], report["small"]["files"]
    print(f"{'':28} {f'{large:,} files':>14} {f'{small:,} files':>14} {'ratio':>7}"
          f" {'bare (large)':>13} {'ratio':>7}")  # fmt: skip
    for name, big, little, base in table(report):
        print(f"{name:28} {big:11.1f} ms {little:11.1f} ms {big / little:6.2f}x"
              f" {base:10.1f} ms {big / base:6.2f}x")  # fmt: skip
    print(f"{'service PSS, project open':28} {report['large']['pss_mb']:11.1f} MB"
          f" {report['small']['pss_mb']:11.1f} MB"
          f" {report['large']['pss_mb'] / report['small']['pss_mb']:6.2f}x")  # fmt: skip
    print(f"processes: {report['large']['processes']} / {report['small']['processes']}")
    print("bare: the same git commands / rg WORD / rg --files --glob, run directly in the "
          "large tree; for the hazard check: bare git status")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
