"""Taking checkpoints: the hooks the accept and the main chat call around their writes.

An accept names its files before it applies them (``accept_begins``), and its checkpoint
is closed after the apply, whatever became of it (``accept_ended``: files the apply did
not change are dropped, and with them a checkpoint of a refused accept). A main-chat turn
opens a checkpoint when it starts (``begin_turn``, nothing written yet), adds each file a
write tool is about to write (``before_write``: the file's state before its first write in
the turn), and closes it when the turn ends, completed, failed or cancelled
(``end_turn``). Shell commands a person approved are not checkpointed: what they write is
not known beforehand (docs/cli.md says so).

Without a usable state directory (``UserStateError``) nothing is recorded and ``specrun
undo`` says why.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from coordinator.service.undo.store import Checkpoint, CheckpointStore, restorable
from coordinator.settings import Settings
from coordinator.user_state import UserStateError, project_state_dir
from protocol.rules.tools import WRITE_PATH_ARGUMENTS, WRITE_TOOLS
from protocol.wire.chat import ToolCall

log = logging.getLogger("specrun.undo")

MIB = 1024 * 1024


class Checkpoints:
    """The checkpoints of one project's service."""

    def __init__(self, project_root: Path, settings: Settings) -> None:
        self.root = Path(os.path.realpath(project_root))
        self.store: CheckpointStore | None = None
        self.unavailable = ""
        try:
            directory = project_state_dir(self.root, "undo")
            self.store = CheckpointStore(directory, settings.undo_store_mb * MIB)
        except UserStateError as exc:
            self.unavailable = f"{exc} {exc.hint}"
        except OSError as exc:  # e.g. a file where a directory on the way should be
            self.unavailable = (
                f"specrun's state directory cannot be made ({exc.strerror or exc}: "
                f"{exc.filename}). Set XDG_STATE_HOME to a directory you own."
            )
        if self.unavailable:
            log.warning("undo checkpoints are off: %s", self.unavailable)
        self._turn: Checkpoint | None = None
        #: The session and the number the next turn gets (the main chat sets it).
        self.next_turn: Callable[[], tuple[str, int]] = lambda: ("", 0)

    # -- a main-chat turn ------------------------------------------------------

    def begin_turn(self, session_id: str, turn: int, prompt: str) -> None:
        """A turn starts; its checkpoint is written with its first file."""
        if self.store is not None:
            self._turn = self.store.begin("turn", session_id, turn, prompt)

    async def before_write(self, call: ToolCall) -> None:
        """A write tool is about to run: keep its file's state first."""
        checkpoint, store = self._turn, self.store
        if checkpoint is None or store is None or call.name not in WRITE_TOOLS:
            return
        args = call.args()
        for key in WRITE_PATH_ARGUMENTS.get(call.name, ()):
            raw = args.get(key)
            rel = self._project_rel(raw) if isinstance(raw, str) else None
            if rel is not None:
                try:
                    await asyncio.to_thread(store.take, checkpoint, str(self.root / rel), rel)
                except OSError as exc:  # the state directory's disk is full, say
                    log.warning("undo: could not keep %s before its write (%s)", rel, exc)

    async def end_turn(self) -> Checkpoint | None:
        """The turn ended (however): close its checkpoint."""
        checkpoint, store = self._turn, self.store
        self._turn = None
        if checkpoint is None or store is None or not checkpoint.files:
            return None
        try:
            return await asyncio.to_thread(store.close, checkpoint, self.root)
        except OSError as exc:  # left open: closed at the next start
            log.warning("undo: could not close the checkpoint of turn %d (%s)",
                        checkpoint.turn, exc)
            return None

    def _project_rel(self, raw: str) -> str | None:
        """Where a write tool's path argument writes, as the worker resolves it (links
        followed, relative to the root): its path in the project, or None when the write
        will be refused (outside the project, a path no tool may write)."""
        if not raw or "\0" in raw:
            return None
        real = os.path.realpath(os.path.join(self.root, raw))
        try:
            rel = Path(real).relative_to(self.root).as_posix()
        except ValueError:
            return None
        return rel if restorable(rel) else None

    # -- an accept -------------------------------------------------------------

    async def accept_begins(self, prompt: str, rels: Iterable[str]) -> Checkpoint | None:
        """Before an accept applies ``rels``: their states now, kept."""
        store = self.store
        if store is None:
            return None
        session_id, turn = self.next_turn()
        checkpoint = store.begin("accept", session_id, turn, prompt)

        def take_all() -> None:
            for rel in rels:
                if restorable(rel):
                    store.take(checkpoint, str(self.root / rel), rel, save=False)
            if checkpoint.files:
                store.save(checkpoint)  # one record write before the apply, not one a file

        try:
            await asyncio.to_thread(take_all)
        except OSError as exc:  # the accept goes on; only its undo is lost
            log.warning("undo: no checkpoint for this accept (%s)", exc)
            return None
        return checkpoint

    async def accept_ended(self, checkpoint: Checkpoint | None) -> None:
        if checkpoint is not None and self.store is not None and checkpoint.files:
            try:
                await asyncio.to_thread(self.store.close, checkpoint, self.root)
            except OSError as exc:  # left open: closed at the next start
                log.warning("undo: could not close an accept's checkpoint (%s)", exc)

    # -- at start --------------------------------------------------------------

    def close_left_open(self) -> None:
        """Close the checkpoints a killed service left open (from what is on disk now)."""
        if self.store is not None:
            for closed in self.store.close_open(self.root):
                log.warning("closed undo checkpoint of turn %d left open by a crash",
                            closed.turn)
