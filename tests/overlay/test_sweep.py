"""sweep(): remove the per-pid overlay directories of dead processes, nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from overlay import Overlay, mark_owner, pid_alive, release_pid_dir, sweep


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=30)
    return proc.pid


def _speculation_dir(base: Path, name: str) -> Path:
    spec = base / name / "spec-1"
    (spec / "src").mkdir(parents=True)
    (spec / "src" / "app.py").write_text("speculated\n")
    return base / name


def test_missing_base_dir(tmp_path: Path) -> None:
    assert sweep(tmp_path / "nope") == []


def test_dead_pids_go_live_pids_stay(tmp_path: Path) -> None:
    dead = _dead_pid()
    own = _speculation_dir(tmp_path, str(os.getpid()))
    gone = _speculation_dir(tmp_path, str(dead))
    init = _speculation_dir(tmp_path, "1")  # alive, though not ours to judge
    assert sweep(tmp_path) == [gone]
    assert not gone.exists()
    assert own.exists() and init.exists()
    assert sweep(tmp_path) == []


def test_other_names_are_ignored(tmp_path: Path) -> None:
    dead = _dead_pid()
    kept = [
        _speculation_dir(tmp_path, name)
        for name in ["abc", f"{dead}x", f"-{dead}", "\u0661\u0662\u0663", ".hidden"]
    ]
    plain_file = tmp_path / str(dead + 1_000_000_000)
    plain_file.write_text("not a directory")
    assert sweep(tmp_path) == []
    assert all(path.exists() for path in kept)
    assert plain_file.exists()


def test_symlink_with_a_dead_pid_name_is_unlinked_not_followed(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("keep")
    base = tmp_path / "base"
    base.mkdir()
    link = base / str(_dead_pid())
    link.symlink_to(precious, target_is_directory=True)
    assert sweep(base) == [link]
    assert not os.path.lexists(link)
    assert (precious / "keep.txt").read_text() == "keep"


def test_zombie_counts_as_dead(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)
        assert psutil.pid_exists(proc.pid)
        assert not pid_alive(proc.pid)
        zombie = _speculation_dir(tmp_path, str(proc.pid))
        assert sweep(tmp_path) == [zombie]
    finally:
        proc.wait(timeout=30)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory away")
def test_directories_of_other_users_are_left_alone(tmp_path: Path) -> None:
    other = _speculation_dir(tmp_path, str(_dead_pid()))
    os.chown(other, 54321, 54321)
    assert sweep(tmp_path) == []
    assert other.exists()


def test_pid_alive() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(0)
    assert not pid_alive(-1)
    assert not pid_alive(_dead_pid())


def test_sweep_after_a_worker_was_killed(tmp_path: Path) -> None:
    """End to end: a real process writes into its overlay and dies; sweep removes it."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("a")
    base = tmp_path / "speculation"
    code = (
        "import os, sys\n"
        "from overlay import Overlay, overlay_dir_for\n"
        "ov = Overlay(sys.argv[1], overlay_dir_for(os.getpid(), 'spec', sys.argv[2]))\n"
        "ov.redirect_write('a.txt').write_text('speculated')\n"
        "print(os.getpid(), flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(project), str(base)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        assert (base / str(pid) / "spec" / "a.txt").read_text() == "speculated"
        assert sweep(base) == []  # still alive
        proc.kill()
        proc.wait(timeout=30)
        assert sweep(base) == [base / str(pid)]
        assert (project / "a.txt").read_text() == "a"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def test_own_overlay_survives_sweep(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    ov = Overlay(project, tmp_path / "base" / str(os.getpid()) / "s")
    ov.redirect_write("x.txt").write_text("x")
    assert sweep(tmp_path / "base") == []
    assert ov.written_files()["x.txt"].read_text() == "x"
    ov.cleanup()


def test_a_dead_workers_overlay_stays_while_its_owner_lives(tmp_path: Path) -> None:
    waiting = _speculation_dir(tmp_path, str(_dead_pid()))  # worker gone, Tab not pressed yet
    mark_owner(waiting, os.getpid())
    orphan = _speculation_dir(tmp_path, str(_dead_pid()))
    mark_owner(orphan, _dead_pid())  # its coordinator is gone too
    assert sweep(tmp_path) == [orphan]
    assert waiting.exists()


def test_release_pid_dir_waits_for_the_last_overlay(tmp_path: Path) -> None:
    pid_dir = _speculation_dir(tmp_path, str(_dead_pid()))
    mark_owner(pid_dir, os.getpid())
    assert not release_pid_dir(pid_dir)  # an overlay is still there
    (tmp_path / "project").mkdir()
    Overlay(tmp_path / "project", pid_dir / "spec-1").cleanup()  # releases the parent
    assert not pid_dir.exists()
    assert release_pid_dir(pid_dir)  # idempotent
