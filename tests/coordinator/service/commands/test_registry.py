"""The service's handler registry, made from the command declarations: every request type
of the wire has exactly one command, a second one for a type is refused, and a request
reaches its command by its type."""

from __future__ import annotations

import typing

import pytest

from coordinator.commands import all_commands, stats, status
from coordinator.commands.declaration import Command
from coordinator.service.commands import HANDLERS, dispatch, registry
from protocol.wire import control
from protocol.wire.control import StatsReply, StatsRequest, StatusRequest
from tests.coordinator.commands.support import Deps
from tests.coordinator.service.fakes import run


def test_every_request_type_has_exactly_one_command() -> None:
    requests = set(typing.get_args(control.ControlRequest))
    assert len(requests) >= 12
    assert set(HANDLERS) == requests
    assert len(all_commands()) == len(requests)  # no command left out of the registry


def test_a_second_command_for_a_request_type_is_refused() -> None:
    again = Command("status-again", request=StatusRequest, serve=status.serve)
    with pytest.raises(TypeError, match="StatusRequest is declared by both 'status' and "
                                        "'status-again'"):
        registry._registry([status.COMMAND, stats.COMMAND, again])


def test_dispatch_finds_the_command_by_the_request_type(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deps = Deps()
    run(dispatch(deps.port, b"client", StatsRequest(req_id=8)))
    [(identity, reply)] = deps.replies.sent
    assert identity == b"client" and isinstance(reply, StatsReply) and reply.req_id == 8
    monkeypatch.setattr(registry, "HANDLERS", {})
    with pytest.raises(LookupError, match="no command answers StatsRequest"):
        run(dispatch(deps.port, b"client", StatsRequest(req_id=9)))
