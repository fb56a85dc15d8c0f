"""What the command tests share: the service's parts a command reaches through its port
(``coordinator/service/commands/port.py``), with the real ``Session`` over the session
tests' chat and speculation manager (``tests/coordinator/service/fakes.py``) and the
test's ``Workers``; replies land in a list."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator.commands.seam import Service
from coordinator.service.commands import CommandPort
from protocol.wire import control
from protocol.wire.control import AskRequest
from tests.coordinator.service.fakes import FakeSession, Workers, run


@dataclass
class Deps(FakeSession):
    """Everything the port may ask for (a ``ServiceParts``); each test reads only what
    the command under test used."""

    pool: Workers = field(default_factory=lambda: Workers(answer=None))
    stop_requested: asyncio.Event = field(default_factory=asyncio.Event)
    project_root: Path = Path("/work/project")
    epoch: int = 12345
    uptime_s: float = 3.14159
    base_url: str = "http://127.0.0.1:9/v1"
    scripted_model: bool = True

    async def send(self, identity: bytes, reply: control.ControlReply) -> None:
        await self.replies.send(identity, reply)

    @property
    def port(self) -> CommandPort:
        return CommandPort(self)  # type: ignore[arg-type]


ServerHalf = Callable[[Service, bytes, Any], Awaitable[None]]


def serve(deps: Deps, half: ServerHalf, request: Any) -> None:
    """Run a command's server half on ``request`` from client ``c``."""
    run(half(deps.port, b"c", request))


def query(text: str, **fields: Any) -> AskRequest:
    return AskRequest(req_id=3, text=text, **fields)


def answer_with_a_busy_worker(half: ServerHalf, request: Any, kind: str, job_id: str) -> Any:
    """The one reply ``half`` sends to ``request`` while a ``kind`` worker runs ``job_id``."""
    deps = Deps()

    async def main() -> None:
        await deps.pool.acquire(kind, job_id)  # type: ignore[arg-type]
        await half(deps.port, b"c", request)

    run(main())
    [reply] = deps.replies.replies
    return reply
