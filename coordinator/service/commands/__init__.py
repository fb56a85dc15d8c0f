"""Control commands: one small handler per request type, each registered where it is
defined (``registry.handles``); importing this package registers them all."""

from __future__ import annotations

from coordinator.service.commands import chat, live, service, speculation, undo
from coordinator.service.commands.registry import HANDLERS, dispatch

__all__ = ["HANDLERS", "chat", "dispatch", "live", "service", "speculation", "undo"]
