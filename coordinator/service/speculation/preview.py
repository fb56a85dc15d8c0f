"""A speculation seen before Tab: what it did so far, and what Tab would do with its files.

``specrun suggestion --transcript`` shows the model's text, its tool calls and their results
(from the worker's events while it runs, from its outcome once it ended). ``specrun diff``
shows, per file, the applied-set computation's answer (``applied_set``: the same checks and
classification accept uses) with the unified diff of the real file against the
speculation's; a running speculation shows the files it wrote so far.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_mode
import time
from dataclasses import dataclass, field
from pathlib import Path

from coordinator.service.speculation.applied_set import RefusedReport, SpeculationFiles
from coordinator.service.speculation.text_diff import unified_diff
from coordinator.service.speculation.transcript import render_transcript
from coordinator.settings import Settings
from overlay.kernel.beneath import open_beneath
from protocol.wire.chat import Message, ToolCall, ToolResult
from protocol.wire.control import FileChange, FileDiff, TranscriptEntry
from protocol.wire.work import WrittenFile

#: A file larger than this (either side) is named with its size and hash, not diffed.
MAX_DIFF_BYTES = 1 << 20
#: Seconds the diffs of one preview may take together (the client waits 30): a file whose
#: diff is not done by then is named with its size and hash, and its diff is stopped.
DIFF_BUDGET_S = 8.0
_BINARY_PROBE = 8192
_TEXT_CONTROLS = frozenset(b"\t\n\x0c\r")
#: bash reads this much of a file to decide whether it is a binary it will not run.
_BASH_PROBE = 80


@dataclass
class _Turn:
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    results: dict[str, ToolResult] = field(default_factory=dict)


@dataclass
class Progress:
    """A running speculation as its worker's events told it: per model turn, the text and
    the tool calls with the results that came back so far, and its files so far."""

    turns: dict[int, _Turn] = field(default_factory=dict)
    written: dict[str, WrittenFile] = field(default_factory=dict)

    def text(self, turn: int, text: str) -> None:
        self.turns.setdefault(turn, _Turn()).text = text

    def call(self, turn: int, call: ToolCall) -> None:
        self.turns.setdefault(turn, _Turn()).calls.append(call)

    def result(self, turn: int, result: ToolResult) -> None:
        self.turns.setdefault(turn, _Turn()).results[result.call_id] = result

    def entries(self, suggestion: str, *, full: bool = False) -> list[TranscriptEntry]:
        """As an accept would show it; a call still running says so."""
        messages: list[Message] = []
        for number in sorted(self.turns):
            turn = self.turns[number]
            messages.append(Message.assistant(turn.text, tuple(turn.calls)))
            done = [turn.results[c.id] for c in turn.calls if c.id in turn.results]
            if done:
                messages.append(Message.tool(tuple(done)))
        entries = render_transcript(suggestion, messages, full=full)
        finished = {r.call_id for t in self.turns.values() for r in t.results.values()}
        calls = [c for t in (self.turns[n] for n in sorted(self.turns)) for c in t.calls]
        tool_entries = [i for i, e in enumerate(entries) if e.kind == "tool"]
        for index, call in zip(tool_entries, calls, strict=False):
            if call.id not in finished:
                entry = entries[index]
                entries[index] = TranscriptEntry("tool", "", entry.tool, entry.args, "running")
        return entries


def transcript_of(
    suggestion: str, messages: tuple[Message, ...] | None, progress: Progress,
    *, full: bool = False,
) -> list[TranscriptEntry]:
    """The speculation's transcript: from its outcome when it ended, else from its events;
    ``full``: tool results whole."""
    if messages is not None:
        return render_transcript(suggestion, list(messages), full=full)
    return progress.entries(suggestion, full=full)


def preview_files(
    root: str, overlay_dir: str, written: dict[str, WrittenFile], settings: Settings, stat: bool
) -> tuple[tuple[FileDiff, ...], str, tuple[str, ...]]:
    """Every file Tab would change now, with its diff (none with ``stat``), '' or the
    sentence saying why Tab would apply nothing, and the symlinks Tab would not create
    (``name -> target: why``)."""
    try:
        files = SpeculationFiles(root, overlay_dir, written, settings)
    except RefusedReport as exc:
        return (), f"Tab would apply nothing: {exc.reason}.", ()
    applied = files.preview()
    real_root = files.root
    deadline = time.monotonic() + DIFF_BUDGET_S
    return tuple(
        file_diff(real_root, overlay_dir, change, stat=stat or change.summarized,
                  deadline=deadline)
        for change in applied.changes
    ), "", applied.links_held


@dataclass(frozen=True)
class _Side:
    """One version of a file: its bytes (None when over ``MAX_DIFF_BYTES`` or not a plain
    file), its size and sha256 (-1 and '' when not a plain file), whether it is
    executable."""

    data: bytes | None
    size: int = 0
    sha256: str = hashlib.sha256(b"").hexdigest()
    executable: bool = False


_EMPTY = _Side(b"")


def file_diff(root: str, overlay_dir: str, change: FileChange, *, stat: bool,
              deadline: float | None = None) -> FileDiff:
    """The unified diff of ``change``'s real file against the speculation's (counts only
    with ``stat``); the overlay side is opened with no symlink followed. A file that
    would run (bash would run it, a shebang, an exec bit, a runs-later rule) is never
    called binary: its text is shown, odd bytes escaped, since Tab applies all of it. A
    symlink Tab creates has no content to diff: its line (``name -> target``) is all
    there is."""
    if change.link:
        return FileDiff(change)
    before = _EMPTY if change.status == "created" else _read(root, change.path)
    after = _EMPTY if change.status == "deleted" else _read(overlay_dir, change.path)
    if before.data is None or after.data is None:
        return _unshown(change, after)
    runs = change.runs_later or before.executable or after.executable
    if _binary(before.data, runs) or _binary(after.data, runs):
        return FileDiff(change, binary=True)
    a = "/dev/null" if change.status == "created" else f"a/{change.path}"
    b = "/dev/null" if change.status == "deleted" else f"b/{change.path}"
    until = deadline if deadline is not None else time.monotonic() + DIFF_BUDGET_S
    text = unified_diff(before.data, after.data, a, b, until, project=Path(root))
    if text is None:
        return _unshown(change, after)
    lines = text.splitlines()[2:]
    added = sum(1 for line in lines if line.startswith("+"))
    removed = sum(1 for line in lines if line.startswith("-"))
    return FileDiff(change, "" if stat else text, added=added, removed=removed)


def _unshown(change: FileChange, after: _Side) -> FileDiff:
    """Too large (or too slow) to diff: named with what Tab would write, its size and hash."""
    return FileDiff(change, too_large=True, size=after.size, sha256=after.sha256)


def _binary(data: bytes, runs: bool) -> bool:
    """A NUL byte near the start (git's rule) among many other control bytes, in a file
    nothing would run. Calling a file binary shows no line of it, so it must really be
    one: a file merely not UTF-8, or a script with a NUL block after its first line (bash
    runs it line by line), is text, its odd bytes shown as escapes."""
    if runs or data.startswith(b"#!") or _bash_would_run(data):
        return False
    probe = data[:_BINARY_PROBE]
    controls = sum(1 for byte in probe if byte < 0x20 and byte not in _TEXT_CONTROLS)
    return controls * 10 > len(probe)


def _bash_would_run(data: bytes) -> bool:
    """bash's own test (``check_binary_file``): it refuses an ELF file, and a file with a
    NUL before the end of its first line (its first two after ``#!``) within the first 80
    bytes; any other file it runs as a script, whatever control bytes or NUL blocks follow
    (a PNG's first line holds no NUL: bash would run it, so it is shown, escaped)."""
    probe = data[:_BASH_PROBE]
    if probe.startswith(b"\x7fELF"):
        return False
    lines = 2 if probe.startswith(b"#!") else 1
    for byte in probe:
        if byte == 0x0A:
            lines -= 1
            if lines == 0:
                return True
        elif byte == 0:
            return False
    return True


def _read(directory: str, rel: str) -> _Side:
    """``directory/rel`` (no symlink followed): empty when missing; its bytes only up to
    ``MAX_DIFF_BYTES``, its size and hash always (what Tab writes, even unshown)."""
    try:
        fd = open_beneath(directory, rel)
    except FileNotFoundError:
        return _EMPTY
    except OSError:
        return _Side(None, -1, "")
    try:
        info = os.fstat(fd)
        if not stat_mode.S_ISREG(info.st_mode):
            return _Side(None, -1, "")
        sha = hashlib.sha256()
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 1 << 16):
            sha.update(chunk)
            total += len(chunk)
            if total <= MAX_DIFF_BYTES:
                chunks.append(chunk)
        data = b"".join(chunks) if total <= MAX_DIFF_BYTES else None
        return _Side(data, total, sha.hexdigest(), bool(info.st_mode & 0o111))
    finally:
        os.close(fd)
