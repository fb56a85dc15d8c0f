"""Crash consistency: SIGKILL an applying process anywhere, then recover().

After recovery the project must be byte for byte the state before the apply or the state after
it, with no stage, backup or journal file left. Children are forked (cheap) and always reaped.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import signal
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from overlay import Overlay, RecoveryError, recover
from tests.overlay.helpers import (
    Snapshot,
    applied,
    journal_of,
    make_tree,
    reported_record,
    snapshot,
    strays,
)
from tests.seams import checkpoint_hook

_FORK = multiprocessing.get_context("fork")


@dataclass
class Scenario:
    root: Path
    ovdir: Path
    record: dict[str, Any]
    before: Snapshot
    after: Snapshot


def make_scenario(base: Path) -> Scenario:
    """A project and an overlay that modifies 3 files, creates 3 (two in new dirs), deletes
    one, creates a symlink and replaces a file with one."""
    root = base / "project"
    root.mkdir(parents=True)
    make_tree(
        root,
        {
            "README.md": "# readme\n",
            "src/app.py": "print('app')\n" * 50,
            "src/lib/core.py": "CORE = 1\n",
            "keep.txt": "untouched\n",
            "old/gone.txt": "removed by the speculation\n",
            "lib/libz.so": "a file the build replaces with a link\n",
        },
    )
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    ovdir = base / "spec" / str(os.getpid()) / "s1"
    ov = Overlay(root, ovdir)
    ov.redirect_write("README.md").write_text("# readme, speculated\n")
    ov.redirect_write("src/app.py").write_text("print('speculated')\n" * 70)
    ov.redirect_write("run.sh").write_text("#!/bin/sh\necho speculated\n")
    ov.redirect_write("src/lib/extra.py").write_text("EXTRA = 2\n")
    ov.redirect_write("new/deep/er/file.txt").write_text("deep\n")
    ov.redirect_write("TOP.md").write_text("top\n")
    ov.redirect_write("unwritten/never.txt")
    assert ov.record_deletion("old/gone.txt")
    ov.record_link("new/deep/current", "er/file.txt")
    ov.record_link("lib/libz.so", "libz.so.1")
    record = json.loads(json.dumps(reported_record(ov)))
    before = snapshot(root)
    # The after-state: the same apply on a copy of the project.
    copy = base / "expected"
    shutil.copytree(root, copy, symlinks=True)
    applied(Overlay.from_record(copy, ovdir, record), durable=False)
    after = snapshot(copy)
    shutil.rmtree(copy)
    assert before != after
    return Scenario(root, ovdir, record, before, after)


def _apply_in_child(sc: Scenario, hook: str, conn: Connection | None) -> None:
    ov = Overlay.from_record(sc.root, sc.ovdir, sc.record)
    if conn is not None:
        conn.send("ready")
    ov.apply_to_real(journal_dir=journal_of(ov), checkpoint=checkpoint_hook(hook))
    os._exit(0)


def _recover_in_child(root: Path, hook: str) -> None:
    recover(root, journal_dir=journal_of(root), checkpoint=checkpoint_hook(hook))
    os._exit(0)


def _run(target: Any, *args: Any) -> int:
    proc = _FORK.Process(target=target, args=args)
    proc.start()
    proc.join(30)
    if proc.is_alive():  # pragma: no cover - only on a hang
        proc.kill()
        proc.join()
    code = proc.exitcode
    assert code is not None
    return code


def _diff(before: Snapshot, state: Snapshot) -> str:
    out = []
    for rel in sorted(set(before) | set(state)):
        if before.get(rel) != state.get(rel):
            old, new = before.get(rel), state.get(rel)
            out.append(f"{rel}: {old and old[:2]!r} -> {new and new[:2]!r}")
    return "; ".join(out)


def _check_consistent(sc: Scenario) -> bool:
    """Assert before- or after-state and no strays; True for the after-state."""
    state = snapshot(sc.root)
    if state not in (sc.before, sc.after):
        pytest.fail(f"recovery left a mixed tree: {_diff(sc.before, state)}")
    assert strays(sc.root) == []
    return state == sc.after


# ----------------------------------------------------------------------------- every crash point


def test_crash_at_every_checkpoint_then_recover(tmp_path: Path) -> None:
    outcomes: list[bool] = []
    for k in range(1, 200):
        sc = make_scenario(tmp_path / f"k{k}")
        code = _run(_apply_in_child, sc, f"kill={k}", None)
        if code == 0:
            assert recover(sc.root, journal_dir=journal_of(sc.root)) is None
            assert snapshot(sc.root) == sc.after
            break
        assert code == -signal.SIGKILL
        result = recover(sc.root, journal_dir=journal_of(sc.root))
        forward = _check_consistent(sc)
        outcomes.append(forward)
        # None: killed before the first journal existed or after the last was gone.
        if result is not None:
            assert set(result.rolled_forward if forward else result.rolled_back) <= set(sc.record)
        assert recover(sc.root, journal_dir=journal_of(sc.root)) is None  # nothing left to do
    else:  # pragma: no cover
        pytest.fail("the apply never finished")
    # Crashes before the commit record roll back, every later one rolls forward.
    first_forward = outcomes.index(True)
    assert first_forward > 0
    assert outcomes == [False] * first_forward + [True] * (len(outcomes) - first_forward)


def test_crashes_during_recovery_are_recovered(tmp_path: Path) -> None:
    """Kill the apply at each checkpoint, then kill recovery again and again."""
    apply_points = 0
    for k in range(1, 200):
        sc = make_scenario(tmp_path / f"k{k}")
        if _run(_apply_in_child, sc, f"kill={k}", None) == 0:
            break
        apply_points += 1
        for j in range(1, 200):
            if _run(_recover_in_child, sc.root, f"kill={j}") == 0:
                break
        recover(sc.root, journal_dir=journal_of(sc.root))
        _check_consistent(sc)
        shutil.rmtree(tmp_path / f"k{k}")
    assert apply_points > 10


# ----------------------------------------------------------------------------- random SIGKILL


def _random_kills(tmp_path: Path, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    # Calibrate the apply window with one uninterrupted run (slowed down by the test hook).
    sc = make_scenario(tmp_path / "calibrate")
    hook = "sleep=0.0005"
    start = time.perf_counter()
    assert _run(_apply_in_child, sc, hook, None) == 0
    window = time.perf_counter() - start
    seen = {True: 0, False: 0}
    for i in range(rounds):
        base = tmp_path / f"r{i}"
        sc = make_scenario(base)
        parent_conn, child_conn = _FORK.Pipe(duplex=False)
        proc = _FORK.Process(target=_apply_in_child, args=(sc, hook, child_conn))
        proc.start()
        try:
            assert parent_conn.poll(30)
            parent_conn.recv()
            time.sleep(rng.uniform(0, window))
            if proc.pid is not None and proc.exitcode is None:
                os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.join(30)
            parent_conn.close()
            child_conn.close()
        assert proc.exitcode in (0, -signal.SIGKILL)
        recover(sc.root, journal_dir=journal_of(sc.root))
        forward = _check_consistent(sc)
        if proc.exitcode == 0:
            assert forward
        seen[forward] += 1
        shutil.rmtree(base)
    assert seen[True] + seen[False] == rounds


def test_random_sigkill_during_apply(tmp_path: Path) -> None:
    _random_kills(tmp_path, rounds=40, seed=2024)


@pytest.mark.slow  # skipped unless SPECRUN_SLOW=1 (tests/conftest.py)
def test_random_sigkill_during_apply_long(tmp_path: Path) -> None:
    _random_kills(tmp_path, rounds=500, seed=7)


# ----------------------------------------------------------------------------- left-overs


def test_nothing_to_recover(root: Path) -> None:
    assert recover(root, journal_dir=str(root.parent / "no-such-dir")) is None
    assert recover(root, journal_dir=journal_of(root)) is None
    assert not (root / ".specrun").exists()


def test_half_written_journal_tmp_is_removed(root: Path) -> None:
    before = snapshot(root)
    jdir = Path(journal_of(root))
    (jdir / "4242-deadbeef.json.tmp").write_bytes(b'{"version": 1, "id": "4242-dead')
    result = recover(root, journal_dir=journal_of(root))
    assert result is not None
    assert result.action == "cleaned"
    assert result.removed_temp_files == ["4242-deadbeef.json.tmp"]
    assert snapshot(root) == before


def test_crash_after_commit_reports_roll_forward(tmp_path: Path) -> None:
    # Checkpoints: 1 intent, 2..9 one per staged file or link, 10 commit.
    sc = make_scenario(tmp_path)
    assert _run(_apply_in_child, sc, "kill=10", None) == -signal.SIGKILL
    result = recover(sc.root, journal_dir=journal_of(sc.root))
    assert result is not None
    assert result.action == "rolled_forward"
    assert sorted(result.rolled_forward) == sorted(set(sc.record) - {"unwritten/never.txt"})
    assert snapshot(sc.root) == sc.after


def test_crash_before_commit_reports_roll_back(tmp_path: Path) -> None:
    sc = make_scenario(tmp_path)
    assert _run(_apply_in_child, sc, "kill=4", None) == -signal.SIGKILL
    assert any(".specrun-stage-" in p for p in strays(sc.root))
    result = recover(sc.root, journal_dir=journal_of(sc.root))
    assert result is not None
    assert result.action == "rolled_back"
    assert snapshot(sc.root) == sc.before


def test_unreadable_journal_is_an_error_and_kept(root: Path) -> None:
    jdir = Path(journal_of(root))
    (jdir / "1-abc.json").write_text("not json")
    with pytest.raises(RecoveryError, match=r"1-abc\.json"):
        recover(root, journal_dir=journal_of(root))
    assert (jdir / "1-abc.json").exists()


def test_journal_cannot_make_recovery_touch_other_files(root: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    jdir = Path(journal_of(root))
    for stage in ["../../../victim.txt", "README.md", "src/.app.py.specrun-stage-1"]:
        journal = {
            "version": 1,
            "id": "1-abc",
            "state": "commit",
            "pid": 1,
            "steps": [{"rel": "README.md", "stage": stage, "backup": None}],
            "dirs": [],
        }
        (jdir / "1-abc.json").write_text(json.dumps(journal))
        with pytest.raises(RecoveryError):
            recover(root, journal_dir=journal_of(root))
    assert victim.read_text() == "precious"
    assert (root / "README.md").read_text() == "# demo\n"


@pytest.mark.parametrize("deleted", [True, False])
def test_a_journal_through_a_symlinked_directory_touches_nothing(
    root: Path, tmp_path: Path, deleted: bool
) -> None:
    """A repository can ship ``.specrun/journal/*.json`` and a link out beside it: recovery
    at start deleted (or replaced) a file of the user's through the link."""
    victim = tmp_path / "home"
    victim.mkdir()
    (victim / ".bashrc").write_text("precious")
    (victim / ".bashrc.specrun-stage-1").write_text("planted")
    (root / "lnk").symlink_to(victim)
    jdir = Path(journal_of(root))
    step = (
        {"rel": "lnk/.bashrc", "stage": None, "backup": "lnk/x.specrun-backup-1", "deleted": True}
        if deleted
        else {"rel": "lnk/.bashrc", "stage": "lnk/.bashrc.specrun-stage-1", "backup": None}
    )
    journal = {"version": 1, "id": "1-abc", "state": "commit", "pid": 1, "steps": [step],
               "dirs": []}
    (jdir / "1-abc.json").write_text(json.dumps(journal))
    with pytest.raises(RecoveryError, match="lnk"):
        recover(root, journal_dir=journal_of(root))
    assert (victim / ".bashrc").read_text() == "precious"


def test_recover_waits_for_a_live_apply(tmp_path: Path) -> None:
    """recover() from another process never undoes an apply that is still running."""
    sc = make_scenario(tmp_path)
    parent_conn, child_conn = _FORK.Pipe(duplex=False)
    proc = _FORK.Process(target=_apply_in_child, args=(sc, "sleep=0.005", child_conn))
    proc.start()
    try:
        assert parent_conn.poll(30)
        parent_conn.recv()
        # The apply is under way (it holds the root lock) once its journal is written; on a
        # loaded machine it may even be over by the time we look, which proves less but
        # must end the same way.
        journal = Path(journal_of(sc.root))
        deadline = time.monotonic() + 30
        while proc.is_alive() and not (journal.is_dir() and any(journal.glob("*.json"))):
            assert time.monotonic() < deadline, "the apply never wrote its journal"
            time.sleep(0.001)
        recover(sc.root, journal_dir=journal_of(sc.root))  # waits for the apply
        assert snapshot(sc.root) == sc.after
    finally:
        proc.join(30)
        parent_conn.close()
        child_conn.close()
    assert proc.exitcode == 0
    assert strays(sc.root) == []
