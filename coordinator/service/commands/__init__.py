"""The service's side of its control commands: the registry made from their
declarations (``coordinator/commands``) and the port their server halves are handed."""

from __future__ import annotations

from coordinator.service.commands.port import CommandPort, status_reply
from coordinator.service.commands.registry import HANDLERS, dispatch

__all__ = ["HANDLERS", "CommandPort", "dispatch", "status_reply"]
