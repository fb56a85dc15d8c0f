"""After a 429, the background requests a client does not send: suggestions,
speculations, pipelined suggestions and memory recall wait until the endpoint's asked-for
wait has passed, so they add no load to an endpoint that is refusing requests and leave
what capacity there is to the main chat's retries."""

from __future__ import annotations

import time

from protocol.model.errors import ModelError
from protocol.model.retry import BACKGROUND_PURPOSES, duration_text

PAUSE_WITHOUT_ASK_S = 10.0
"""How long background requests stay unsent after a 429 that named no wait."""


class RateLimitHold:
    """The hold of one client. ``longest_s`` bounds a hold, whatever a server asks for."""

    def __init__(self, longest_s: float) -> None:
        self._longest_s = longest_s
        self._until = 0.0  # time.monotonic()

    def observe(self, exc: ModelError | None) -> None:
        """A request's outcome: a rate limit answered by the server starts (or extends) the
        hold; any answer ends it."""
        if exc is None:
            self._until = 0.0
        elif exc.kind == "rate_limit" and exc.status is not None:
            pause = exc.retry_after if exc.retry_after is not None else PAUSE_WITHOUT_ASK_S
            self._until = max(self._until, time.monotonic() + min(pause, self._longest_s))

    def refusal(self, purpose: str, base_url: str) -> str | None:
        """Why a request of ``purpose`` is not sent now, or None when it may go."""
        left = self._until - time.monotonic()
        if purpose not in BACKGROUND_PURPOSES or left <= 0:
            return None
        return (
            f"The model endpoint {base_url} is rate limiting requests; this {purpose} "
            f"request was not sent (it waits {duration_text(left)} more)."
        )

    def left_s(self) -> float:
        return max(0.0, self._until - time.monotonic())
