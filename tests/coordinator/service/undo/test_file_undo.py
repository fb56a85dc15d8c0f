"""Taking a checkpoint back on real files, through the accept's own journaled apply: byte
for byte (content and mode), a file changed since is kept, a process killed at any point
of the undo leaves the tree as before or as after the undo (never mixed) with the
checkpoint dropped exactly when its files went back, and git's index and objects are
never touched."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import stat
import subprocess
from pathlib import Path

import pytest

import overlay
from coordinator.service.chat.history import HistoryStore
from coordinator.service.undo.checkpoints import Checkpoints
from coordinator.service.undo.file_undo import apply_plan, finish_undo, plan_undo
from coordinator.service.undo.rewinder import settle_undo
from coordinator.service.undo.store import CheckpointStore
from coordinator.settings import Settings
from coordinator.user_state import journal_dir
from overlay.apply import set_process_checkpoint
from tests.seams import checkpoint_hook

Tree = dict[str, tuple[bytes, int]]


def tree(root: Path) -> Tree:
    """Every file but .git's: its bytes and permission bits."""
    out: Tree = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] == ".git" or not path.is_file() or path.is_symlink():
            continue
        out[rel] = (path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
    return out


def git_state(root: Path) -> tuple[str, tuple[str, ...]]:
    """The index's digest and the names of every object: what undo must never change."""
    index = hashlib.sha256((root / ".git" / "index").read_bytes()).hexdigest()
    objects = tuple(sorted(
        p.relative_to(root).as_posix() for p in (root / ".git" / "objects").rglob("*")
    ))
    return index, objects


@pytest.fixture
def checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Checkpoints:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = tmp_path / "project"
    root.mkdir()
    (root / "run.sh").write_bytes(b"#!/bin/sh\necho run\n")
    os.chmod(root / "run.sh", 0o755)
    (root / "src").mkdir()
    (root / "src" / "calc.py").write_bytes(b"def add(a, b):\n    return a - b\n")
    (root / "old.txt").write_bytes(b"old\r\nbytes \x00\xff\n")
    os.chmod(root / "old.txt", 0o640)
    for cmd in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@e",
                                               "commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=root, check=True, capture_output=True)
    return Checkpoints(root, Settings())


def _turn(checkpoints: Checkpoints) -> Tree:
    """One turn's writes, checkpointed: the tree before it."""
    root = checkpoints.root
    store = checkpoints.store
    assert store is not None
    before = tree(root)
    cp = store.begin("turn", "s1", 1, "tidy")
    for rel in ("run.sh", "src/calc.py", "old.txt", "new/dir/made.py"):
        assert store.take(cp, str(root / rel), rel)
    (root / "run.sh").write_bytes(b"#!/bin/sh\necho changed\n")
    os.chmod(root / "run.sh", 0o644)
    (root / "src" / "calc.py").write_bytes(b"def add(a, b):\n    return a + b\n")
    (root / "old.txt").unlink()
    (root / "new" / "dir").mkdir(parents=True)
    (root / "new" / "dir" / "made.py").write_bytes(b"X = 1\n")
    assert store.close(cp, root) is not None
    return before


def _store(checkpoints: Checkpoints) -> CheckpointStore:
    assert checkpoints.store is not None
    return checkpoints.store


def test_undo_restores_content_and_mode_byte_for_byte_and_leaves_git_alone(
    checkpoints: Checkpoints,
) -> None:
    root, store = checkpoints.root, _store(checkpoints)
    git_before = git_state(root)
    before = _turn(checkpoints)
    plan = plan_undo(store, root, store.all())
    assert {f.path: f.action for f in plan.files} == {
        "run.sh": "restore", "src/calc.py": "restore", "old.txt": "recreate",
        "new/dir/made.py": "remove",
    }
    apply_plan(store, root, plan, durable=False)
    finish_undo(store)
    after = tree(root)
    assert after == {**before}  # made.py gone; its new directories may stay, empty
    assert store.all() == []
    assert git_state(root) == git_before
    assert not (root / ".specrun" / "journal").exists()


def test_a_file_changed_since_is_named_and_kept(checkpoints: Checkpoints) -> None:
    root, store = checkpoints.root, _store(checkpoints)
    _turn(checkpoints)
    (root / "src" / "calc.py").write_bytes(b"mine\n")
    plan = plan_undo(store, root, store.all())
    assert [(f.path, f.why) for f in plan.conflicts] == [("src/calc.py", "you changed it since")]
    # Forced, the others go back and the changed one stays as the person left it.
    apply_plan(store, root, plan, durable=False)
    finish_undo(store)
    assert (root / "src" / "calc.py").read_bytes() == b"mine\n"
    assert (root / "run.sh").read_bytes() == b"#!/bin/sh\necho run\n"


def test_a_chmod_since_is_no_edit_but_a_file_put_back_by_hand_is_already_done(
    checkpoints: Checkpoints,
) -> None:
    root, store = checkpoints.root, _store(checkpoints)
    _turn(checkpoints)
    os.chmod(root / "src" / "calc.py", 0o600)
    (root / "new" / "dir" / "made.py").unlink()
    plan = plan_undo(store, root, store.all())
    actions = {f.path: f.action for f in plan.files}
    assert actions["src/calc.py"] == "restore"
    assert actions["new/dir/made.py"] == "already"
    assert plan.conflicts == []


def _undo_in_child(root: Path, state_home: str, hook: str) -> None:
    os.environ["XDG_STATE_HOME"] = state_home
    set_process_checkpoint(checkpoint_hook(hook))  # this forked child's applies only
    checkpoints = Checkpoints(root, Settings())
    store = _store(checkpoints)
    apply_plan(store, root, plan_undo(store, root, store.all()))
    finish_undo(store)
    os._exit(0)


def test_an_undo_killed_at_any_point_is_settled_whole_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    fork = multiprocessing.get_context("fork")
    seen = set()
    for k in range(1, 60):
        base = tmp_path / f"k{k}"
        base.mkdir()
        monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))
        root = base / "project"
        root.mkdir()
        (root / "a.txt").write_bytes(b"a\n")
        (root / "b.sh").write_bytes(b"b\n")
        os.chmod(root / "b.sh", 0o700)
        checkpoints = Checkpoints(root, Settings())
        store = _store(checkpoints)
        cp = store.begin("turn", "s1", 1, "x")
        for rel in ("a.txt", "b.sh", "c.txt"):
            store.take(cp, str(root / rel), rel)
        original = tree(root)
        (root / "a.txt").write_bytes(b"A\n")
        (root / "b.sh").write_bytes(b"B\n")
        (root / "c.txt").write_bytes(b"C\n")
        store.close(cp, root)
        written = tree(root)

        proc = fork.Process(target=_undo_in_child, args=(root, str(base / "state"), f"kill={k}"))
        proc.start()
        proc.join(30)
        if proc.exitcode == 0:
            assert tree(root) == original
            break
        assert proc.exitcode == -signal.SIGKILL
        # The next start: the apply's own recovery, then the undo's.
        overlay.recover(root, journal_dir=str(journal_dir(root)))
        settle_undo(Checkpoints(root, Settings()), HistoryStore(root))
        now = tree(root)
        assert now in (original, written), f"a mixed tree after a kill at {k}"
        left = CheckpointStore(store.directory, store.cap_bytes).all()
        if now == original:
            assert left == [], "the files went back but the checkpoint stayed"
            seen.add("undone")
        else:
            assert [c.turn for c in left] == [1], "the files stayed but the checkpoint went"
            seen.add("not undone")
    else:
        pytest.fail("the undo never ran to its end")
    assert seen == {"undone", "not undone"}


def test_an_earlier_content_damaged_in_the_store_is_never_restored(
    checkpoints: Checkpoints,
) -> None:
    root, store = checkpoints.root, _store(checkpoints)
    _turn(checkpoints)
    (entry,) = [f for f in store.all()[0].files if f.path == "src/calc.py"]
    assert entry.before is not None
    kept = store.object_path(entry.before.sha256)
    kept.write_bytes(b"X" * entry.before.size)  # same size, other bytes (a torn write)
    plan = plan_undo(store, root, store.all())
    assert [(f.path, f.why) for f in plan.conflicts] == [
        ("src/calc.py", "its earlier content is no longer in the undo store")]
    assert "src/calc.py" not in {item.rel for item in plan.items}
