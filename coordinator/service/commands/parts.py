"""The service as its command port reads it: ``ServiceParts``.

The service passes itself; the command tests pass a small object with these members
(the chat and the speculation manager the real ones, or the session's stand-ins).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from coordinator.service.ports import PoolView, ReplySink
from coordinator.settings import Settings

if TYPE_CHECKING:
    from coordinator.service.chat import MainChat
    from coordinator.service.live import LiveHub, LiveState
    from coordinator.service.session import Session
    from coordinator.service.speculation import SpeculationManager
    from coordinator.service.undo import Rewinder


class ServiceParts(ReplySink, Protocol):
    """The service's parts that its commands reach (through ``port.CommandPort``)."""

    @property
    def session(self) -> Session: ...

    @property
    def chat(self) -> MainChat: ...

    @property
    def speculation(self) -> SpeculationManager: ...

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
