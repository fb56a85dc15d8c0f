"""Append-only history persistence: round trips, sessions, torn writes, SIGKILL mid-append."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from coordinator.service.chat import history as history_mod
from coordinator.service.chat.history import CURRENT_FILE, HistoryStore, parse_session_bytes
from coordinator.user_state import project_state_dir
from protocol.wire.chat import Message, ToolCall, ToolResult

REPO = Path(__file__).resolve().parents[2]


def turn(i: int) -> list[Message]:
    call = ToolCall(id=f"c{i}", name="read_file", arguments='{"path": "a\\nb"}')
    return [
        Message.user(f"question {i}\nwith a newline", reminders=("remember: 部署",)),
        Message.assistant("", (call,)),
        Message.tool((ToolResult(f"c{i}", "read_file", output="x" * 100),)),
        Message.assistant(f"answer {i}"),
    ]


def test_append_and_load_round_trip(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.append(turn(0))
    store.append([Message.user("single")])
    assert store.load() == [*turn(0), Message.user("single")]
    session = store.current_session()
    assert session.path == project_state_dir(tmp_path, "sessions") / f"{session.id}.jsonl"
    assert not (tmp_path / ".specrun").exists()  # nothing of specrun's in the project
    lines = session.path.read_bytes().splitlines()
    assert b'"session_id"' in lines[0]
    assert lines[1] == b'{"batch":4}'
    assert len(lines) == 1 + 1 + 4 + 1  # header, marker, 4 messages, single message


def test_restart_reloads_the_latest_session(tmp_path: Path) -> None:
    first = HistoryStore(tmp_path)
    first.append(turn(1))
    sid = first.current_session().id
    first.close()
    again = HistoryStore(tmp_path)
    assert again.current_session().id == sid
    assert again.load() == turn(1)
    again.append(turn(2))
    assert HistoryStore(tmp_path).load() == turn(1) + turn(2)


def test_new_session_starts_empty_and_becomes_current(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.append(turn(1))
    old = store.current_session()
    new = store.new_session()
    assert new.id != old.id and store.load() == []
    store.append([Message.user("fresh")])
    assert HistoryStore(tmp_path).current_session().id == new.id
    assert HistoryStore(tmp_path).load() == [Message.user("fresh")]
    assert store.load(old.id) == turn(1)
    assert [s.id for s in store.list_sessions()] == sorted([old.id, new.id])


def test_missing_current_pointer_falls_back_to_newest(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.append([Message.user("a")])
    store.new_session()
    store.append([Message.user("b")])
    (store.sessions_dir / CURRENT_FILE).write_text("../../etc/passwd\n")
    assert HistoryStore(tmp_path).load() == [Message.user("b")]
    (store.sessions_dir / CURRENT_FILE).unlink()
    assert HistoryStore(tmp_path).load() == [Message.user("b")]


def test_fresh_project_loads_empty(tmp_path: Path) -> None:
    assert HistoryStore(tmp_path / "p").load() == []


def test_torn_last_line_is_ignored_and_cut_before_next_append(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.append([Message.user("kept")])
    path = store.current_session().path
    store.close()
    with path.open("ab") as fh:
        fh.write(b'{"role":"assistant","text":"half a li')
    report = HistoryStore(tmp_path).load_report()
    assert report.messages == [Message.user("kept")] and report.torn_tail
    again = HistoryStore(tmp_path)
    again.append([Message.assistant("next")])
    assert again.load() == [Message.user("kept"), Message.assistant("next")]
    assert b"half a li" not in path.read_bytes()
    assert not again.load_report().torn_tail


def test_incomplete_batch_is_dropped_whole(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.append(turn(0))
    store.close()
    path = store.current_session().path
    full = path.read_bytes()
    store2 = HistoryStore(tmp_path)
    store2.append(turn(1))
    store2.close()
    data = path.read_bytes()
    # cut the second batch after its second message line (complete lines, missing the rest)
    batch2 = data[len(full) :]
    cut = len(full) + [i for i, b in enumerate(batch2) if b == ord("\n")][2] + 1
    path.write_bytes(data[:cut])
    report = HistoryStore(tmp_path).load_report()
    assert report.messages == turn(0) and report.torn_tail and report.valid_bytes == len(full)
    store3 = HistoryStore(tmp_path)
    store3.append([Message.user("after crash")])
    assert store3.load() == [*turn(0), Message.user("after crash")]


def test_every_truncation_point_loads(tmp_path: Path) -> None:
    """Cut the file at every byte: load never fails, and only whole appends come back."""
    store = HistoryStore(tmp_path)
    batches = [turn(0), [Message.user("solo")], turn(1)]
    for b in batches:
        store.append(b)
    data = store.current_session().path.read_bytes()
    prefixes = [[], batches[0], batches[0] + batches[1], batches[0] + batches[1] + batches[2]]
    for cut in range(len(data) + 1):
        _, report = parse_session_bytes(data[:cut])
        assert report.messages in prefixes, cut


def test_corrupt_middle_line_is_skipped(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.append([Message.user("a")])
    store.close()
    path = store.current_session().path
    with path.open("ab") as fh:  # damage that is not at the tail (not a torn append)
        fh.write(b'\x00garbage\n{"role":"user","text":"b"}\n')
    report = HistoryStore(tmp_path).load_report()
    assert report.messages == [Message.user("a"), Message.user("b")]
    assert report.skipped_lines == 1 and not report.torn_tail
    HistoryStore(tmp_path).append([Message.user("c")])
    assert HistoryStore(tmp_path).load()[-1] == Message.user("c")


def test_garbage_at_the_tail_counts_as_torn(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.append([Message.user("a")])
    store.close()
    with store.current_session().path.open("ab") as fh:
        fh.write(b"\x00garbage\n")
    assert HistoryStore(tmp_path).load_report().torn_tail
    HistoryStore(tmp_path).append([Message.user("b")])
    assert HistoryStore(tmp_path).load() == [Message.user("a"), Message.user("b")]


def test_failed_write_leaves_nothing_and_is_repaired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that stops half-way (disk full) must not leave half a batch behind."""
    store = HistoryStore(tmp_path)
    store.append([Message.user("before")])
    real_write = os.write
    calls = {"n": 0}

    def short_then_fail(fd: int, data: bytes | memoryview) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(history_mod.os, "write", short_then_fail)
    with pytest.raises(OSError):
        store.append(turn(5))
    monkeypatch.setattr(history_mod.os, "write", real_write)
    assert HistoryStore(tmp_path).load() == [Message.user("before")]
    store.append([Message.user("after")])
    assert HistoryStore(tmp_path).load() == [Message.user("before"), Message.user("after")]


