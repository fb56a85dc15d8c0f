#!/usr/bin/env python3
"""What the main chat's kernel backstop costs per command (worker/contain/backstop.py).

Usage: .venv/bin/python scripts/bench_shell_backstop.py [--rounds N] [--json]

For a few commands, in a small git project and in one with 20,000 files (the backstop's
walk stops at 4,000 entries), runs each command plainly (``run_shell``, the runner before
the backstop) and behind the backstop (``guarded_runner``: the per-command plan, a user and
mount namespace with the read-only binds, the check after), alternating the two in the same
run so the machine's load hits both alike; prints medians, the added milliseconds, the
ratio, and the plan alone (walking the tree, and reusing the last walk of a tree whose
directories did not change). Prints the load average: timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from protocol.wire.work import WriteGuard
from worker.contain.backstop import guarded_paths, guarded_runner, unavailable
from worker.shell.runner import run_shell

COMMANDS = {
    "true": "true",
    "echo > file": "echo x > out.txt",
    "git status": "git status --short",
    "git add+commit": "echo $RANDOM >> log.txt && git add log.txt && git commit -qm r",
    "make": "make -s",
}


def _project(base: Path, files: int) -> Path:
    root = base / f"project-{files}"
    root.mkdir()
    for n in range(files):
        directory = root / "src" / f"d{n // 200}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"f{n}.py").write_text(f"X = {n}\n")
    (root / "Makefile").write_text("all:\n\tmkdir -p out && echo built > out/app.txt\n")
    (root / ".envrc").write_text("export A=1\n")
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    for args in (["init", "-q"], ["config", "user.name", "b"], ["config", "user.email", "b@b"],
                 ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return Path(os.path.realpath(root))


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    why = unavailable()
    if why is not None:
        print(f"the backstop cannot run here: {why}")
        return 1
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-backstop-") as tmp:
        for files in (20, 20_000):
            root = _project(Path(tmp), files)
            guard = WriteGuard(str(root))
            guarded = guarded_runner(guard)
            walked: list[float] = []
            for _ in range(args.rounds):
                os.utime(root)  # a changed root directory: the plan walks again
                walked.append(_ms(lambda g=guard: guarded_paths(g)))
            rows.append({"project": f"{files} files", "command": "(plan, walked)",
                         "plain_ms": 0.0, "guarded_ms": statistics.median(walked)})
            reused = [_ms(lambda g=guard: guarded_paths(g)) for _ in range(args.rounds)]
            rows.append({"project": f"{files} files", "command": "(plan, unchanged)",
                         "plain_ms": 0.0, "guarded_ms": statistics.median(reused)})
            for name, command in COMMANDS.items():
                plain: list[float] = []
                behind: list[float] = []
                for _ in range(args.rounds):  # alternated: load hits both alike
                    plain.append(_ms(lambda c=command, r=root: run_shell(c, r, 60, 65536)))
                    behind.append(_ms(lambda c=command, r=root, g=guarded: g(c, r, 60, 65536)))
                rows.append({"project": f"{files} files", "command": name,
                             "plain_ms": statistics.median(plain),
                             "guarded_ms": statistics.median(behind)})
    load = Path("/proc/loadavg").read_text().split()[:3]
    if args.json:
        print(json.dumps({"rounds": args.rounds, "load": load, "rows": rows}, indent=2))
        return 0
    print(f"median of {args.rounds} alternated runs each; load average {' '.join(load)}")
    print(f"{'project':<13} {'command':<18} {'plain ms':>9} {'backstop ms':>12} "
          f"{'added ms':>9} {'ratio':>6}")
    for row in rows:
        plain_ms, guarded_ms = row["plain_ms"], row["guarded_ms"]
        added = guarded_ms - plain_ms
        ratio = f"{guarded_ms / plain_ms:.2f}x" if plain_ms else ""
        print(f"{row['project']:<13} {row['command']:<18} {plain_ms:>9.2f} {guarded_ms:>12.2f} "
              f"{added:>9.2f} {ratio:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
