#!/usr/bin/env python3
"""Wall time of one `specrun` command from a shell, against a bare interpreter.

A real service on the scripted model (1 ms per model call) in a throw-away copy of the
sample project. Each sample is a fresh ``specrun <command> --json`` process (the console
script a shell runs), timed from spawn to exit: interpreter start, imports, connecting to
the control socket, the request, printing the reply. Measured in the same run, interleaved
with the commands so a busy machine slows every row alike:
  - the floor: ``python -c pass`` (the same interpreter, site and .pth files included);
  - ``python -c "import msgspec"``: what any client of the control socket imports (the
    CLI's DEALER is ``protocol/wire/zmtp.py``, in the standard library);
  - ``python -c "import coordinator.cli.client"``: the socket client itself, with the
    protocol's message types, codec and endpoints: the floor of every light command;
  - the request alone: the same ``status`` round trip from this (already warm) process.
``accept`` and ``reject`` each get a completed speculation to act on (prepared untimed
before every sample), so they do their real work; ``accept`` applies one file.

Bytecode: the commands run with a warm bytecode cache, as an installed specrun does after
its first run (in a temp dir through ``PYTHONPYCACHEPREFIX``, so the tree stays clean),
even where ``PYTHONDONTWRITEBYTECODE`` is set; one more row, ``status`` with that variable
set and no cache, shows what compiling specrun's own modules on every call costs.

Usage: scripts/bench_cli.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _bench_service import timed_turn, use_runtime_dir, wait_completed  # noqa: E402
from _sample_project import copy_sample_project  # noqa: E402

from coordinator.cli.client import ServiceClient  # noqa: E402
from coordinator.cli.daemon import start_daemon, stop_daemon  # noqa: E402
from protocol.wire.control import (  # noqa: E402
    AskRequest,
    ResetRequest,
    StatusRequest,
)

PROMPT = "write the notes"
COMMANDS = ("status", "suggestion", "workers", "reject", "accept")
BASELINES = {"bare": "pass", "msgspec": "import msgspec",
             "client": "import coordinator.cli.client"}


def scenario() -> dict[str, Any]:
    write = {"name": "write_file",
             "arguments": {"file_path": "docs/NOTES.md", "content": "# notes\n"}}
    return {
        "name": "bench-cli", "latency_ms": 1, "chunk_ms": 1,
        "rules": [
            {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
            {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
            {"when": {"purpose": "suggestion", "prompt_contains": "Ready."},
             "reply": {"json": {"suggestion": PROMPT}}},
            {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}},
            {"when": {"last_user": "^prepare$"},
             "reply": {"tool_calls": [{"name": "list_directory", "arguments": {"path": "."}}]}},
            {"when": {"turn_user": "^prepare$", "last_tool": "list_directory"},
             "reply": {"text": "Ready."}},
            {"when": {"turn_user": f"^{PROMPT}$", "last_tool": "write_file"},
             "reply": {"text": "Wrote the notes."}},
            {"when": {"last_user": f"^{PROMPT}$"}, "reply": {"tool_calls": [write]}},
            {"default": {"text": "ok"}},
        ],
    }  # fmt: skip


def specrun_argv() -> list[str]:
    """The console script next to the interpreter (what a shell runs), else ``-m``."""
    script = Path(sys.executable).parent / "specrun"
    return [str(script)] if script.exists() else [sys.executable, "-m", "coordinator"]


class CliService:
    """A running service for the CLI to talk to, and the environment that finds it."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="sr-bcli-"))
        self.project = self.base / "proj"
        copy_sample_project(self.project)
        (self.project / "docs").mkdir()
        path = self.base / "scenario.json"
        path.write_text(json.dumps(scenario()))
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.env["SPECRUN_RUNTIME_DIR"] = str(self.base / "run")
        self.env["PYTHONPYCACHEPREFIX"] = str(self.base / "pycache")
        # The same without a bytecode cache: every specrun module compiled on every call.
        self.env_nocache = {k: v for k, v in self.env.items() if k != "PYTHONPYCACHEPREFIX"}
        self.env_nocache["PYTHONDONTWRITEBYTECODE"] = "1"
        # start_daemon and ServiceClient read the variable from this process's environment.
        self._restore_runtime = use_runtime_dir(Path(self.env["SPECRUN_RUNTIME_DIR"]))
        self.client: ServiceClient | None = None
        try:
            start_daemon(self.project, ["--scenario", str(path), "--approval-mode", "auto-edit"])
            self.client = ServiceClient(self.project, timeout_s=60)
        except BaseException:
            self.close()
            raise

    def prepare(self) -> None:
        """A fresh session whose suggestion's speculation has completed (untimed)."""
        assert self.client is not None
        c = self.client
        c.request(ResetRequest(req_id=c.next_id()))
        _, end = timed_turn(c, AskRequest(req_id=c.next_id(), text="prepare"), timeout_s=60)
        assert end.reason == "completed", end
        ended = ("failed", "boundary", "aborted")
        wait_completed(c, timeout_s=60, ended=ended, detail=lambda: "; see the service log")

    def request_ms(self) -> float:
        """The `status` round trip alone, from this warm process."""
        assert self.client is not None
        t0 = time.perf_counter()
        self.client.request(StatusRequest(req_id=self.client.next_id()))
        return (time.perf_counter() - t0) * 1000

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        try:
            stop_daemon(self.project)
        finally:
            self._restore_runtime()
            shutil.rmtree(self.base, ignore_errors=True)


