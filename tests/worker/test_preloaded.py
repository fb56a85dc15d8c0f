"""worker.preloaded: the fork server lists the pool's project once, for every worker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from protocol.wire.work import PROJECT_ROOT_ENV

ROOT = Path(__file__).resolve().parents[2]

# As the fork server does (the preload), then as a worker's first git hazard check would:
# how many directories that check still had to list.
PROBE = """
import sys
from worker.shell import git_tree_scan
git_tree_scan.RACY_NS = 20_000_000  # the test's tree is a moment old, not two seconds
import worker.preloaded
print(git_tree_scan.git_entries(sys.argv[1]).listed)
"""


def _probe(project: Path, env_root: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if k != PROJECT_ROOT_ENV}
    if env_root is not None:
        env[PROJECT_ROOT_ENV] = env_root
    done = subprocess.run(
        [sys.executable, "-P", "-c", PROBE, str(project)],
        cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        check=True, timeout=60,
    )  # fmt: skip
    return int(done.stdout.strip())


def test_the_project_is_listed_before_the_first_worker_forks(tmp_path: Path) -> None:
    project = tmp_path / "p"
    for d in range(20):
        (project / f"a{d}" / "b").mkdir(parents=True)
    newest = max(os.lstat(d).st_ctime_ns for d, _dirs, _files in os.walk(project))
    probe = tmp_path / "clock-probe"
    while True:  # wait until the file system's clock is past the 20 ms margin
        probe.write_text("")
        if os.lstat(probe).st_ctime_ns - newest > 20_000_000:
            break
        time.sleep(0.002)
    assert _probe(project, str(project)) == 0  # everything came from the preload's listing
    assert _probe(project, None) == 41  # without the variable: the root and its 40 dirs

