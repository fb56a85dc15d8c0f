"""What the service holds before it forks its fork server: the image every worker shares."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from coordinator.service.pool.workers import PRELOAD, WORKER_MODULES
from coordinator.service.service import SHARED_WITH_FORK_SERVER

ROOT = Path(__file__).parents[3]


def test_the_worker_modules_are_imported_before_the_fork() -> None:
    assert set(WORKER_MODULES) <= set(SHARED_WITH_FORK_SERVER)
    # what only the fork server runs: its sandbox probe, then its listing and heap trim
    assert PRELOAD[len(WORKER_MODULES) :] == ["worker.contain.preflight", "worker.preloaded"]


def test_the_service_pickles_worker_starts_without_dill() -> None:
    probe = (
        "import importlib, pickle, sys\n"
        "from coordinator.service import service\n"
        "for name in service.SHARED_WITH_FORK_SERVER: importlib.import_module(name)\n"
        "import multiprocess.reduction as r\n"
        "assert sys.modules.get('dill') is None, 'dill was imported'\n"
        "assert r.ForkingPickler.__mro__[1] is pickle.Pickler, r.ForkingPickler.__mro__\n"
        "from worker.process import worker_entry\n"
        "assert pickle.loads(r.ForkingPickler.dumps(worker_entry)) is worker_entry\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "ok", done.stderr
