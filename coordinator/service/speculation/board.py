"""What the parts of the speculation core share: the suggestion shown now, why none is,
and how many times the person moved on (a late suggestion for an earlier turn sees the
count changed and stays away)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from coordinator.service.speculation.suggestion import Suggestion
from protocol.wire.control import SuppressReason

# Make these texts the shown suggestion (several: its ranked branches), visible after delay_s.
Offer = Callable[[str | Sequence[str], float], Awaitable[None]]


def _nobody() -> None:
    return None


@dataclass(eq=False)
class Board:
    """The shown suggestion and what goes with it; the manager, the generator, the
    scheduler and the acceptor each hold the same one."""

    current: Suggestion | None = None
    last_suppressed: SuppressReason | None = None
    moves: int = 0  # bumped whenever the person submits something
    # Told when the suggestion may have changed (the live view compares and sends).
    on_change: Callable[[], None] = _nobody

    def is_current(self, suggestion: Suggestion) -> bool:
        return self.current is suggestion
