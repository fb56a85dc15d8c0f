"""Taking checkpoints back: the files of the last one, or of every one from turn N on.

Several checkpoints taken back at once are one apply: each file goes back to its state
before the oldest of them, and is expected to be as the newest of them left it. A file is
then in one of three states:

* as the checkpoints left it: restored (content and mode, or removed if it did not exist);
* already as it was before (an undo a crash interrupted, or the person put it back): left;
* anything else: the person changed it since. It is never overwritten: the undo names it
  and applies nothing, or with ``force`` applies the other files and leaves it as it is.

The files are applied by ``overlay.apply_items``, the accept's own all-or-nothing,
conflict-checked apply with its journal, so a service killed mid-undo is finished or
rolled back by ``overlay.recover`` at the next start. The checkpoints themselves are
dropped only after the files: a record of the undo in progress (``undoing.json``) names
them, and ``settle_undo`` finishes it at the next start (drops them when their files are
back, and rewinds the conversation if that was asked and not yet done).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

import overlay
from coordinator.durable import atomic_write
from coordinator.service.undo.store import (
    Checkpoint,
    CheckpointStore,
    FileState,
    NotAFile,
    read_state,
    restorable,
    same_state,
)
from coordinator.user_state import journal_dir
from overlay.apply import ApplyItem, apply_items
from protocol.wire.control import UndoAction

log = logging.getLogger("specrun.undo")

UNDOING = "undoing.json"
CHANGED_SINCE = "you changed it since"


class Undoing(msgspec.Struct, frozen=True):
    """The undo in progress: its checkpoints and, when the conversation is rewound too,
    the session it is rewound in and how many prompts it keeps."""

    checkpoint_ids: tuple[int, ...]
    files: dict[str, FileState | None]  # what each restored file goes back to
    session_id: str = ""
    keep_prompts: int = -1  # -1: the conversation stays


@dataclass(frozen=True)
class FileUndo:
    """One file of an undo: ``action`` ``restore`` (back to its earlier content or mode),
    ``remove`` (it did not exist), ``recreate`` (it was removed), ``kept`` (the person
    changed it since, or its earlier content was not kept: ``why``) or ``already`` (it is
    as it was before)."""

    path: str
    action: UndoAction
    why: str = ""


@dataclass
class UndoPlan:
    checkpoints: list[Checkpoint]
    files: list[FileUndo] = field(default_factory=list)
    items: list[ApplyItem] = field(default_factory=list)
    targets: dict[str, FileState | None] = field(default_factory=dict)

    @property
    def conflicts(self) -> list[FileUndo]:
        return [f for f in self.files if f.action == "kept"]


def plan_undo(store: CheckpointStore, root: Path, checkpoints: Sequence[Checkpoint]) -> UndoPlan:
    """What taking ``checkpoints`` (oldest first) back does to each of their files now."""
    plan = UndoPlan(list(checkpoints))
    first: dict[str, FileState | None] = {}
    last: dict[str, FileState | None] = {}
    kept: dict[str, bool] = {}
    for checkpoint in checkpoints:
        for entry in checkpoint.files:
            if entry.path not in first:
                first[entry.path] = entry.before
                kept[entry.path] = entry.kept
            last[entry.path] = entry.after
    for rel, before in first.items():
        after = last[rel]
        plan.files.append(_plan_file(store, root, plan, rel, before, after, kept[rel]))
    return plan


def _plan_file(
    store: CheckpointStore,
    root: Path,
    plan: UndoPlan,
    rel: str,
    before: FileState | None,
    after: FileState | None,
    kept: bool,
) -> FileUndo:
    if not restorable(rel):
        return FileUndo(rel, "kept", "not a path undo restores")
    try:
        now = read_state(os.path.join(root, rel))
    except NotAFile:
        return FileUndo(rel, "kept", "it is no longer a regular file")
    if same_state(now, before):
        return FileUndo(rel, "already")
    if not _content_equal(now, after):
        return FileUndo(rel, "kept", CHANGED_SINCE)
    if before is not None and not kept:
        return FileUndo(rel, "kept", "its earlier content was larger than the undo store")
    if before is not None and not store.has_content(before, verify=True):
        return FileUndo(rel, "kept", "its earlier content is no longer in the undo store")
    expected = None if after is None else overlay.Fingerprint(
        after.size, 0, after.sha256, link=after.link or None
    )
    plan.targets[rel] = before
    if before is None:
        plan.items.append(ApplyItem(rel, "", expected, deleted=True))
        return FileUndo(rel, "remove")
    source = str(store.object_path(before.sha256))
    plan.items.append(ApplyItem(rel, source, expected, mode=before.mode))
    return FileUndo(rel, "recreate" if now is None else "restore")


def _content_equal(now: FileState | None, after: FileState | None) -> bool:
    """The file holds what the checkpoint left (its mode aside: a chmod is no edit)."""
    if now is None or after is None:
        return now is None and after is None
    return (now.sha256, now.size, now.link) == (after.sha256, after.size, after.link)


def undoing_path(store: CheckpointStore) -> Path:
    return store.directory / UNDOING


def apply_plan(
    store: CheckpointStore, root: Path, plan: UndoPlan, *, session_id: str = "",
    keep_prompts: int = -1, durable: bool = True,
) -> None:
    """Write the undo record, apply the files (all or nothing; raises
    ``overlay.ConflictError`` or ``overlay.ApplyError`` with nothing changed), then drop
    the checkpoints. The conversation, if asked, is the caller's next step, after which
    it calls ``finish_undo``."""
    record = Undoing(
        tuple(c.id for c in plan.checkpoints), dict(plan.targets), session_id, keep_prompts
    )
    atomic_write(undoing_path(store), msgspec.json.encode(record))
    try:
        if plan.items:
            # The accept's journal directory: the next start's recovery reads only that one.
            apply_items(str(root), plan.items, durable=durable, journal_dir=str(journal_dir(root)))
    except BaseException:
        finish_undo(store, dropped=False)
        raise


def finish_undo(store: CheckpointStore, *, dropped: bool = True) -> None:
    """The undo is complete: its checkpoints dropped (``dropped``), its record removed."""
    path = undoing_path(store)
    if dropped:
        record = read_undoing(store)
        if record is not None:
            store.drop(record.checkpoint_ids)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def read_undoing(store: CheckpointStore) -> Undoing | None:
    try:
        return msgspec.json.decode(undoing_path(store).read_bytes(), type=Undoing)
    except FileNotFoundError:
        return None
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.warning("ignoring an unreadable undo record (%s)", exc)
        with contextlib.suppress(FileNotFoundError):
            undoing_path(store).unlink()
        return None


def undo_happened(root: Path, record: Undoing) -> bool:
    """After ``overlay.recover``: whether an interrupted undo's files went back (the apply
    is all or nothing, so every restored file tells the same)."""
    for rel, before in record.files.items():
        try:
            if not same_state(read_state(os.path.join(root, rel)), before):
                return False
        except NotAFile:
            return False
    return True
