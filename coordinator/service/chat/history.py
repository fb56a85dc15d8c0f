"""Append-only, crash-safe persistence of the main chat history.

One file per session, ``<state>/sessions/<session-id>.jsonl`` in specrun's per-user state
directory (``coordinator.user_state``: outside the project, so a repository cannot ship a
session whose turns the model would take for the person's own)::

    {"format":"specrun-session/1","session_id":"…","created":1715000000.0}   header (line 1)
    {"role":"user","text":"…"}                                               one Message per line
    {"batch":2}                                                               marks a multi-message
    {"role":"assistant",…}                                                    append: the next 2
    {"role":"tool",…}                                                         lines go together
    {"compaction":{"summary":{…},"kept":6,…}}                                   a compaction

A compaction record replaces everything before it except the last ``kept`` messages of the
view it compacted with its ``summary`` message: ``load`` returns that compacted view
(summary, kept messages, everything appended after), while every message stays in the file
(``load_report(...).full_messages``). A later compaction's summary covers the earlier one.

Guarantees:

* ``append`` returns only after the bytes are written, flushed and fsynced; an answered turn that
  was appended survives a crash or SIGKILL of the coordinator.
* A multi-message ``append`` is all-or-nothing: its lines are preceded by a batch marker and
  ``load`` drops a batch that is not complete (a crash in the middle of the write).
* ``load`` never fails because of a crash: a torn last line, an incomplete batch or a
  corrupt line is skipped (with a log line). Before the next append the torn tail is cut off,
  so new records never get glued to a fragment.
* ``sessions/CURRENT`` names the current session, so a restarted service reloads it.
* A compaction is one line, appended like the rest: a crash before its fsync leaves the
  uncompacted view, whole; a torn record is cut off like any torn line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from coordinator.durable import atomic_write
from coordinator.user_state import sessions_dir as user_sessions_dir
from protocol.wire.chat import Message

log = logging.getLogger(__name__)

FORMAT = "specrun-session/1"
CURRENT_FILE = "CURRENT"
_BATCH_PREFIX = b'{"batch":'
_COMPACTION_PREFIX = b'{"compaction":'


class SessionHeader(msgspec.Struct, frozen=True):
    session_id: str
    created: float
    format: str = FORMAT


class _BatchMarker(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    batch: int


class CompactionRecord(msgspec.Struct, frozen=True):
    """One compaction: ``summary`` stands for every message of the view before the last
    ``kept``. ``summarized`` (how many messages it replaced), the estimated request
    tokens before and after, and ``by`` (``model``: the fast model wrote it; ``fallback``:
    built without a model after the model failed) are for ``status`` and diagnostics."""

    summary: Message
    kept: int
    summarized: int
    tokens_before: int
    tokens_after: int
    created: float
    by: str = "model"


class _CompactionLine(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    compaction: CompactionRecord


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    path: Path
    created: float

    @property
    def session_id(self) -> str:
        return self.id


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What ``load`` found, for diagnostics and tests."""

    messages: list[Message]  # the view a request sends: compacted, if it was
    valid_bytes: int  # length of the prefix made of complete, accepted records
    total_bytes: int
    skipped_lines: int  # corrupt lines in the middle and records of dropped batches
    torn_tail: bool  # the file ended in a partial line or an incomplete batch
    full_messages: list[Message] = field(default_factory=list)  # every message on disk
    compactions: list[CompactionRecord] = field(default_factory=list)


_ENC = msgspec.json.Encoder()
_MSG_DEC = msgspec.json.Decoder(Message)
_HEADER_DEC = msgspec.json.Decoder(SessionHeader)
_MARKER_DEC = msgspec.json.Decoder(_BatchMarker)
_COMPACTION_DEC = msgspec.json.Decoder(_CompactionLine)


def new_session_id(now: float | None = None) -> str:
    """Sortable by creation time: ``20260515-101112-123456-a1b2c3``."""
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    micros = int((now % 1) * 1_000_000)
    return f"{stamp}-{micros:06d}-{secrets.token_hex(3)}"


def parse_session_bytes(data: bytes) -> tuple[SessionHeader | None, LoadReport]:
    """Decode a session file's bytes; never raises."""
    return _SessionReader(data).read()


