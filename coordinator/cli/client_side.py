"""The command line as a declared command's client half sees it (``commands.seam.Client``),
and ``run_declared``, which runs a declared command (from click or from ``light.py``).

Free of click, and of rich until something is drawn for a person: a light command line
pays for the socket, the codec and its command's declaration only.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, NoReturn

from coordinator.cli import render
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import fail_on_error
from coordinator.commands.declaration import Retired

if TYPE_CHECKING:
    from coordinator.cli.client import ServiceClient
    from coordinator.commands.declaration import Command
    from protocol.wire.control import AcceptRequest, AskRequest, ControlReply, ControlRequest


class ClientSide:
    """One command line's connection to the service (opened on its first request) and
    its output: JSON for scripts, or drawn for a person."""

    def __init__(self, obj: CommandContext, as_json: bool) -> None:
        self.obj = obj
        self._as_json = as_json
        self._client: ServiceClient | None = None

    @property
    def as_json(self) -> bool:
        return self._as_json

    @property
    def can_confirm(self) -> bool:
        return sys.stdin.isatty() and not self._as_json

    @property
    def client(self) -> ServiceClient:
        if self._client is None:
            self._client = self.obj.client()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def next_id(self) -> int:
        return self.client.next_id()

    def request(self, request: ControlRequest, timeout_s: float | None = None) -> ControlReply:
        return self.client.request(request, timeout_s)

    def show(self, reply: ControlReply) -> None:
        fail_on_error(reply, self._as_json)
        if self._as_json:
            render.print_json(reply)
        else:
            render.show_reply(reply, verbose=self.obj.verbose)

    def note(self, text: str) -> None:
        if not self._as_json:
            from rich.text import Text

            render.console.print(Text(text, style="bright_black"))

    def turn(self, request: AskRequest | AcceptRequest) -> int:
        from coordinator.cli.turns import stream_turn, view_for

        approve = None
        if self.can_confirm:
            from coordinator.cli.approval import ask_person

            approve = ask_person
        return stream_turn(self.client, request, view_for(self._as_json), approve).exit_code

    def usage_error(self, message: str) -> NoReturn:
        import click

        raise click.UsageError(message)


def run_declared(obj: CommandContext, command: Command[Any], values: dict[str, Any]) -> None:
    """Run ``command``'s client half with the command line's ``values`` (``as_json``
    among them); exit with its code."""
    side = ClientSide(obj, bool(values.pop("as_json", False)))
    for param in command.params:  # an option it no longer takes: what to type instead
        if isinstance(param, Retired):
            used = values.pop(param.dest, None)
            if used is not None:
                side.usage_error(param.sentence(str(used)))
    try:
        code = command.run(side, values)
    finally:
        side.close()
    if code:
        sys.exit(code)
