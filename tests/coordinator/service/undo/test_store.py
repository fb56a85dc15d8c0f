"""The checkpoint store on real files: what a checkpoint keeps, how it closes, the cap."""

from __future__ import annotations

import os
from pathlib import Path

from coordinator.service.undo.store import CheckpointStore, read_state


def _store(tmp_path: Path, cap: int = 1 << 20) -> CheckpointStore:
    directory = tmp_path / "undo"
    directory.mkdir()
    return CheckpointStore(directory, cap)


def test_a_checkpoint_keeps_exactly_the_files_it_changed_with_their_earlier_content_and_mode(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.sh").write_bytes(b"#!/bin/sh\necho a\n")
    os.chmod(root / "a.sh", 0o751)
    (root / "same.txt").write_text("untouched\n")
    store = _store(tmp_path)
    cp = store.begin("turn", "s1", 1, "do it")
    assert store.take(cp, str(root / "a.sh"), "a.sh")
    assert store.take(cp, str(root / "new.txt"), "new.txt")
    assert store.take(cp, str(root / "same.txt"), "same.txt")
    (root / "a.sh").write_bytes(b"#!/bin/sh\necho b\n")
    assert store.take(cp, str(root / "a.sh"), "a.sh")  # a second write keeps the first state
    (root / "new.txt").write_text("new\n")

    closed = store.close(cp, root)
    assert closed is not None and not closed.open
    assert [f.path for f in closed.files] == ["a.sh", "new.txt"]  # same.txt: unchanged
    a = closed.files[0]
    assert a.before is not None and a.before.mode == 0o751
    assert store.object_path(a.before.sha256).read_bytes() == b"#!/bin/sh\necho a\n"
    assert a.after == read_state(root / "a.sh")
    assert closed.files[1].before is None
    assert [c.id for c in store.all()] == [cp.id]


def test_a_checkpoint_whose_files_did_not_change_is_not_kept(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    store = _store(tmp_path)
    cp = store.begin("accept", "s1", 1, "x")
    store.take(cp, str(root / "a.txt"), "a.txt")
    assert store.close(cp, root) is None
    assert store.all() == []
    assert store.usage().content_bytes == 0  # its content went with it


def test_a_link_or_directory_is_not_taken(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "d").mkdir()
    os.symlink("/etc/passwd", root / "link")
    store = _store(tmp_path)
    cp = store.begin("turn", "s1", 1, "x")
    assert not store.take(cp, str(root / "d"), "d")
    assert not store.take(cp, str(root / "link"), "link")
    assert cp.files == []


def test_same_contents_are_kept_once(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    for name in ("a", "b"):
        (root / name).write_text("same content\n")
    store = _store(tmp_path)
    cp = store.begin("turn", "s1", 1, "x")
    store.take(cp, str(root / "a"), "a")
    store.take(cp, str(root / "b"), "b")
    assert store.usage().content_bytes == len("same content\n")


def test_an_open_checkpoint_left_by_a_crash_is_closed_from_what_is_on_disk(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.txt").write_text("before\n")
    (root / "b.txt").write_text("b\n")
    store = _store(tmp_path)
    cp = store.begin("turn", "s1", 3, "x")
    store.take(cp, str(root / "a.txt"), "a.txt")
    store.take(cp, str(root / "b.txt"), "b.txt")
    (root / "a.txt").write_text("after\n")  # then the service was killed: never closed

    fresh = CheckpointStore(store.directory, store.cap_bytes)
    (left,) = fresh.all()
    assert left.open
    closed = fresh.close_open(root)
    assert [c.turn for c in closed] == [3]
    (kept,) = fresh.all()
    assert not kept.open and [f.path for f in kept.files] == ["a.txt"]


def test_the_cap_prunes_the_oldest_checkpoints_first(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    store = _store(tmp_path, cap=2500)
    for turn in range(1, 5):
        path = root / f"f{turn}.bin"
        path.write_bytes(bytes([turn]) * 1000)
        cp = store.begin("turn", "s1", turn, f"turn {turn}")
        store.take(cp, str(path), path.name)
        path.write_bytes(b"changed")
        store.close(cp, root)
    kept = [c.turn for c in store.all()]
    assert kept == [3, 4]
    assert store.usage().content_bytes <= 2500


def test_content_larger_than_the_cap_is_not_kept_but_its_checkpoint_says_so(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "big.bin").write_bytes(b"x" * 5000)
    store = _store(tmp_path, cap=1000)
    cp = store.begin("turn", "s1", 1, "x")
    store.take(cp, str(root / "big.bin"), "big.bin")
    (root / "big.bin").write_bytes(b"small")
    closed = store.close(cp, root)
    assert closed is not None and closed.files[0].kept is False
    assert store.usage().content_bytes == 0
