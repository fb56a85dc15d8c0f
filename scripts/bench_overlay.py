#!/usr/bin/env python3
"""Benchmark the overlay: copy-up, safe apply, cleanup and sweep against naive copies.

Usage: .venv/bin/python scripts/bench_overlay.py [--repeats N] [--counts 10,100,1000]

For each file count, files of 10 KB (20 per directory) are copied up into an overlay, changed,
and applied back; the naive baseline is a plain ``shutil.copy2`` of each file with no checks,
no journal and no fsync. Times are medians over the repeats; safe and naive runs alternate so
that background disk activity hits both alike.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from overlay import Overlay, sweep

FILE_SIZE = 10 * 1024
PER_DIR = 20


def _rels(count: int) -> list[str]:
    return [f"src/pkg{i // PER_DIR:03d}/mod{i:04d}.py" for i in range(count)]


def _make_project(base: Path, rels: list[str]) -> Path:
    root = base / "project"
    for rel in rels:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(FILE_SIZE))
    return root


def _timed(func: Callable[[], object]) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def bench_count(count: int, repeats: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {
        k: [] for k in ("copyup", "naive_copyup", "apply", "apply_nosync", "naive_apply", "cleanup")
    }
    rels = _rels(count)
    new_content = os.urandom(FILE_SIZE)
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="bench-overlay-") as tmp:
            base = Path(tmp)
            root = _make_project(base, rels)
            journals = str(base / "journal")  # outside the project, as the service's is
            os.mkdir(journals, 0o700)

            # Copy-up: Overlay.redirect_write vs copy2 into a fresh directory tree.
            ov = Overlay(root, base / "spec" / "1" / "s")
            samples["copyup"].append(_timed(lambda ov=ov: [ov.redirect_write(r) for r in rels]))
            naive_dir = base / "naive"

            def naive_copyup(root: Path = root, naive_dir: Path = naive_dir) -> None:
                for rel in rels:
                    dst = naive_dir / rel
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(root / rel, dst)

            samples["naive_copyup"].append(_timed(naive_copyup))
            for path in ov.written_files().values():
                path.write_bytes(new_content)

            # Apply: the safe apply vs copy2 of each overlay file over its target.
            samples["apply"].append(
                _timed(lambda ov=ov, j=journals: ov.apply_to_real(journal_dir=j)))

            def naive_apply(root: Path = root, ov: Overlay = ov) -> None:
                for rel, src in ov.written_files().items():
                    shutil.copy2(src, root / rel)

            samples["naive_apply"].append(_timed(naive_apply))

            # The same apply without fsync (crash-safe against process kills only).
            ov2 = Overlay(root, base / "spec" / "2" / "s")
            for rel in rels:
                ov2.redirect_write(rel).write_bytes(os.urandom(FILE_SIZE))
            samples["apply_nosync"].append(_timed(lambda ov2=ov2, j=journals: ov2.apply_to_real(
                durable=False, journal_dir=j)))

            samples["cleanup"].append(_timed(ov.cleanup))
            ov2.cleanup()
    return {k: statistics.median(v) for k, v in samples.items()}


def bench_sweep(files: int, repeats: int) -> float:
    """sweep() over 10 dead per-pid dirs holding ``files`` files in total (plus a live one)."""
    pid_max = 4194304
    with contextlib.suppress(OSError, ValueError):
        pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
            base = Path(tmp)
            live = base / str(os.getpid()) / "s"
            live.mkdir(parents=True)
            for d in range(10):
                spec = base / str(pid_max + 1 + d) / "spec"  # above pid_max: never alive
                spec.mkdir(parents=True)
                for i in range(files // 10):
                    (spec / f"f{i}.py").write_bytes(b"x" * FILE_SIZE)
            start = time.perf_counter()
            removed = sweep(base)
            times.append(time.perf_counter() - start)
            assert len(removed) == 10 and live.exists()
    return statistics.median(times)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f}"


def main() -> int:
    from _interrupt import stop_like_ctrl_c  # scripts/ is sys.path[0] when run

    stop_like_ctrl_c()  # SIGTERM too stops what this script started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--counts", default="10,100,1000")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]

    print(f"overlay benchmark: files of {FILE_SIZE // 1024} KB, median of {args.repeats} runs, ms")
    header = (
        f"{'files':>6} | {'copy-up':>8} {'naive':>8} {'ratio':>6} | "
        f"{'apply':>8} {'naive':>8} {'ratio':>6} | {'no-fsync':>8} {'ratio':>6} | "
        f"{'cleanup':>8} {'sweep':>8}"
    )
    print(header)
    print("-" * len(header))
    for count in counts:
        repeats = max(3, args.repeats // 2) if count >= 1000 else args.repeats
        r = bench_count(count, repeats)
        sweep_s = bench_sweep(count, repeats)
        print(
            f"{count:>6} | {_ms(r['copyup'])} {_ms(r['naive_copyup'])} "
            f"{r['copyup'] / r['naive_copyup']:6.2f} | "
            f"{_ms(r['apply'])} {_ms(r['naive_apply'])} {r['apply'] / r['naive_apply']:6.2f} | "
            f"{_ms(r['apply_nosync'])} {r['apply_nosync'] / r['naive_apply']:6.2f} | "
            f"{_ms(r['cleanup'])} {_ms(sweep_s)}"
        )
    print(
        "copy-up: redirect_write (copy + sha256 fingerprint); apply: apply_to_real() with its "
        "default durability\n(conflict check, journal, staging, renames, syncfs barriers); "
        "no-fsync: apply_to_real(durable=False);\nnaive: shutil.copy2 per file; sweep: 10 dead "
        "per-pid dirs holding that many files in total."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
