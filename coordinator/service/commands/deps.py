"""What the control commands are given: the service, as ``HandlerDeps``.

A handler is ``async def handler(deps, identity, request)``. The service passes itself
(mypy checks at the ``dispatch`` call that it is a ``HandlerDeps``); a test passes a
small object with the same members, the chat and the speculation manager replaced by
stand-ins (``session.ChatControl``, ``session.SpeculationControl``) and the pool by the
test's ``Workers`` (``ports.PoolView``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Protocol

from coordinator.service.live.hub import LiveHub
from coordinator.service.live.state import LiveState
from coordinator.service.ports import PoolView, ReplySink
from coordinator.service.session import ChatControl, Session, SpeculationControl
from coordinator.service.undo import Rewinder
from coordinator.settings import Settings


class HandlerDeps(ReplySink, Protocol):
    """The service as its control commands see it."""

    @property
    def session(self) -> Session: ...

    @property
    def chat(self) -> ChatControl: ...

    @property
    def speculation(self) -> SpeculationControl: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def pool(self) -> PoolView: ...

    @property
    def stop_requested(self) -> asyncio.Event: ...

    @property
    def project_root(self) -> Path: ...

    @property
    def epoch(self) -> int: ...

    @property
    def uptime_s(self) -> float: ...

    @property
    def base_url(self) -> str: ...

    @property
    def scripted_model(self) -> bool: ...

    @property
    def live_hub(self) -> LiveHub: ...

    @property
    def live(self) -> LiveState: ...

    @property
    def undo(self) -> Rewinder: ...
