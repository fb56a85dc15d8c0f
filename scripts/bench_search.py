"""Search tools on a big tree: grep_search and glob against bare ripgrep in the same run.

The tree is generated under a temp dir (removed afterwards, also on Ctrl-C or SIGTERM): about
34,000 files laid out like a Python installation with its site-packages, a ``.gitignore``
for ``__pycache__/`` (so about a third of the files are ignored), compiled ``.pyc`` and binary
``.so`` files, and a few large data files. The tools run in-process through
``worker.tools.execute`` exactly as a worker runs them (main-chat access, and a speculation's
overlay with files written in it); the baselines are ``rg`` (the same binary) run bare on the
same tree, the way an agent's own search would run it.

    .venv/bin/python scripts/bench_search.py [--files 34000] [--runs 7] [--only glob] [--json]

The tools run on one event loop for the whole run, as a worker's loop lives for the worker's
life (a new loop per call would also start a new thread for each call's ``to_thread``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import random
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

from overlay import Overlay  # noqa: E402
from protocol.wire.chat import ToolCall  # noqa: E402
from worker.tools import DirectAccess, OverlayAccess, ToolContext, execute  # noqa: E402
from worker.tools.rg import (  # noqa: E402
    _find_argv,
    _find_binary,
    _ignored_dir_names,
    _name_regex,
    _rg_argv,
    _scan_symlinks,
    name_glob,
    plain_listing,
    rg_binary,
    rust_pattern,
)
from worker.tools.tree import TreeView, split_glob  # noqa: E402

RARE = "def frobnicate_widget"
NEGATED_GLOB = "glob '**/*.py', a negation in .gitignore (rg path)"
# The same ignore rules plus a negation that re-includes nothing in the tree: the same answer,
# but an ignore file that is not plain, so glob takes rg and the symlink scan beside it
# instead of its one walk (worker/tools/listing_walk.py).
NEGATED_GITIGNORE = "__pycache__/\n*.egg-info/\n!keep.egg-info/\n"
COMMON = "import os"

_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "value",
    "result",
    "config",
    "handler",
    "parser",
    "buffer",
    "stream",
    "token",
    "record",
    "index",
    "cache",
    "layout",
    "widget",
    "session",
    "request",
    "response",
    "module",
    "factory",
    "loader",
]


def _source(rng: random.Random, n_defs: int, rare: bool) -> str:
    lines = ['"""Generated module."""', ""]
    if rng.random() < 0.5:
        lines.append(COMMON)
    lines += [f"import {rng.choice(_WORDS)}_{rng.randint(0, 99)}", ""]
    for i in range(n_defs):
        a, b = rng.choice(_WORDS), rng.choice(_WORDS)
        lines += [
            f"def {a}_{b}_{i}({a}, {b}=None):",
            f'    """Return the {a} of the {b}."""',
            f"    if {b} is None:",
            f"        {b} = {rng.randint(0, 10_000)}",
            f"    return {a} + {b}  # {rng.choice(_WORDS)}",
            "",
        ]
    if rare:
        lines += [f"{RARE}(x):", "    return x", ""]
    return "\n".join(lines) + "\n"


def make_tree(base: Path, n_files: int, seed: int = 15) -> Path:
    """A Python-installation-like tree of about ``n_files`` files under ``base/python``."""
    rng = random.Random(seed)
    root = base / "python"
    lib = root / "lib" / "python3.11"
    site = lib / "site-packages"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".gitignore").write_text("__pycache__/\n*.egg-info/\n")
    made = 2
    pkg = 0
    while made < n_files:
        top = (lib if pkg % 5 == 0 else site) / f"pkg{pkg:04d}"
        pkg += 1
        for sub in range(rng.randint(1, 4)):
            d = top if sub == 0 else top / f"sub{sub}"
            d.mkdir(parents=True, exist_ok=True)
            cache = d / "__pycache__"
            cache.mkdir()
            for m in range(rng.randint(3, 10)):
                name = "__init__" if m == 0 else f"mod{m}"
                text = _source(rng, rng.randint(2, 30), rare=rng.random() < 0.001)
                (d / f"{name}.py").write_text(text)
                (cache / f"{name}.cpython-311.pyc").write_bytes(
                    b"\xa7\r\r\n\0\0\0\0" + text.encode()[:2000]
                )
                made += 2
            if rng.random() < 0.2:
                (d / "_speedups.cpython-311-x86_64-linux-gnu.so").write_bytes(
                    b"\x7fELF\x02\x01\x01\0" + rng.randbytes(rng.randint(2_000, 60_000))
                )
                made += 1
            if rng.random() < 0.15:
                (d / "data.json").write_text(json.dumps({"k": list(range(rng.randint(5, 500)))}))
                made += 1
    for i in range(3):  # large files the search skips (over the 10 MiB cap)
        (lib / f"big{i}.txt").write_text(("import os\n" + "x" * 1000 + "\n") * 11_000)
    return root


# --- measuring ---------------------------------------------------------------------------------


def _timed(fn: Callable[[], object], runs: int) -> list[float]:
    fn()  # warm: page cache, the rg binary, lazily compiled regexes
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


_LOOP = asyncio.Runner()


def _alternated(
    tool: Callable[[], object], baseline: Callable[[], object], runs: int
) -> tuple[list[float], list[float]]:
    """Each run times the tool, then the baseline, so both see the same load."""
    tool()  # warm: page cache, the rg binary, lazily compiled regexes
    baseline()
    tool_s: list[float] = []
    base_s: list[float] = []
    for _ in range(runs):
        for fn, into in ((tool, tool_s), (baseline, base_s)):
            t0 = time.perf_counter()
            fn()
            into.append(time.perf_counter() - t0)
    return tool_s, base_s


def _tool(ctx: ToolContext, name: str, **args: str) -> Callable[[], str]:
    call = ToolCall("c1", name, json.dumps(args))

    def run() -> str:
        result = _LOOP.run(execute(call, ctx))
        assert result.error is None, result.error
        return result.output or ""

    return run


def _rg(root: Path, *argv: str) -> Callable[[], bytes]:
    binary = rg_binary(root)
    assert binary is not None

    def run() -> bytes:
        done = subprocess.run([binary, *argv], cwd=root, capture_output=True, check=False)
        assert done.returncode in (0, 1), done.stderr
        return done.stdout

    return run


def _processes(root: Path, tool: str, pattern: str, max_filesize: int) -> dict[str, float]:
    """Where a search's time goes outside the per-file work: rg run exactly as the tool runs
    it, and what learns what rg skips: for grep the ``find`` the tool runs beside it (symlinks
    and files over the size cap) and both at once as the tool starts them, for glob the
    in-process scan for symlinks; medians in ms."""
    binary, finder = rg_binary(root), _find_binary(root)
    assert binary is not None and finder is not None
    grep = tool == "grep_search"
    rg_argv = _rg_argv(
        binary,
        root,
        ".",
        pattern=rust_pattern(pattern) if grep else None,
        no_ignore=False,
        name=None if grep else name_glob(pattern),
        max_depth=None,
        max_filesize=max_filesize if grep else None,
    )
    find_argv = _find_argv(
        finder,
        ".",
        max_filesize if grep else None,
        name=None if grep else name_glob(pattern),
        pruned=_ignored_dir_names(root),
    )

    def run(*argvs: list[str]) -> Callable[[], None]:
        def go() -> None:
            procs = [
                subprocess.Popen(a, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                for a in argvs
            ]
            for proc in procs:
                proc.communicate()

        return go

    pruned = _ignored_dir_names(root)
    names = None if grep else _name_regex(name_glob(pattern))

    def scan() -> None:
        _scan_symlinks(str(root), ".", None, names, pruned)

    cases = [("rg_as_tool_ms", run(rg_argv))]
    if grep:
        cases += [("find_ms", run(find_argv)), ("both_ms", run(rg_argv, find_argv))]
    else:
        cases += [("symlink_scan_ms", scan)]
    return {name: statistics.median(_timed(fn, 5)) * 1000 for name, fn in cases}


def _one_walk_ms(ctx: ToolContext, pattern: str) -> float:
    """The one walk of a plain listing alone (files, links and times), median in ms."""
    view = TreeView(ctx.access)
    start = view.node(ctx.access.root)
    assert start is not None
    name = name_glob(split_glob(pattern)[1])

    def walk() -> None:
        search = plain_listing(view, start, name=name)
        assert search is not None, "the bench tree's ignore rules are not plain"
        search.close()

    return statistics.median(_timed(walk, 5)) * 1000


@dataclasses.dataclass
class Result:
    name: str
    tool_ms: float
    rg_name: str
    rg_ms: float
    python_ms: float
    output_lines: int
    processes: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.tool_ms / self.rg_ms


def bench(n_files: int, runs: int, python_runs: int, only: str | None = None) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bench-search-"))
    try:
        t0 = time.perf_counter()
        root = make_tree(base, n_files)
        made_s = time.perf_counter() - t0
        total = sum(1 for p in root.rglob("*") if p.is_file())
        direct = ToolContext(access=DirectAccess(root))
        walk = dataclasses.replace(direct, use_ripgrep=False)
        overlay = Overlay(root, base / "overlay" / "1" / "bench")
        spec = ToolContext(access=OverlayAccess(overlay))
        for i, rel in enumerate(
            ["lib/python3.11/pkg0000/mod1.py", "lib/python3.11/new_mod.py", "zz_notes.py"]
        ):
            _tool(spec, "write_file", file_path=rel, content=f"{RARE}(y{i}):\n    pass\n")()
        cases: list[tuple[str, ToolContext, str, dict[str, str], str, tuple[str, ...]]] = [
            (
                f"grep_search {RARE!r} (rare)",
                direct,
                "grep_search",
                {"pattern": RARE},
                "rg -n PATTERN",
                ("-n", "-e", RARE),
            ),
            (
                f"grep_search {COMMON!r} (500-match cap)",
                direct,
                "grep_search",
                {"pattern": COMMON},
                "rg -n PATTERN | head -500",
                ("-n", "-m", "1", "-e", COMMON),
            ),
            (
                f"grep_search {RARE!r} include '*.py'",
                direct,
                "grep_search",
                {"pattern": RARE, "include": "*.py"},
                "rg -n -g '*.py' PATTERN",
                ("-n", "-g", "*.py", "-e", RARE),
            ),
            (
                "glob '**/*.py'",
                direct,
                "glob",
                {"pattern": "**/*.py"},
                "rg --files -g '*.py'",
                ("--files", "-g", "*.py"),
            ),
            (
                NEGATED_GLOB,
                direct,
                "glob",
                {"pattern": "**/*.py"},
                "rg --files -g '*.py'",
                ("--files", "-g", "*.py"),
            ),
            (
                f"grep_search {RARE!r} in a speculation (3 overlay files)",
                spec,
                "grep_search",
                {"pattern": RARE},
                "rg -n PATTERN",
                ("-n", "-e", RARE),
            ),
        ]
        # glob sorts by modification time: rg doing that work too (stat + sort) is the
        # like-for-like baseline; bare listing is the goal's baseline
        sorted_rg = statistics.median(
            _timed(_rg(root, "--files", "--sortr", "modified", "-g", "*.py"), runs)
        )
        results: list[Result] = []
        if only is not None:
            cases = [case for case in cases if case[2] == only]
        gitignore = (root / ".gitignore").read_text()
        for name, ctx, tool, args, rg_name, rg_argv in cases:
            print(f"  {name} ...", file=sys.stderr, flush=True)
            negated = name == NEGATED_GLOB
            (root / ".gitignore").write_text(NEGATED_GITIGNORE if negated else gitignore)
            fast = _tool(ctx, tool, **args)
            slow_ctx = walk if ctx is direct else dataclasses.replace(ctx, use_ripgrep=False)
            slow = _tool(slow_ctx, tool, **args)
            out = fast()
            assert out == slow(), f"rg and the walk disagree on {name}"
            tool_s, rg_s = _alternated(fast, _rg(root, *rg_argv), runs)
            py_s = _timed(slow, python_runs)
            processes = {}
            if ctx is direct and "include" not in args and "cap" not in name:
                pattern = args["pattern"]
                processes = _processes(root, tool, pattern, direct.search_max_file_bytes)
                if tool == "glob" and not negated:
                    processes = {"one_walk_ms": _one_walk_ms(ctx, pattern)}
            results.append(
                Result(
                    name,
                    statistics.median(tool_s) * 1000,
                    rg_name,
                    statistics.median(rg_s) * 1000,
                    statistics.median(py_s) * 1000,
                    len(out.splitlines()),
                    processes,
                )
            )
        overlay.cleanup()
        return {
            "files": total,
            "rg_files_sorted_by_mtime_ms": sorted_rg * 1000,
            "generate_s": made_s,
            "runs": runs,
            "python_runs": python_runs,
            "load_average": Path("/proc/loadavg").read_text().split()[0],
            "results": [{**dataclasses.asdict(r), "ratio": r.ratio} for r in results],
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    from _interrupt import stop_like_ctrl_c  # scripts/ is sys.path[0] when run

    stop_like_ctrl_c()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=34_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--python-runs", type=int, default=3)
    parser.add_argument("--only", choices=("glob", "grep_search"), default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = bench(args.files, args.runs, args.python_runs, args.only)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"tree: {report['files']:,} files (generated in {report['generate_s']:.1f} s); "
        f"load average {report['load_average']}"
    )
    print(f"{'case':58} {'tool ms':>9} {'bare rg ms':>10} {'ratio':>6} {'walk ms':>9}")
    sorted_ms = report["rg_files_sorted_by_mtime_ms"]
    for r in report["results"]:
        print(
            f"{r['name']:58} {r['tool_ms']:9.1f} {r['rg_ms']:10.1f} {r['ratio']:6.2f} "
            f"{r['python_ms']:9.1f}"
        )
    print(f"rg --files --sortr modified -g '*.py' (glob's work: stat + sort): {sorted_ms:.1f} ms")
    for r in report["results"]:
        p = r["processes"]
        if "find_ms" in p:
            print(
                f"{r['name']}: rg as the tool runs it {p['rg_as_tool_ms']:.1f} ms, the find "
                f"beside it {p['find_ms']:.1f} ms, both at once {p['both_ms']:.1f} ms"
            )
        elif "one_walk_ms" in p:
            one_walk = p["one_walk_ms"]
            print(f"{r['name']}: its one walk (files, links, times) alone {one_walk:.1f} ms")
        elif p:
            print(
                f"{r['name']}: rg as the tool runs it {p['rg_as_tool_ms']:.1f} ms, the "
                f"symlink scan beside it (alone) {p['symlink_scan_ms']:.1f} ms"
            )
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