CPU_MS: dict[str, list[float]] = {}
"""User + system CPU of each timed process, by row: steadier than wall time on a loaded
machine, where the wall clock also counts the time the process waited for a core."""


def _cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _timed(argv: list[str], env: dict[str, str], cwd: Path,
           row: str | None = None) -> tuple[float, str]:
    cpu0, t0 = _cpu_s(), time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    took = (time.perf_counter() - t0) * 1000
    if row is not None:
        CPU_MS.setdefault(row, []).append((_cpu_s() - cpu0) * 1000)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return took, proc.stdout


def _check_accepted(out: str) -> None:
    last = json.loads(out.strip().splitlines()[-1])
    assert last.get("reason") == "accepted", last


def measure(runs: int) -> dict[str, Any]:
    """Medians (ms) over ``runs`` samples of each command and baseline."""
    svc = CliService()
    try:
        specrun = specrun_argv()
        samples: dict[str, list[float]] = {
            k: [] for k in (*COMMANDS, *BASELINES, "request", "status_nocache")
        }

        def run(argv: list[str], row: str) -> Callable[[], float]:
            return lambda: _timed(argv, svc.env, svc.project, row)[0]

        steps = [(name, run([sys.executable, "-c", code], name))
                 for name, code in BASELINES.items()]
        steps += [(cmd, run([*specrun, cmd, "--json"], cmd))
                  for cmd in ("status", "suggestion", "workers")]
        nocache = [*specrun, "status", "--json"]
        steps.append(("status_nocache", lambda: _timed(nocache, svc.env_nocache, svc.project)[0]))

        def reject() -> float:
            svc.prepare()
            return _timed([*specrun, "reject", "--json"], svc.env, svc.project, "reject")[0]

        def accept() -> float:
            svc.prepare()
            took, out = _timed([*specrun, "accept", "--json"], svc.env, svc.project, "accept")
            _check_accepted(out)
            (svc.project / "docs" / "NOTES.md").unlink()
            return took

        steps += [("reject", reject), ("accept", accept), ("request", svc.request_ms)]
        for _name, step in steps:  # one untimed warm-up each: page cache, .pyc files
            step()
        CPU_MS.clear()
        for _ in range(runs):
            for name, step in steps:
                samples[name].append(step())
    finally:
        svc.close()
    return {
        "runs": runs,
        "argv": specrun,
        "median_ms": {k: statistics.median(v) for k, v in samples.items()},
        "min_ms": {k: min(v) for k, v in samples.items()},
        "cpu_median_ms": {k: statistics.median(v) for k, v in CPU_MS.items()},
    }


def main() -> int:
    from _interrupt import stop_like_ctrl_c  # scripts/ is sys.path[0] when run

    stop_like_ctrl_c()  # SIGTERM too stops the service this script started
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15, help="samples per row")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = measure(args.runs)
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    med, low, cpu = r["median_ms"], r["min_ms"], r["cpu_median_ms"]
    bare = med["bare"]
    print(f"wall time per process, median (min) of {r['runs']} runs; ratio to `python -c pass`;"
          " CPU (user + system) median and its ratio")
    print(f"{'what':44} {'median ms':>10} {'min ms':>8} {'ratio':>7} {'cpu ms':>7} {'ratio':>7}")
    rows = [("python -c pass", "bare"), ("python -c 'import msgspec'", "msgspec"),
            ("python -c 'import coordinator.cli.client'", "client")]
    rows += [(f"specrun {c} --json", c) for c in COMMANDS]
    for label, key in rows:
        cpu_cells = (f" {cpu[key]:7.1f} {cpu[key] / cpu['bare']:6.2f}x" if key in cpu else "")
        print(f"{label:44} {med[key]:10.1f} {low[key]:8.1f} {med[key] / bare:6.2f}x{cpu_cells}")
    nocache = med["status_nocache"]
    print(f"{'specrun status --json, no bytecode cache':44} {nocache:10.1f} "
          f"{low['status_nocache']:8.1f} {nocache / bare:6.2f}x")
    print(f"{'status request alone (warm client)':44} {med['request']:10.2f} "
          f"{low['request']:8.2f}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
