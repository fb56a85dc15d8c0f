"""What a command is, declared once: its name, options and help for the command line,
the request it sends and the reply it gets (``protocol/wire/control.py`` holds those
types: the wire's one schema), its client half and its server half.

The command line (click, ``--help``, the light path), the service's handler registry and
the command table of docs/cli.md are all made from these declarations. A declaration
imports nothing of either side: its halves are handed the side they run on as a narrow
protocol (``seam.Client``, ``seam.Service``).

Plain classes rather than ``@dataclass``: a CLI call imports its command's declaration,
and a dataclass costs every call the time to write and compile its methods.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from coordinator.commands.seam import Client, Service
    from protocol.wire.control import ControlReply

Req = TypeVar("Req")

Args = Mapping[str, Any]
"""A command line's values by parameter name (``--json`` left out: ``Client.as_json``)."""

ServerHalf = Callable[["Service", bytes, Req], Awaitable[None]]
"""``async def serve(service, identity, request)``: answer one request; every reply goes
through ``service.send(identity, ...)``."""

ClientHalf = Callable[["Client", Args], "int | None"]
"""``def run(client, args)``: send the request(s) the command line asks for and show the
replies. Returns the exit code, None for 0."""


class Flag:
    """A boolean option: ``--stat``. Its value is the parameter ``dest`` (default: the
    flag's name without dashes, ``-`` as ``_``)."""

    __slots__ = ("dest", "help", "name")

    def __init__(self, name: str, help: str, dest: str | None = None) -> None:
        self.name = name
        self.help = help
        self.dest = dest or name.lstrip("-").replace("-", "_")


class Option:
    """An option with a value: ``--index N``. ``kind`` is ``int`` or ``str``; ``minimum``
    bounds an ``int``; ``choices`` restricts a ``str``."""

    __slots__ = ("choices", "default", "dest", "help", "kind", "metavar", "minimum", "name")

    def __init__(self, name: str, help: str, *, kind: type[int] | type[str] = str,
                 default: int | str | None = None, metavar: str | None = None,
                 minimum: int | None = None, choices: tuple[str, ...] | None = None,
                 dest: str | None = None) -> None:
        self.name = name
        self.help = help
        self.kind = kind
        self.default = default
        self.metavar = metavar
        self.minimum = minimum
        self.choices = choices
        self.dest = dest or name.lstrip("-").replace("-", "_")


class Argument:
    """A positional argument: ``TEXT``. ``required`` False: it may be left out (None)."""

    __slots__ = ("dest", "kind", "required")

    def __init__(self, dest: str, *, kind: type[int] | type[str] = str,
                 required: bool = True) -> None:
        self.dest = dest
        self.kind = kind
        self.required = required


class Retired:
    """An option a command no longer takes, kept so that an old command line gets one
    sentence instead of click's "no such option": ``sentence(value)`` says what to type
    now. Hidden from help and the command table; a command's client half never sees it."""

    __slots__ = ("dest", "name", "sentence")

    def __init__(self, name: str, sentence: Callable[[str], str]) -> None:
        self.name = name
        self.sentence = sentence
        self.dest = "retired_" + name.lstrip("-").replace("-", "_")


Param = Flag | Option | Argument | Retired


class Command(Generic[Req]):
    """One command. ``request`` is the control request its server half answers (one
    command per request type); ``reply`` what a successful request ends with.

    ``name`` is the command line's name (``kill-worker``), under ``group`` when one is
    given (``specrun debug kill-worker``); ``run`` None with ``cli`` True sends the
    request made of the command line's values (each parameter a field of ``request``)
    and shows the reply. ``cli`` False: a request only other clients send (``cancel``,
    ``subscribe``), with no command line of its own."""

    __slots__ = ("cli", "group", "help", "name", "params", "reply", "request", "run", "serve")

    def __init__(self, name: str, *, request: type[Req], serve: ServerHalf[Req],
                 reply: type[ControlReply] | None = None, help: str = "",
                 params: tuple[Param, ...] = (), run: ClientHalf | None = None,
                 group: str | None = None, cli: bool = True) -> None:
        self.name = name
        self.request = request
        self.serve = serve
        self.reply = reply
        self.help = help
        self.params = params
        self.run = run if run is not None else _one_request(request)
        self.group = group
        self.cli = cli

    @property
    def summary(self) -> str:
        """The help's first sentence, as a command list shows it."""
        first = self.help.strip().split("\n\n", 1)[0]
        return " ".join(first.split())

    @property
    def light_flags(self) -> dict[str, str] | None:
        """``--flag`` -> its parameter, for a command with no positional argument (its
        command line, when it holds only these flags, runs without click: ``cli/light.py``);
        None for a command with one."""
        if not all(isinstance(p, Flag | Option | Retired) for p in self.params):
            return None
        return {p.name: p.dest for p in self.params if isinstance(p, Flag)}

    def defaults(self) -> dict[str, Any]:
        """Every parameter's value when the command line does not give it."""
        values: dict[str, Any] = {}
        for p in self.params:
            if isinstance(p, Retired):
                values[p.dest] = None
                continue
            values[p.dest] = False if isinstance(p, Flag) else (
                p.default if isinstance(p, Option) else None)
        return values


def _one_request(request: type[Any]) -> ClientHalf:
    """The client half of a command that is one request made of its parameters."""

    def run(client: Client, args: Args) -> None:
        client.show(client.request(request(req_id=client.next_id(), **args)))

    return run
