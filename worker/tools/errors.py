"""The two ways a tool call ends without a result (their own module, so the file access
layer and the tools can both raise them without importing each other)."""

from __future__ import annotations

from protocol.wire.boundary import BoundaryReason

__all__ = ["ToolError", "ToolStop"]


class ToolError(Exception):
    """A tool failure; its message is what the model sees as the ``error``."""


class ToolStop(Exception):
    """The call must not produce a result: a speculation stops at a boundary with
    ``reason`` (a limit, the overlay quota, a missing sandbox layer, a protected path); the
    main chat asks the user instead. Never turned into a tool error."""

    def __init__(self, reason: BoundaryReason, message: str = "") -> None:
        super().__init__(message or reason.text())
        self.reason = reason