class _SessionReader:
    """One pass over a session file's bytes. ``pos`` is where the next line starts;
    ``valid_end`` the end of the last complete, accepted record (a torn tail starts there)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.valid_end = 0
        self.messages: list[Message] = []  # every message, in order
        self.compactions: list[CompactionRecord] = []
        self.view_start = 0  # where the messages after the last compaction's summary begin
        self.skipped = 0

    def read(self) -> tuple[SessionHeader | None, LoadReport]:
        header = self._header()
        torn = False
        size = len(self.data)
        while self.pos < size:
            item = self._next_line()
            if item is None:  # partial last line (the write was cut off)
                torn = True
                break
            line, end = item
            if not line.strip():
                self.pos = self.valid_end = end
            elif line.startswith(_COMPACTION_PREFIX):
                self._compaction(line, end)
            elif line.startswith(_BATCH_PREFIX):
                self._batch(line, end)
            else:
                self._message(line, end)
        torn = torn or self.data[self.valid_end :].strip() != b""
        messages = self.messages
        view = messages
        if self.compactions:
            view = [self.compactions[-1].summary, *messages[self.view_start :]]
        report = LoadReport(
            view, self.valid_end, size, self.skipped, torn, messages, self.compactions
        )
        return header, report

    def _next_line(self) -> tuple[bytes, int] | None:
        """(line without newline, end offset) of the line at ``pos``; None at a torn end."""
        nl = self.data.find(b"\n", self.pos)
        if nl < 0:
            return None
        return self.data[self.pos : nl], nl + 1

    def _header(self) -> SessionHeader | None:
        first = self._next_line()
        if first is None:
            return None
        try:
            header = _HEADER_DEC.decode(first[0])
        except msgspec.DecodeError:
            log.warning("session file has no valid header; reading its messages anyway")
            return None
        self.pos = self.valid_end = first[1]
        return header

    def _compaction(self, line: bytes, end: int) -> None:
        try:
            record = _COMPACTION_DEC.decode(line).compaction
        except msgspec.DecodeError:
            self.skipped += 1
            log.warning("skipping a corrupt compaction record at byte %d", self.pos)
        else:
            self.compactions.append(record)
            kept = max(0, record.kept)
            self.view_start = max(self.view_start, len(self.messages) - kept)
            self.valid_end = end
        self.pos = end

    def _batch(self, line: bytes, end: int) -> None:
        """A batch marker and the messages it announces: all of them, or none (a crash
        in the middle of the append)."""
        self.pos = end
        try:
            count = _MARKER_DEC.decode(line).batch
        except msgspec.DecodeError:
            self.skipped += 1
            return
        batch: list[Message] = []
        while len(batch) < count:
            inner = self._next_line()
            if inner is None or inner[0].startswith(_BATCH_PREFIX):
                break
            try:
                batch.append(_MSG_DEC.decode(inner[0]))
            except msgspec.DecodeError:
                break
            self.pos = inner[1]
        if len(batch) == count:
            self.messages.extend(batch)
            self.valid_end = self.pos
        else:
            self.skipped += len(batch) + 1
            log.warning(
                "dropping an incomplete batch of %d message(s) (crash mid-append)", count
            )

    def _message(self, line: bytes, end: int) -> None:
        try:
            self.messages.append(_MSG_DEC.decode(line))
            self.valid_end = end
        except msgspec.DecodeError:
            self.skipped += 1
            log.warning("skipping a corrupt history line at byte %d", self.pos)
        self.pos = end


class HistoryStore:
    """The main chat's persisted history for one project."""

    def __init__(
        self,
        project_root: str | os.PathLike[str],
        *,
        sessions_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.project_root = Path(project_root).resolve()
        self.sessions_dir = (
            Path(sessions_dir).resolve()
            if sessions_dir is not None
            else user_sessions_dir(self.project_root)
        )
        self._lock = threading.Lock()
        self._session: Session | None = None
        self._fd: int | None = None
        self._needs_repair = True

    # -- sessions

    def current_session(self) -> Session:
        """The session being appended to: the one named by ``CURRENT``, else the newest file,
        else a new one."""
        with self._lock:
            if self._session is None:
                self._session = self._find_current() or self._create_session()
            return self._session

    def new_session(self) -> Session:
        """Start a fresh session (``specrun reset``); the old file stays on disk."""
        with self._lock:
            self._close_fd()
            self._session = self._create_session()
            return self._session

    def list_sessions(self) -> list[Session]:
        out = []
        for path in sorted(self.sessions_dir.glob("*.jsonl")):
            header = self._read_header(path)
            if header is not None:
                out.append(Session(header.session_id, path, header.created))
        return out

    def _find_current(self) -> Session | None:
        pointer = self.sessions_dir / CURRENT_FILE
        with contextlib.suppress(OSError, UnicodeDecodeError):
            sid = pointer.read_text("utf-8").strip()
            if sid and "/" not in sid and sid not in (".", ".."):
                path = self.sessions_dir / f"{sid}.jsonl"
                header = self._read_header(path)
                if header is not None:
                    return Session(header.session_id, path, header.created)
        sessions = self.list_sessions()
        return max(sessions, key=lambda s: (s.created, s.id)) if sessions else None

    def _read_header(self, path: Path) -> SessionHeader | None:
        try:
            with path.open("rb") as fh:
                first = fh.readline(64 * 1024)
            return _HEADER_DEC.decode(first.rstrip(b"\n"))
        except (OSError, msgspec.DecodeError):
            return None

    def _create_session(self) -> Session:
        self.sessions_dir.mkdir(parents=True, exist_ok=True)
        while True:
            created = time.time()
            sid = new_session_id(created)
            path = self.sessions_dir / f"{sid}.jsonl"
            header = _ENC.encode(SessionHeader(session_id=sid, created=created)) + b"\n"
            if atomic_write(path, header, replace=False):
                break
        atomic_write(self.sessions_dir / CURRENT_FILE, sid.encode() + b"\n", replace=True)
        self._needs_repair = False
        return Session(sid, path, created)

    # -- writing

    def append(self, messages: Iterable[Message]) -> None:
        """Persist ``messages`` (write + fsync), all-or-nothing; returns once durable."""
        batch = list(messages)
        if not batch:
            return
        lines = [_ENC.encode(m) for m in batch]
        data = b"\n".join(lines) + b"\n"
        if len(batch) > 1:
            data = _ENC.encode(_BatchMarker(len(batch))) + b"\n" + data
        self._write(data)

    def append_compaction(self, record: CompactionRecord) -> None:
        """Persist a compaction (one line, write + fsync); from then on ``load`` returns
        the compacted view. Returns once durable."""
        self._write(_ENC.encode(_CompactionLine(record)) + b"\n")

    def _write(self, data: bytes) -> None:
        with self._lock:
            if self._session is None:
                self._session = self._find_current() or self._create_session()
            fd = self._open_fd()
            if self._needs_repair:
                self._repair(fd)
            self._needs_repair = True  # until this write is complete and synced
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
            self._needs_repair = False

    def _open_fd(self) -> int:
        if self._fd is None:
            assert self._session is not None
            self._fd = os.open(self._session.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            self._needs_repair = True
        return self._fd

    def _repair(self, fd: int) -> None:
        """Cut off a torn tail left by a crash so the next record starts on a clean line."""
        assert self._session is not None
        data = self._session.path.read_bytes()
        _, report = parse_session_bytes(data)
        if report.valid_bytes < len(data):
            log.warning(
                "history %s: cutting %d torn byte(s) left by an interrupted append",
                self._session.path.name,
                len(data) - report.valid_bytes,
            )
            os.ftruncate(fd, report.valid_bytes)
            os.fsync(fd)

    def _close_fd(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        with self._lock:
            self._close_fd()

    # -- reading

    def load(self, session_id: str | None = None) -> list[Message]:
        """The messages of the current (or the given) session; never fails because of a crash."""
        return self.load_report(session_id).messages

    def load_report(self, session_id: str | None = None) -> LoadReport:
        if session_id is None:
            path = self.current_session().path
        else:
            path = self.sessions_dir / f"{session_id}.jsonl"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return LoadReport([], 0, 0, 0, False)
        _, report = parse_session_bytes(data)
        return report

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
