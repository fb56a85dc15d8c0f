#!/usr/bin/env python3
"""What each sandbox layer costs a git-heavy test suite.

The suite (``scripts/_shell_projects.git_project``: every test makes a repository in a
temporary directory, commits, tags, clones through ``file://``, asks ``describe``,
``status`` and ``log``) runs, in alternating rounds:

* directly, with ``TMPDIR`` on the disk (``/tmp`` here) and on a tmpfs (``/dev/shm``): a
  speculation's ``/tmp`` is a tmpfs, so the second is the fair baseline for its file
  system;
* through a real sandbox helper as a captured command with every layer, with none, with
  each layer alone and with every layer but one (overlay view and private /tmp,
  seccomp, Landlock, limits: the cgroup and rlimits, the PID namespace, with limits its
  process cap, network namespace, privileges dropped). Without the file system layer a
  command's ``TMPDIR`` is a directory on the disk, so "alone" compares with "no layer"
  and the disk baseline, "all but" with "every layer" and the tmpfs baseline. The layers
  are switched the way the containment tests switch them
  (``worker.contain.spawn.Layers``); nothing a user can set reaches that;
* the hazard check (``git_config_hazard``, which read-only git commands of a speculation
  pass before they run), timed alone per call.

Prints medians, the ratio to the tmpfs baseline and the load average.

Usage: scripts/bench_git_layers.py [--rounds N] [--tests N] [--json]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _shell_projects import git_project  # noqa: E402

from worker.contain.helper import Request, SandboxHelper  # noqa: E402
from worker.contain.spawn import ALL_LAYERS, Layers  # noqa: E402
from worker.shell.git_config import git_config_hazard  # noqa: E402

IDENTITY = {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
            for what, value in (("NAME", "bench"), ("EMAIL", "bench@example.com"))}
# the system's programs only, the same in every variant (a layer alone has no toolchain view)
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
LAYERS = ("filesystem", "seccomp", "landlock", "limits", "pid", "network", "privileges")


def direct(root: Path, command: str, tmpdir: str) -> float:
    env = {**os.environ, "TMPDIR": tmpdir, "PYTHONDONTWRITEBYTECODE": "1", "PATH": SYSTEM_PATH}
    start = time.perf_counter()
    done = subprocess.run(["bash", "-c", command], cwd=root, env=env, capture_output=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the suite failed directly: {done.stderr.decode()[-800:]}")
    return elapsed


def sandboxed(helper: SandboxHelper, root: Path, command: str, layers: Layers, n: int) -> float:
    capture = root.parent / f"capture-{n}"
    env = {"PATH": SYSTEM_PATH, "PYTHONDONTWRITEBYTECODE": "1",
           "GIT_ALLOW_PROTOCOL": "file", **IDENTITY}
    request = Request(
        command=command, cwd=str(root), project=str(root), timeout_s=900, output_cap=20000,
        mode="captured", capture_dir=str(capture), layers=layers, env=env,
        session=f"bench-{n}",
    )
    start = time.perf_counter()
    with helper.run_captured(request) as captured:
        elapsed = time.perf_counter() - start
        result = captured.result
    shutil.rmtree(capture, ignore_errors=True)
    if result.exit_code != 0:
        raise SystemExit(f"the suite failed with {layers}: {result.stderr[-800:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tests", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="only the variants whose name holds TEXT (with both baselines)")
    args = parser.parse_args()
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    variants: dict[str, Layers | str] = {
        "direct, TMPDIR on disk": "/tmp",
        "direct, TMPDIR on tmpfs": "shm",
        "sandbox, every layer": ALL_LAYERS,
        "sandbox, no layer": ALL_LAYERS.only(),
    }
    for name in LAYERS:
        variants[f"sandbox, {name} alone"] = ALL_LAYERS.only(name)
    # the process cap: a pid_max in the PID namespace, or the cgroup's pids.max
    variants["sandbox, limits and pid"] = ALL_LAYERS.only("limits", "pid")
    for name in LAYERS:  # each layer's own cost where everything else stays
        variants[f"sandbox, all but {name}"] = Layers(
            **{other: other != name for other in ALL_LAYERS.__dataclass_fields__}
        )
    if args.only:
        variants = {
            name: v for name, v in variants.items()
            if name.startswith("direct") or any(text in name for text in args.only)
        }
    times: dict[str, list[float]] = {name: [] for name in variants}
    hazard: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-git-layers-") as tmp:
        project = git_project(Path(tmp), tests=args.tests)
        shm = Path(tempfile.mkdtemp(prefix="bench-git-", dir="/dev/shm"))
        helper = SandboxHelper.start()
        counter = 0
        try:
            for _ in range(args.rounds):
                for name, variant in variants.items():
                    counter += 1
                    if isinstance(variant, str):
                        where = str(shm) if variant == "shm" else variant
                        times[name].append(direct(project.root, project.test, where))
                    else:
                        times[name].append(
                            sandboxed(helper, project.root, project.test, variant, counter)
                        )
                for _ in range(20):
                    start = time.perf_counter()
                    git_config_hazard(str(project.root))
                    hazard.append(time.perf_counter() - start)
        finally:
            helper.close()
            shutil.rmtree(shm, ignore_errors=True)
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians["direct, TMPDIR on tmpfs"]
    disk = medians["direct, TMPDIR on disk"]
    rows = [
        {"variant": name, "median_s": m, "ratio": m / base, "vs_disk": m / disk,
         "runs": times[name]}
        for name, m in medians.items()
    ]
    hazard_ms = statistics.median(hazard) * 1000
    if args.json:
        print(json.dumps({"load": [load_before, load_after], "rows": rows,
                          "hazard_check_ms": hazard_ms}, indent=2))
        return
    print(f"git suite of {args.tests} tests; load average before {' '.join(load_before)},"
          f" after {' '.join(load_after)}; medians of {args.rounds} alternating rounds")
    print(f"{'variant':<34} {'median':>9} {'vs tmpfs direct':>16} {'vs disk direct':>15}")
    for row in rows:
        print(f"{row['variant']:<34} {row['median_s']:8.2f}s {row['ratio']:15.2f}x"
              f" {row['vs_disk']:14.2f}x")
    print(f"hazard check (git_config_hazard), per call: {hazard_ms:.2f} ms")


if __name__ == "__main__":
    main()
