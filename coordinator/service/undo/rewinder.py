"""``specrun undo``: list the session's checkpoints, take back the last one, or rewind to
before turn N (files, and with ``conversation`` the chat too).

It runs in the main chat's turn slot, so no turn or accept writes files meanwhile, and it
drops the shown suggestion first: its speculation was made for the files and the
conversation as they were. The files go back through ``file_undo`` (journaled, conflict
checked); the conversation is rewound by starting a new session that holds the prompts
before turn N and their answers (the old session stays on disk, as after ``specrun
reset``), after which the checkpoints of the earlier turns belong to the new session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Literal, Protocol

import msgspec

import overlay
from coordinator.service.undo.checkpoints import Checkpoints
from coordinator.service.undo.file_undo import (
    CHANGED_SINCE,
    FileUndo,
    Undoing,
    apply_plan,
    finish_undo,
    plan_undo,
    read_undoing,
    undo_happened,
)
from coordinator.service.undo.store import Checkpoint, CheckpointStore
from protocol.text.inert_text import quote_name
from protocol.wire.chat import Message
from protocol.wire.control import CheckpointInfo, ErrorReply, UndoFile, UndoReply, UndoRequest

log = logging.getLogger("specrun.undo")


class SessionRecord(Protocol):
    """What a session file read back holds (``chat.history.LoadReport``)."""

    @property
    def full_messages(self) -> list[Message]: ...


class SessionId(Protocol):
    @property
    def session_id(self) -> str: ...


class SessionHistory(Protocol):
    """The main chat's sessions on disk (``chat.history.HistoryStore``)."""

    def current_session(self) -> SessionId: ...

    def new_session(self) -> SessionId: ...

    def append(self, messages: Iterable[Message]) -> None: ...

    def load_report(self, session_id: str | None = None) -> SessionRecord: ...


class OneTurnAtATime(Protocol):
    """The main chat's turn slot (``chat.turn_slot.TurnSlot``)."""

    def held(self) -> AbstractAsyncContextManager[None]: ...


class RewindChat(Protocol):
    """The main chat as an undo drives it."""

    @property
    def session_id(self) -> str: ...

    @property
    def history_store(self) -> SessionHistory: ...

    @property
    def slot(self) -> OneTurnAtATime:
        """One turn at a time: held, no turn or accept runs until it is left."""
        ...

    def reset(self, keep: Sequence[Message] = ()) -> None:
        """A new session that starts with ``keep``."""
        ...


class RewindSuggestions(Protocol):
    """The speculation manager as an undo drives it."""

    def cancel_generation(self) -> None: ...

    async def dismiss(self, reason: Literal["undo"]) -> None: ...

    def new_session(self) -> None: ...


def _files(found: Sequence[FileUndo]) -> tuple[UndoFile, ...]:
    return tuple(UndoFile(f.path, f.action, f.why) for f in found)


class Rewinder:
    def __init__(
        self, checkpoints: Checkpoints, chat: RewindChat, suggestions: RewindSuggestions
    ) -> None:
        self.checkpoints = checkpoints
        self.chat = chat
        self.suggestions = suggestions

    @property
    def root(self) -> Path:
        return self.checkpoints.root

    def session_checkpoints(self, store: CheckpointStore) -> list[Checkpoint]:
        sid = self.chat.session_id
        return [c for c in store.all() if c.session_id == sid and not c.open]

    def _info(self, store: CheckpointStore, checkpoint: Checkpoint) -> CheckpointInfo:
        plan = plan_undo(store, self.root, [checkpoint])
        return CheckpointInfo(
            checkpoint.turn, checkpoint.kind, checkpoint.prompt, checkpoint.created,
            _files(plan.files),
        )

    async def handle(self, req: UndoRequest) -> UndoReply | ErrorReply:
        store = self.checkpoints.store
        if store is None:
            return ErrorReply(req.req_id, "internal",
                              f"Undo is off: {self.checkpoints.unavailable}")
        if req.turn is not None and req.turn < 1:
            return ErrorReply(req.req_id, "bad_request",
                              f"There is no turn {req.turn}: turns are numbered from 1.")
        if req.list_only:
            found = await asyncio.to_thread(self.session_checkpoints, store)
            infos = await asyncio.to_thread(lambda: tuple(self._info(store, c) for c in found))
            usage = await asyncio.to_thread(store.usage)
            return UndoReply(req.req_id, infos, store_bytes=usage.content_bytes)
        async with self.chat.slot.held():
            return await self._undo(store, req)

    async def _undo(self, store: CheckpointStore, req: UndoRequest) -> UndoReply | ErrorReply:
        found = await asyncio.to_thread(self.session_checkpoints, store)
        if req.turn is None:
            chosen = found[-1:]
            if not chosen:
                return ErrorReply(req.req_id, "not_found",
                                  "Nothing to undo: no accept or turn of this session wrote "
                                  "files (`specrun undo --list` shows what can be undone).")
            turn = chosen[0].turn
        else:
            turn = req.turn
            chosen = [c for c in found if c.turn >= turn]
            if not chosen and not req.conversation:
                return ErrorReply(req.req_id, "not_found",
                                  f"Nothing to undo from turn {turn} on: no accept or turn "
                                  "since wrote files (`specrun undo --list` shows them).")
        plan = await asyncio.to_thread(plan_undo, store, self.root, chosen)
        infos = tuple(
            CheckpointInfo(c.turn, c.kind, c.prompt, c.created, ()) for c in chosen
        )
        if plan.conflicts and not req.force:
            names = ", ".join(quote_name(f.path) for f in plan.conflicts)
            one = len(plan.conflicts) == 1
            if all(f.why == CHANGED_SINCE for f in plan.conflicts):
                it = "it" if one else "them"
                why = (f"you changed {names} since; `--force` undoes the rest and leaves {it} "
                       f"as you made {it}")
            else:
                why = (f"{names} cannot be brought back (see why below); `--force` undoes "
                       "the rest")
            return UndoReply(req.req_id, infos, _files(plan.files), False,
                             message=f"Nothing was undone: {why}.")
        self.suggestions.cancel_generation()
        await self.suggestions.dismiss("undo")
        keep = -1
        if req.conversation:
            keep = turn - 1
        try:
            await asyncio.to_thread(
                apply_plan, store, self.root, plan, session_id=self.chat.session_id,
                keep_prompts=keep,
            )
        except overlay.ConflictError as exc:
            return UndoReply(req.req_id, infos, _files(plan.files), False,
                             message=f"Nothing was undone: files changed meanwhile ({exc}).")
        except (overlay.OverlayError, OSError) as exc:
            return ErrorReply(req.req_id, "internal",
                              f"Nothing was undone: the files could not be restored ({exc}).")
        rewound = False
        if keep >= 0:
            old = self.chat.session_id
            full = await asyncio.to_thread(
                lambda: self.chat.history_store.load_report(old).full_messages)
            self.chat.reset(_before_prompt(full, keep))
            await asyncio.to_thread(_move_checkpoints, store, old, self.chat.session_id, keep)
            self.suggestions.new_session()
            rewound = True
        await asyncio.to_thread(finish_undo, store)
        return UndoReply(
            req.req_id, infos, _files(plan.files), True, rewound,
            message=_summary(turn, chosen, plan.files, rewound),
        )


