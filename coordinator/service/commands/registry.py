"""The service's handler registry, made from the command declarations
(``coordinator/commands``): each request type to the one command that answers it.

Built when this module is imported (before the fork server is forked, so its pages are
shared): a request type with two commands fails then, not at the first request.
"""

from __future__ import annotations

from typing import Any

from coordinator.commands import all_commands
from coordinator.commands.declaration import Command
from coordinator.commands.seam import Service
from protocol.wire.control import ControlRequest


def _registry(commands: list[Command[Any]]) -> dict[type[Any], Command[Any]]:
    found: dict[type[Any], Command[Any]] = {}
    for command in commands:
        other = found.setdefault(command.request, command)
        if other is not command:
            raise TypeError(f"{command.request.__name__} is declared by both "
                            f"{other.name!r} and {command.name!r}")
    return found


HANDLERS = _registry(all_commands())


async def dispatch(service: Service, identity: bytes, request: ControlRequest) -> None:
    command = HANDLERS.get(type(request))
    if command is None:  # a request type the protocol has and no command declares
        raise LookupError(f"no command answers {type(request).__name__}")
    await command.serve(service, identity, request)
