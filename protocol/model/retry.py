"""When a failed model request is tried again, after how long, and what the person waiting
is told meanwhile.

A request someone waits for (the main chat, its compaction) retries a rate limit, a 5xx
and a dropped or refused connection up to ``max_retries`` times: after the wait the server
asks for (see ``server_wait.py``), else after an exponential backoff with jitter. Every
wait is announced as a :class:`RetryWait` before it starts. A wait is capped at
``wait_cap_s``; the cap is used once per request: a server that asks again for longer
than the cap gets no more attempts, and the error says how long it asked for.

A background request (suggestion, speculation, pipelined suggestion, memory recall) never
retries a rate limit: it gives up at once, so speculation adds no load to an endpoint that
is already refusing requests and never holds a slot the main chat may need. Its other
retries wait no longer than the backoff's own maximum.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import msgspec

from protocol.model.errors import ModelError
from protocol.model.request import RetryWait

BACKGROUND_PURPOSES = frozenset({"suggestion", "speculation", "pipelined", "recall"})


@dataclass
class RetrySchedule:
    """The retries of one request. ``after`` is called with each retryable failure."""

    max_retries: int
    backoff_s: float
    backoff_max_s: float
    wait_cap_s: float
    background: bool = False
    attempt: int = 1  # the attempt that just failed
    _capped: bool = field(default=False, repr=False)

    def after(self, exc: ModelError) -> RetryWait:
        """The wait before the next attempt, or ``exc`` (with the attempts made, and why
        no more are made) raised when there is none."""
        attempts = self.max_retries + 1
        if not exc.retryable or self.attempt >= attempts:
            raise exc.with_attempts(self.attempt)
        if self.background and exc.kind == "rate_limit":
            raise exc.with_attempts(self.attempt)
        cap = self.backoff_max_s + self.backoff_s if self.background else self.wait_cap_s
        asked = exc.retry_after
        if asked is not None and asked > cap:
            if self._capped or self.background:
                raise _asked_too_long(exc, self.attempt, asked, cap)
            self._capped = True
            delay = cap
        elif asked is not None:
            delay = asked
        else:
            delay = self._backoff()
        self.attempt += 1
        reason = exc.kind if exc.kind in ("rate_limit", "server") else "connect"
        wait = RetryWait(
            reason=reason,
            delay_s=delay,
            attempt=self.attempt,
            attempts=attempts,
            text="",
            status=exc.status,
            asked_s=asked if asked is not None and asked > cap else None,
        )
        return msgspec.structs.replace(wait, text=wait_sentence(wait))

    def _backoff(self) -> float:
        """base·2^(n-1), capped, plus up to one base of jitter."""
        exponential = self.backoff_s * 2 ** (self.attempt - 1)
        return float(min(self.backoff_max_s, exponential) + random.uniform(0, self.backoff_s))


def wait_sentence(wait: RetryWait) -> str:
    """``wait`` for a person: why, how long, which attempt comes next."""
    status = f" (HTTP {wait.status})" if wait.status else ""
    if wait.reason == "rate_limit":
        why = f"The model endpoint is rate-limiting requests{status}"
    elif wait.status in (503, 529):
        why = f"The model endpoint is overloaded{status}"
    elif wait.reason == "server":
        why = f"The model endpoint failed{status}"
    else:
        why = "The connection to the model endpoint failed"
    if wait.asked_s is not None:
        why += f" and asks to wait {duration_text(wait.asked_s)}, more than specrun waits"
    return (
        f"{why}; retrying in {duration_text(wait.delay_s)} "
        f"(attempt {wait.attempt} of {wait.attempts})."
    )


def _asked_too_long(exc: ModelError, attempts: int, asked: float, cap: float) -> ModelError:
    longer = (
        f"{exc.summary}; it asks to wait {duration_text(asked)}, longer than specrun waits "
        f"({duration_text(cap)})"
    )
    return ModelError(
        exc.kind,
        longer,
        endpoint=exc.endpoint,
        status=exc.status,
        retry_after=asked,
        attempts=attempts,
        hint=exc.hint or "try again later.",
        permanent=True,
    )


def duration_text(seconds: float) -> str:
    """``0.4 s``, ``12 s``, ``3 min``, ``2 h 5 min``, ``1 day``."""
    if seconds < 10:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    if seconds < 120:
        return f"{round(seconds)} s"
    if seconds < 7200:
        return f"{round(seconds / 60)} min"
    if seconds < 172800:
        hours, rest = divmod(round(seconds / 60), 60)
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    return f"{round(seconds / 86400)} days"