def _summary(turn: int, chosen: Sequence[Checkpoint], files: Sequence[FileUndo],
             rewound: bool) -> str:
    done = [f for f in files if f.action in ("restore", "remove", "recreate")]
    kept = [f for f in files if f.action == "kept"]
    what = (f"turn {chosen[0].turn}" if len(chosen) == 1
            else f"turns {chosen[0].turn} to {chosen[-1].turn}" if chosen else "no file")
    parts = [f"Undid {what}: {len(done)} file{'s' if len(done) != 1 else ''} back as before"]
    if kept:
        parts.append(f"{len(kept)} left as you changed {'them' if len(kept) > 1 else 'it'}")
    if rewound:
        parts.append(f"the conversation now ends before turn {turn}")
    return "; ".join(parts) + "."


def rewind_conversation(
    history: SessionHistory, session_id: str, keep_prompts: int, store: CheckpointStore
) -> bool:
    """At start (no chat yet): a new session holding the first ``keep_prompts`` prompts of
    ``session_id`` and what followed each (every message on disk, compactions aside); the
    checkpoints of those turns move to it. False when the session is no longer current
    (already rewound). A running service does the same through ``MainChat.reset``."""
    if history.current_session().session_id != session_id:
        return False
    messages = _before_prompt(history.load_report(session_id).full_messages, keep_prompts)
    new = history.new_session()
    history.append(messages)
    _move_checkpoints(store, session_id, new.session_id, keep_prompts)
    return True


def _before_prompt(messages: Sequence[Message], keep_prompts: int) -> list[Message]:
    prompts = 0
    for index, message in enumerate(messages):
        if message.role == "user":
            prompts += 1
            if prompts > keep_prompts:
                return list(messages[:index])
    return list(messages)


def _move_checkpoints(store: CheckpointStore, old: str, new: str, keep_prompts: int) -> None:
    for checkpoint in store.all():
        if checkpoint.session_id == old and checkpoint.turn <= keep_prompts:
            store.save(msgspec.structs.replace(checkpoint, session_id=new))


def settle_undo(checkpoints: Checkpoints, history: SessionHistory) -> str | None:
    """At start, after ``overlay.recover``: finish an undo a killed service left, and close
    the checkpoints it left open. What was done, or None."""
    store = checkpoints.store
    if store is None:
        return None
    outcome = None
    try:
        record = read_undoing(store)
        if record is not None:
            outcome = _settle(checkpoints.root, store, history, record)
            log.warning("an interrupted undo was settled: %s", outcome)
        checkpoints.close_left_open()
    except OSError as exc:  # the service starts anyway; the next start tries again
        log.warning("undo: could not settle the checkpoints (%s)", exc)
    return outcome


def _settle(root: Path, store: CheckpointStore, history: SessionHistory, record: Undoing) -> str:
    if not undo_happened(root, record):
        finish_undo(store, dropped=False)
        return "its files were not restored; the checkpoints stay"
    outcome = "its files were restored"
    if record.keep_prompts >= 0:
        current = history.current_session()
        if current.session_id == record.session_id:
            rewind_conversation(history, record.session_id, record.keep_prompts, store)
            outcome += " and the conversation rewound"
        elif not history.load_report().full_messages and record.keep_prompts > 0:
            # Killed between the new session and its messages: they go in now.
            old = history.load_report(record.session_id).full_messages
            history.append(_before_prompt(old, record.keep_prompts))
            _move_checkpoints(store, record.session_id, current.session_id,
                              record.keep_prompts)
            outcome += " and the conversation rewound"
    with contextlib.suppress(OSError):
        finish_undo(store)
    return outcome
