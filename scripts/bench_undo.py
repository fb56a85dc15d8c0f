#!/usr/bin/env python3
"""What undo checkpoints cost an accept, and what an undo takes.

For N files of 4 KiB each (N = 1, 10, 100), in one process on real files:
  - baseline: the accept's apply alone (``overlay.apply_items``, durable, as Tab runs it);
  - with checkpoint: the same apply with the undo checkpoint around it, as the accept takes
    it (each file's earlier content kept, one record written before the apply, closed
    after);
  - undo: taking that checkpoint back (plan, journaled apply, checkpoint dropped).
Baseline and checkpointed rounds alternate in the same run; medians are printed with the
load average, since this machine is shared.

Usage: scripts/bench_undo.py [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coordinator.service.undo.file_undo import apply_plan, finish_undo, plan_undo  # noqa: E402
from coordinator.service.undo.store import CheckpointStore  # noqa: E402
from overlay.apply import ApplyItem, apply_items  # noqa: E402
from overlay.fingerprint import copy_with_fingerprint  # noqa: E402

SIZE = 4096


def _project(base: Path, n: int) -> tuple[Path, list[ApplyItem]]:
    """A project of ``n`` files and a staged change of each (half modified, half new)."""
    root, staged = base / "project", base / "staged"
    root.mkdir()
    staged.mkdir()
    items = []
    for i in range(n):
        rel = f"src/f{i}.py"
        (staged / f"f{i}").write_bytes(os.urandom(SIZE))
        if i % 2 == 0:
            (root / "src").mkdir(exist_ok=True)
            (root / rel).write_bytes(os.urandom(SIZE))
            copy = base / f"copy{i}"
            fingerprint = copy_with_fingerprint(str(root / rel), str(copy))
        else:
            fingerprint = None
        items.append(ApplyItem(rel, str(staged / f"f{i}"), fingerprint))
    return root, items


def one_round(n: int, checkpoint: bool) -> tuple[float, float]:
    """(accept ms, undo ms or 0)."""
    base = Path(tempfile.mkdtemp(prefix="bench-undo-"))
    try:
        root, items = _project(base, n)
        store = CheckpointStore(_mkdir(base / "undo"), 256 * 1024 * 1024)
        journals = str(_mkdir(base / "journal"))
        t0 = time.perf_counter()
        if checkpoint:
            cp = store.begin("accept", "s", 1, "p")
            for item in items:
                store.take(cp, str(root / item.rel), item.rel, save=False)
            store.save(cp)
        apply_items(str(root), items, journal_dir=journals)
        if checkpoint:
            store.close(cp, root)
        accept_ms = (time.perf_counter() - t0) * 1000
        undo_ms = 0.0
        if checkpoint:
            t0 = time.perf_counter()
            plan = plan_undo(store, root, store.all())
            apply_plan(store, root, plan)
            finish_undo(store)
            undo_ms = (time.perf_counter() - t0) * 1000
            assert store.all() == []
        return accept_ms, undo_ms
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _mkdir(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


def measure(rounds: int) -> list[dict[str, Any]]:
    rows = []
    for n in (1, 10, 100):
        base, with_cp, undo = [], [], []
        for _ in range(rounds):  # alternated: the machine's load hits both alike
            base.append(one_round(n, False)[0])
            took, undone = one_round(n, True)
            with_cp.append(took)
            undo.append(undone)
        rows.append({
            "files": n,
            "apply_ms": statistics.median(base),
            "apply_with_checkpoint_ms": statistics.median(with_cp),
            "undo_ms": statistics.median(undo),
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = measure(args.rounds)
    load = Path("/proc/loadavg").read_text().split()[:3]
    if args.json:
        print(json.dumps({"rows": rows, "loadavg": load}))
        return 0
    print(f"undo checkpoints, {SIZE // 1024} KiB files, medians of {args.rounds} "
          f"alternated rounds (load {' '.join(load)})")
    print(f"{'files':>5}  {'apply (Tab)':>12}  {'+ checkpoint':>12}  {'ratio':>6}  {'undo':>9}")
    for r in rows:
        ratio = r["apply_with_checkpoint_ms"] / r["apply_ms"]
        print(f"{r['files']:>5}  {r['apply_ms']:>9.2f} ms  {r['apply_with_checkpoint_ms']:>9.2f} ms"
              f"  {ratio:>5.2f}x  {r['undo_ms']:>6.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
