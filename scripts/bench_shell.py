#!/usr/bin/env python3
"""Classification time of the read-only shell check, against bashlex's raw parse time.

Usage: .venv/bin/python scripts/bench_shell.py [--repeat N]

For ~50 realistic agent commands (read-only and not), times ``classify`` and a bare
``bashlex.parse`` of the same text in the same run, and prints per-call median and p99 for both
and their ratio. bashlex failures are timed too (they are part of the classifier's work).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bashlex

from worker.shell import classify
from worker.shell.lexer import scan

COMMANDS = [
    "ls -la",
    "git status",
    "git diff --stat",
    "git log --oneline -10",
    "git diff HEAD~1 -- src/app.py",
    "git show HEAD:README.md | head -50",
    "git branch -a",
    "git remote -v",
    "git blame -L 10,40 src/app.py",
    "cat README.md",
    "cat package.json | jq '.scripts'",
    "head -n 40 src/main.py",
    "tail -n 100 logs/app.log",
    "wc -l src/*.py",
    "grep -rn 'def main' src/",
    "rg -n --type py 'TODO|FIXME'",
    'find . -name "*.ts" | grep -v node_modules | sort | head -20',
    "find src -type f -name '*.py' -newer setup.cfg",
    "sed -n '1,80p' src/app.py",
    "awk -F: '{print $1}' /etc/passwd | sort | uniq -c | sort -rn | head",
    "ls src && cat src/__init__.py",
    "cd frontend && ls -la",
    "tree -L 2 -I node_modules",
    "du -sh * | sort -h",
    "echo $HOME && pwd",
    "cat <<EOF\nhello $USER\nEOF",
    "diff -u a.txt b.txt",
    "stat -c '%s %n' *.log",
    "grep -c import src/*.py | sort -t: -k2 -n",
    "which python3 && python3 --version",
    "rm -rf build/",
    "npm install",
    "pytest -q tests/test_io.py",
    "python -m pytest -x",
    "git commit -am 'fix: handle empty input'",
    "git push origin main",
    "git checkout -b feature/x",
    "echo 'done' > status.txt",
    "cat a.txt >> b.txt",
    "sed -i 's/foo/bar/g' src/app.py",
    "find . -name '*.pyc' -delete",
    "find . -name '*.tmp' -exec rm {} \\;",
    "curl -s https://example.com | head",
    "echo $(date) > stamp",
    "make -j4",
    "mkdir -p out && cp src/*.py out/",
    "FOO=bar ls",
    "if [ -f x ]; then cat x; fi",
    "for f in *.py; do wc -l $f; done",
    "awk '{print > \"out.txt\"}' in.txt",
    "sort -o sorted.txt input.txt",
    "env | grep PATH",
]


def _time(fn, text: str, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(text)
        samples.append(time.perf_counter() - start)
    return samples


def _bashlex(text: str) -> object:
    try:
        return bashlex.parse(text)
    except Exception as exc:  # failures are part of the work
        return exc


def profile_cost(repeat: int) -> dict[str, list[float]]:
    """Wall time of one command (``bash -c true``) four ways, in seconds per run: bare
    (a plain subprocess, no containment), ``view`` (the sandbox helper with only the file
    system view and Landlock: what a read-only command got before the full profile),
    ``profile`` (every layer) and ``captured`` (every layer, in the writable view of
    ``speculateShell`` whose writes land on a file system of their own, mounted for the
    command). The classifier is not involved."""
    import os
    import tempfile

    from protocol.wire.seams import WorkerSeams
    from tests.seams import helper_entry
    from worker.contain.helper import Request, SandboxHelper
    from worker.contain.spawn import ALL_LAYERS
    from worker.shell.runner import run_shell

    project = tempfile.mkdtemp(prefix="bench-profile-")
    scratch = tempfile.mkdtemp(prefix="bench-capture-")
    # the helper's classifier re-check is not measured: a helper built without it
    helper = SandboxHelper.start(helper_entry(WorkerSeams(bypass_classifier=True)))
    samples: dict[str, list[float]] = {"bare": [], "view": [], "profile": [], "captured": []}
    try:
        variants = {"view": ALL_LAYERS.only("filesystem", "landlock"), "profile": ALL_LAYERS}
        for _ in range(repeat):
            start = time.perf_counter()
            run_shell("true", project, 10, 1024)
            samples["bare"].append(time.perf_counter() - start)
            for name, layers in variants.items():
                request = Request("true", project, project, 10, 1024, layers=layers)
                start = time.perf_counter()
                helper.run(request)
                samples[name].append(time.perf_counter() - start)
            capture = os.path.join(scratch, "capture")
            request = Request("true", project, project, 10, 1024, mode="captured",
                              capture_dir=capture)  # fmt: skip
            start = time.perf_counter()
            helper.run_captured(request).close()
            samples["captured"].append(time.perf_counter() - start)
            os.rmdir(capture)
    finally:
        helper.close()
        os.rmdir(project)
        os.rmdir(scratch)
    return samples


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> int:
    from _interrupt import stop_like_ctrl_c  # scripts/ is sys.path[0] when run

    stop_like_ctrl_c()  # SIGTERM too stops what this script started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200, help="calls per command (default 200)")
    parser.add_argument("--each", action="store_true", help="also print every command's medians")
    parser.add_argument(
        "--no-profile", action="store_true", help="only the classification, not `bash -c true`"
    )
    args = parser.parse_args()

    for text in COMMANDS:  # warm up imports and caches
        classify(text)
        _bashlex(text)

    ours: list[float] = []
    base: list[float] = []
    lexed: list[float] = []
    read_only = 0
    for text in COMMANDS:
        verdict = classify(text)
        read_only += verdict.read_only
        mine = _time(classify, text, args.repeat)
        theirs = _time(_bashlex, text, args.repeat)
        lexed += _time(scan, text, args.repeat)
        ours += mine
        base += theirs
        if args.each:
            print(
                f"{statistics.median(mine) * 1e6:7.0f}µs {statistics.median(theirs) * 1e6:7.0f}µs"
                f"  {'RO ' if verdict.read_only else 'NOT'}  {text[:60]!r}"
            )
    if args.each:
        print()

    rows = [
        ("classify", statistics.median(ours), _p99(ours)),
        ("bashlex.parse", statistics.median(base), _p99(base)),
    ]
    lexer = ("lexer scan", statistics.median(lexed), _p99(lexed))
    print(f"{len(COMMANDS)} commands ({read_only} read-only), {args.repeat} calls each\n")
    print(f"{'':<14} {'median':>10} {'p99':>10}")
    for name, median, p99 in rows:
        print(f"{name:<14} {median * 1e6:>8.0f}µs {p99 * 1e6:>8.0f}µs")
    print(
        f"{'ratio':<14} {rows[0][1] / rows[1][1]:>9.2f}x {rows[0][2] / rows[1][2]:>9.2f}x"
    )
    print(f"{lexer[0]:<14} {lexer[1] * 1e6:>8.1f}µs {lexer[2] * 1e6:>8.1f}µs  (part of classify)")
    if args.no_profile:
        return 0
    costs = profile_cost(max(20, args.repeat // 4))
    print("\nrunning `bash -c true`:")
    for name, values in costs.items():
        print(f"{name:<14} {statistics.median(values) * 1e3:>8.2f}ms {_p99(values) * 1e3:>8.2f}ms")
    added = statistics.median(costs["profile"]) - statistics.median(costs["bare"])
    over_view = statistics.median(costs["profile"]) - statistics.median(costs["view"])
    print(f"profile adds {added * 1e3:.2f} ms to a bare run, {over_view * 1e3:.2f} ms to the view")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