def test_append_nothing_is_a_no_op(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.append([])
    assert store.load() == []


# One interpreter imports the store once; each round forks an appender from it (30
# interpreter starts took 8 s alone and 35-95 s under a full suite's load). An appender
# writes an index to its acks file only after that turn's append returned, and runs until
# it is killed; the forker reaps it and says so.
_FORKER = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, sys.argv[2])
    from coordinator.service.chat.history import HistoryStore
    from protocol.wire.chat import Message
    for line in sys.stdin:
        first, acks_path = line.split()
        pid = os.fork()
        if pid == 0:
            try:
                acks = os.open(acks_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                store = HistoryStore(sys.argv[1])
                os.write(1, f"{os.getpid()}\\n".encode())
                i = int(first)
                while True:
                    big = "y" * (1000 + (i * 7919) % 60000)
                    store.append([Message.user(f"q{i}"), Message.assistant(f"{i}:{big}")])
                    os.write(acks, f"{i}\\n".encode())
                    i += 1
            finally:
                os._exit(1)
        os.waitpid(pid, 0)
        os.write(1, b"reaped\\n")
    """
)


def _check_pairs(messages: list[Message]) -> list[int]:
    assert len(messages) % 2 == 0, "half a turn was loaded"
    ids = []
    for q, a in zip(messages[::2], messages[1::2], strict=True):
        i = int(q.text[1:])
        assert q.role == "user" and a.role == "assistant" and a.text.startswith(f"{i}:")
        ids.append(i)
    return ids


def test_sigkill_mid_append_never_loses_an_acknowledged_turn(tmp_path: Path) -> None:
    rng = random.Random(1234)
    acked_total: set[int] = set()
    next_index = 0
    forker = subprocess.Popen(
        [sys.executable, "-c", _FORKER, str(tmp_path), str(REPO)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert forker.stdin is not None and forker.stdout is not None
    try:
        for round_ in range(30):
            acks = tmp_path / f"acks-{round_}"
            forker.stdin.write(f"{next_index} {acks}\n".encode())
            forker.stdin.flush()
            appender = int(forker.stdout.readline())  # its pid, once it appends
            time.sleep(rng.uniform(0.0, 0.04))
            os.kill(appender, signal.SIGKILL)
            assert forker.stdout.readline() == b"reaped\n"
            acked = {int(x) for x in acks.read_bytes().split()}
            acked_total |= acked
            ids = _check_pairs(HistoryStore(tmp_path).load())  # loading never fails
            assert acked_total <= set(ids), "an acknowledged append was lost"
            assert ids == list(range(len(ids))), "appends out of order or duplicated"
            next_index = len(ids)
    finally:
        forker.kill()
        forker.wait()
    assert next_index > 0


# -- compaction records -------------------------------------------------------------------


def _compaction(summary: str, kept: int) -> history_mod.CompactionRecord:
    return history_mod.CompactionRecord(
        summary=Message.user("", reminders=(summary,)),
        kept=kept,
        summarized=0,
        tokens_before=1000,
        tokens_after=100,
        created=1.0,
    )


def test_a_compaction_gives_the_compacted_view_and_keeps_every_message(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.append(turn(0))
    store.append(turn(1))
    store.append_compaction(_compaction("first", kept=4))
    store.append(turn(2))
    first = Message.user("", reminders=("first",))
    assert store.load() == [first, *turn(1), *turn(2)]
    store.append_compaction(_compaction("second", kept=2))  # of the view: turn 2's end
    store.append([Message.user("after")])
    report = HistoryStore(tmp_path).load_report()  # a restart
    second = Message.user("", reminders=("second",))
    assert report.messages == [second, *turn(2)[2:], Message.user("after")]
    assert report.full_messages == [*turn(0), *turn(1), *turn(2), Message.user("after")]
    assert [c.summary for c in report.compactions] == [first, second]
    assert not report.torn_tail and report.valid_bytes == report.total_bytes


def test_a_torn_compaction_record_leaves_the_uncompacted_view_whole(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.append(turn(0))
    store.append(turn(1))
    path = store.current_session().path
    intact = path.read_bytes()
    store.append_compaction(_compaction("lost", kept=4))
    whole = path.read_bytes()
    store.close()
    for cut in range(len(intact), len(whole) - 1, 7):  # a crash anywhere in its write
        path.write_bytes(whole[:cut])
        reloaded = HistoryStore(tmp_path)
        assert reloaded.load() == [*turn(0), *turn(1)]
        reloaded.append([Message.user("next")])  # cuts the torn record first
        assert reloaded.load() == [*turn(0), *turn(1), Message.user("next")]
        reloaded.close()
