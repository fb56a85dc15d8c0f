"""``specrun undo``'s decisions over a real store, real files, the real history store and
turn slot; the chat's reset and the speculation manager are small stand-ins that note what
they were asked."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from coordinator.service.chat.history import HistoryStore
from coordinator.service.chat.turn_slot import TurnSlot
from coordinator.service.undo import Checkpoints, Rewinder
from coordinator.settings import Settings
from protocol.wire.chat import Message
from protocol.wire.control import ErrorReply, UndoReply, UndoRequest


class Chat:
    def __init__(self, root: Path) -> None:
        self.history_store = HistoryStore(root)
        self.session_id = self.history_store.current_session().session_id
        self.slot = TurnSlot()

    def reset(self, keep: Sequence[Message] = ()) -> None:
        self.history_store.new_session()
        self.history_store.append(keep)
        self.session_id = self.history_store.current_session().session_id


class Suggestions:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def cancel_generation(self) -> None:
        self.asked.append("cancel_generation")

    async def dismiss(self, reason: str) -> None:
        self.asked.append(f"dismiss:{reason}")

    def new_session(self) -> None:
        self.asked.append("new_session")


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Rewinder, Chat, Suggestions]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    chat, suggestions = Chat(root), Suggestions()
    return Rewinder(Checkpoints(root, Settings()), chat, suggestions), chat, suggestions


def _turn(rewinder: Rewinder, chat: Chat, turn: int, text: str) -> None:
    """A turn that asked ``text`` and wrote it into a.txt, as the main chat records it."""
    checkpoints = rewinder.checkpoints
    chat.history_store.append([Message.user(f"turn {turn}"), Message.assistant("ok")])
    checkpoints.begin_turn(chat.session_id, turn, f"turn {turn}")
    store = checkpoints.store
    assert store is not None and checkpoints._turn is not None
    store.take(checkpoints._turn, str(checkpoints.root / "a.txt"), "a.txt")
    (checkpoints.root / "a.txt").write_text(text)
    asyncio.run(checkpoints.end_turn())


def _undo(rewinder: Rewinder, **fields: object) -> UndoReply | ErrorReply:
    return asyncio.run(rewinder.handle(UndoRequest(req_id=1, **fields)))  # type: ignore[arg-type]


def test_turn_zero_is_refused_in_one_sentence(world: tuple[Rewinder, Chat, Suggestions]) -> None:
    rewinder, _chat, suggestions = world
    reply = _undo(rewinder, turn=0, conversation=True)
    assert isinstance(reply, ErrorReply) and reply.code == "bad_request"
    assert reply.message == "There is no turn 0: turns are numbered from 1."
    assert suggestions.asked == []


def test_nothing_to_undo_says_so_and_drops_no_suggestion(
    world: tuple[Rewinder, Chat, Suggestions],
) -> None:
    rewinder, _chat, suggestions = world
    reply = _undo(rewinder)
    assert isinstance(reply, ErrorReply) and reply.code == "not_found"
    assert suggestions.asked == []


def test_a_refused_undo_keeps_the_suggestion_and_an_undo_drops_it_first(
    world: tuple[Rewinder, Chat, Suggestions],
) -> None:
    rewinder, _chat, suggestions = world
    root = rewinder.root
    _turn(rewinder, _chat, 1, "two\n")
    (root / "a.txt").write_text("mine\n")
    refused = _undo(rewinder)
    assert isinstance(refused, UndoReply) and not refused.undone
    assert refused.message.startswith("Nothing was undone: you changed a.txt since")
    assert suggestions.asked == []
    (root / "a.txt").write_text("two\n")
    done = _undo(rewinder)
    assert isinstance(done, UndoReply) and done.undone
    assert (root / "a.txt").read_text() == "one\n"
    assert suggestions.asked == ["cancel_generation", "dismiss:undo"]


def test_undo_n_with_the_conversation_keeps_the_turns_before_n_and_their_checkpoints(
    world: tuple[Rewinder, Chat, Suggestions],
) -> None:
    rewinder, chat, suggestions = world
    for turn, text in ((1, "two\n"), (2, "three\n"), (3, "four\n")):
        _turn(rewinder, chat, turn, text)
    old = chat.session_id
    done = _undo(rewinder, turn=2, conversation=True)
    assert isinstance(done, UndoReply) and done.undone and done.conversation_rewound
    assert [c.turn for c in done.checkpoints] == [2, 3]
    assert (rewinder.root / "a.txt").read_text() == "two\n"
    assert chat.session_id != old
    kept = [m.text for m in chat.history_store.load() if m.role == "user"]
    assert kept == ["turn 1"]
    listed = _undo(rewinder, list_only=True)
    assert isinstance(listed, UndoReply) and [c.turn for c in listed.checkpoints] == [1]
    assert "new_session" in suggestions.asked
