"""Files and history agree even if the coordinator dies in the middle of an accept.

An accept applies the overlay's files (journaled by ``overlay``: all or nothing, finished
or undone at the next start) and then appends the speculated messages to the history.
A crash between the two would leave the files on disk without the turn that made them.
So before applying, the accept writes this record: the messages, and a digest of every
file's new content. At the next start (after ``overlay.recover``) the record is
settled: if the real files hold exactly the new contents, the apply happened and the
messages are appended (unless they already were); otherwise nothing was applied and the
record is dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import msgspec

from coordinator.durable import atomic_write
from coordinator.user_state import pending_accept_path
from overlay.fingerprint import hash_regular_file
from protocol.rules.protected import path_problem
from protocol.wire.chat import Message

log = logging.getLogger("specrun.accept")


#: The digest recorded for a file the accept deletes: applied when the file is gone.
GONE = ""
#: What a link the accept creates is recorded as: this mark, then its target (applied when
#: that link is there; no sha256 starts with it).
LINK_MARK = "->"


class PendingAccept(msgspec.Struct, frozen=True):
    messages: tuple[Message, ...]
    # relative path -> sha256 of the content the accept writes, GONE, or LINK_MARK + target
    files: dict[str, str]


def record_path(project_root: Path) -> Path:
    return pending_accept_path(project_root)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_pending(project_root: Path, record: PendingAccept) -> None:
    path = record_path(project_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, msgspec.json.encode(record))


def clear_pending(project_root: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        record_path(project_root).unlink()


def _applied_file(project_root: Path, rel: str) -> Path | None:
    """``rel`` below the root if it is a plain relative path reached through real
    directories, else None."""
    if path_problem(rel) is not None:
        return None
    root = os.path.realpath(project_root)
    parent = os.path.dirname(os.path.join(root, rel))
    if os.path.realpath(parent) != parent:
        return None
    return Path(root, rel)


class ChatHistory(Protocol):
    """The main chat's history as the settling of an accept reads and extends it (the
    chat's ``HistoryStore``; named here so this part never imports the chat, above it)."""

    def load(self) -> list[Message]: ...

    def append(self, messages: Iterable[Message]) -> None: ...


def settle_pending(project_root: Path, history: ChatHistory) -> str | None:
    """Finish an accept a crash interrupted; returns what was done, or None."""
    path = record_path(project_root)
    try:
        record = msgspec.json.decode(path.read_bytes(), type=PendingAccept)
    except FileNotFoundError:
        return None
    except (msgspec.DecodeError, msgspec.ValidationError, OSError) as exc:
        log.warning("ignoring an unreadable pending-accept record (%s)", exc)
        clear_pending(project_root)
        return None
    # The record is a file in the project, so a cloned repository can ship one: only a
    # record naming plain files that an apply could have written counts (no absolute path,
    # no `..`, no link on the way, a regular file: "/dev/zero" made the start read without
    # end).
    applied = True
    for rel, sha in record.files.items():
        target = _applied_file(project_root, rel)
        if target is None:
            applied = False
        elif sha == GONE:
            applied = applied and not os.path.lexists(target)
        elif sha.startswith(LINK_MARK):
            try:
                applied = applied and os.readlink(target) == sha[len(LINK_MARK):]
            except OSError:
                applied = False
        else:
            try:
                found = hash_regular_file(str(target))  # never through a last link
            except OSError:
                found = None
            applied = applied and found is not None and found[1] == sha
    outcome = "files were not applied; nothing to add"
    if applied:
        loaded = history.load()
        if loaded[-len(record.messages) :] != list(record.messages):
            history.append(record.messages)
            outcome = f"files were applied; added the {len(record.messages)} accepted message(s)"
        else:
            outcome = "files and history were both complete"
    clear_pending(project_root)
    log.warning("an interrupted accept was settled: %s", outcome)
    return outcome
