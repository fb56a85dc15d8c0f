"""``undo``: its server half over the service's port (a real ``Rewinder`` on real files)
and its client half's exit codes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

from coordinator.commands import undo
from coordinator.service.undo import Checkpoints, Rewinder
from coordinator.settings import Settings
from protocol.wire.control import ControlReply, ControlRequest, ErrorReply, UndoReply, UndoRequest
from tests.coordinator.commands.support import Deps, serve
from tests.coordinator.service.undo.test_rewinder import Chat, Suggestions


@dataclass
class UndoDeps(Deps):
    undo: Any = None


def test_undo_answers_with_what_the_rewinder_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = tmp_path / "project"
    root.mkdir()
    deps = UndoDeps(undo=Rewinder(Checkpoints(root, Settings()), Chat(root), Suggestions()))
    serve(deps, undo.serve, UndoRequest(req_id=7, list_only=True))
    serve(deps, undo.serve, UndoRequest(req_id=8))
    listed, nothing = deps.replies.replies
    assert listed == UndoReply(7, (), store_bytes=0)
    assert isinstance(nothing, ErrorReply) and nothing.code == "not_found"
    assert nothing.message.startswith("Nothing to undo")


@dataclass
class Client:
    """The command line as the client half sees it, answering with ``reply``."""

    reply: ControlReply
    sent: list[ControlRequest] = field(default_factory=list)
    shown: list[ControlReply] = field(default_factory=list)
    as_json: bool = False
    can_confirm: bool = False

    def next_id(self) -> int:
        return 1

    def request(self, request: ControlRequest, timeout_s: float | None = None) -> ControlReply:
        assert timeout_s == float("inf")  # an undo waits for a running turn
        self.sent.append(request)
        return self.reply

    def show(self, reply: ControlReply) -> None:
        self.shown.append(reply)

    def note(self, text: str) -> None: ...

    def turn(self, request: Any) -> int:
        raise AssertionError("undo streams no turn")

    def usage_error(self, message: str) -> NoReturn:
        raise ValueError(message)


ARGS = {"turn": None, "list_only": False, "conversation": False, "force": False}


@pytest.mark.parametrize(("undone", "list_only", "code"), [
    (True, False, None), (False, False, 1), (False, True, None)])
def test_the_client_half_exits_1_only_when_a_changed_file_stopped_the_undo(
    undone: bool, list_only: bool, code: int | None
) -> None:
    client = Client(UndoReply(1, (), undone=undone, message="m"))
    assert undo.run(client, {**ARGS, "list_only": list_only}) == code  # type: ignore[arg-type]
    assert client.sent == [UndoRequest(req_id=1, list_only=list_only)]
    assert client.shown == [client.reply]


def test_turn_zero_is_a_usage_error_and_sends_nothing() -> None:
    client = Client(UndoReply(1, ()))
    with pytest.raises(ValueError, match="turns are numbered from 1"):
        undo.run(client, {**ARGS, "turn": 0})  # type: ignore[arg-type]
    assert client.sent == []
