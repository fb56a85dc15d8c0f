#!/usr/bin/env python3
"""What the applied-set computation costs on a speculation that wrote ~700 cache files.

A git repository whose .gitignore covers ``__pycache__/`` and ``.pytest_cache/``, and an
overlay holding 700 files there plus 5 source files. Medians over --rounds:
  - git check-ignore: the one ``git check-ignore --stdin -z`` that decides "ignored by git";
  - pathspec baseline: the same patterns matched in-process from the top .gitignore only
    (cheaper, but blind to nested .gitignore files, info/exclude, core.excludesFile and
    tracked files: the reason git's own answer is used);
  - preview: ``SpeculationFiles.preview()`` (report checks, git, per-file classification);
  - apply: ``SpeculationFiles.apply()`` (durable=False), against the same apply by
    ``Overlay.apply_to_real`` with no coordinator checks (the same-run baseline).
Usage: scripts/bench_applied_set.py [--files N] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pathspec  # noqa: E402

import overlay  # noqa: E402
from coordinator.service.speculation.applied_set import SpeculationFiles  # noqa: E402
from coordinator.service.speculation.git_ignored import git_ignored  # noqa: E402
from coordinator.settings import Settings  # noqa: E402
from coordinator.user_state import journal_dir  # noqa: E402
from protocol.wire.work import OriginalFile, WrittenFile  # noqa: E402


def make_case(base: Path, files: int) -> tuple[Path, Path, dict[str, WrittenFile]]:
    root = base / "project"
    (root / "src").mkdir(parents=True)
    for i in range(5):
        (root / f"src/m{i}.py").write_text(f"x = {i}\n")
    (root / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    ovdir = base / "overlay" / str(os.getpid()) / "s1"
    ov = overlay.Overlay(root, ovdir)
    for i in range(5):
        ov.redirect_write(f"src/m{i}.py").write_text(f"x = {i + 1}\n")
    for i in range(files):
        where = "__pycache__" if i % 2 else ".pytest_cache/v/cache"
        ov.redirect_write(f"{where}/f{i}.pyc").write_bytes(b"\0" * 512)
    fps = ov.fingerprints()
    written = {
        rel: WrittenFile(
            str(path),
            OriginalFile(fp.size, fp.mtime_ns, fp.sha256) if (fp := fps[rel]) else None,
        )
        for rel, path in ov.written_files().items()
    }
    return root, ovdir, written


def median_ms(
    run: Callable[[], object], rounds: int, setup: Callable[[], object] | None = None
) -> float:
    times = []
    for _ in range(rounds):
        if setup is not None:
            setup()
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=700)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-applied-set-"))
    try:
        root, ovdir, written = make_case(base, args.files)
        settings = Settings()
        paths = list(written)
        spec = pathspec.GitIgnoreSpec.from_lines((root / ".gitignore").read_text().splitlines())
        git_ms = median_ms(lambda: git_ignored(root, paths), args.rounds)
        spec_ms = median_ms(lambda: [p for p in paths if spec.match_file(p)], args.rounds)
        files = SpeculationFiles(root, str(ovdir), written, settings)
        preview_ms = median_ms(files.preview, args.rounds)
        pristine = base / "pristine"
        shutil.copytree(root, pristine, symlinks=True)

        def reset() -> None:
            shutil.rmtree(root)
            shutil.copytree(pristine, root, symlinks=True)

        record = {r: {"overlay_path": w.overlay_path, **_fp(w)} for r, w in written.items()}
        checked: list[float] = []
        plain: list[float] = []
        for _ in range(args.rounds):  # interleaved: the machine's load hits both alike
            for times, run in (
                (checked, lambda: SpeculationFiles(root, str(ovdir), written, settings).apply(
                    durable=False)),
                (plain, lambda: overlay.Overlay.from_record(root, ovdir, record).apply_to_real(
                    durable=False, journal_dir=str(journal_dir(Path(root))))),
            ):
                reset()
                start = time.perf_counter()
                run()
                times.append((time.perf_counter() - start) * 1000)
        checked_ms, plain_ms = statistics.median(checked), statistics.median(plain)
        print(
            f"applied set, {len(paths)} files ({args.files} ignored by git), "
            f"median of {args.rounds}"
        )
        print(f"{'step':<44}{'ms':>10}{'ratio':>9}")
        print(f"{'git check-ignore --stdin -z':<44}{git_ms:>10.2f}{git_ms / spec_ms:>8.1f}x")
        print(f"{'pathspec on the top .gitignore (baseline)':<44}{spec_ms:>10.2f}{1:>8.1f}x")
        print(f"{'preview (checks + git + classify)':<44}{preview_ms:>10.2f}{'':>9}")
        ratio = checked_ms / plain_ms
        print(f"{'apply with coordinator checks':<44}{checked_ms:>10.2f}{ratio:>8.2f}x")
        print(f"{'apply, overlay only (baseline)':<44}{plain_ms:>10.2f}{1:>8.2f}x")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _fp(w: WrittenFile) -> dict[str, object]:
    fp = w.original
    return {
        "size": fp.size if fp else None,
        "mtime_ns": fp.mtime_ns if fp else None,
        "sha256": fp.sha256 if fp else None,
    }


if __name__ == "__main__":
    main()
