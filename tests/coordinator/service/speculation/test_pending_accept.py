"""A crash between applying an accept's files and appending its messages is settled at
the next start: both or neither."""

from __future__ import annotations

import hashlib
from pathlib import Path

from coordinator.service.chat.history import HistoryStore
from coordinator.service.speculation.pending_accept import (
    GONE,
    PendingAccept,
    record_path,
    settle_pending,
    write_pending,
)
from protocol.wire.chat import Message

ACCEPTED = (Message.user("add a test"), Message.assistant("Added tests/test_new.py."))
NEW = b"def test_new():\n    assert True\n"


def _record(root: Path) -> PendingAccept:
    return PendingAccept(ACCEPTED, {"tests/test_new.py": hashlib.sha256(NEW).hexdigest()})


def test_applied_files_get_their_messages(tmp_path: Path) -> None:
    history = HistoryStore(tmp_path)
    history.append([Message.user("fix it"), Message.assistant("Fixed.")])
    write_pending(tmp_path, _record(tmp_path))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_new.py").write_bytes(NEW)  # the apply finished, then a crash
    assert "added the 2" in (settle_pending(tmp_path, HistoryStore(tmp_path)) or "")
    assert HistoryStore(tmp_path).load()[-2:] == list(ACCEPTED)
    assert not record_path(tmp_path).exists()


def test_unapplied_files_add_nothing(tmp_path: Path) -> None:
    HistoryStore(tmp_path).append([Message.user("fix it")])
    write_pending(tmp_path, _record(tmp_path))  # crashed before (or rolled back) the apply
    assert "not applied" in (settle_pending(tmp_path, HistoryStore(tmp_path)) or "")
    assert HistoryStore(tmp_path).load() == [Message.user("fix it")]
    assert not record_path(tmp_path).exists()


def test_messages_already_appended_are_not_doubled(tmp_path: Path) -> None:
    history = HistoryStore(tmp_path)
    history.append(ACCEPTED)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_new.py").write_bytes(NEW)
    write_pending(tmp_path, _record(tmp_path))  # crashed after both, before the clear
    assert "both complete" in (settle_pending(tmp_path, HistoryStore(tmp_path)) or "")
    assert HistoryStore(tmp_path).load() == list(ACCEPTED)


def test_no_record_or_a_torn_one(tmp_path: Path) -> None:
    assert settle_pending(tmp_path, HistoryStore(tmp_path)) is None
    path = record_path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'{"messages": [')
    assert settle_pending(tmp_path, HistoryStore(tmp_path)) is None
    assert not path.exists()


def test_a_deletion_counts_as_applied_when_the_file_is_gone(tmp_path: Path) -> None:
    (tmp_path / "old.py").write_text("old\n")
    record = PendingAccept(ACCEPTED, {"old.py": GONE})
    write_pending(tmp_path, record)
    assert "not applied" in (settle_pending(tmp_path, HistoryStore(tmp_path)) or "")
    write_pending(tmp_path, record)
    (tmp_path / "old.py").unlink()  # the apply deleted it, then a crash
    assert "added the 2" in (settle_pending(tmp_path, HistoryStore(tmp_path)) or "")


def test_a_shipped_record_reads_nothing_outside_the_project(tmp_path: Path) -> None:
    """The record is a file in the project, so a cloned repository can ship one: a path
    out of the project, through a link, or to a device is never read (``/dev/zero`` made
    the start read without end), and the record counts as not applied."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "zero").symlink_to("/dev/zero")
    (root / "out").symlink_to(tmp_path)
    (tmp_path / "secret.txt").write_bytes(NEW)
    sha = hashlib.sha256(NEW).hexdigest()
    for rel in ("out/secret.txt", "../secret.txt", "/proc/self/environ", "zero", "/dev/zero"):
        HistoryStore(root).append([Message.user("fix it")])
        write_pending(root, PendingAccept(ACCEPTED, {rel: sha}))
        assert "not applied" in (settle_pending(root, HistoryStore(root)) or ""), rel
        assert ACCEPTED[1] not in HistoryStore(root).load()
        assert not record_path(root).exists()
