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

The loop is tenacity's (:meth:`RetryPolicy.retrying`): every model error goes to this
policy, whose ``stop`` says when there is no next attempt, ``wait`` how long to wait for
it, and whose give-up callback raises the error that ends the request (with the attempts
made). Tenacity's own sleep does nothing: the client takes the wait chosen before an
attempt (:meth:`RetryPolicy.take_wait`), announces it, then sleeps itself, so the
announcement comes first and a cancellation (Ctrl-C) ends the wait at once.
"""

from __future__ import annotations

import random
from typing import NoReturn

import msgspec
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

from protocol.model.errors import ModelError
from protocol.model.request import RetryWait

BACKGROUND_PURPOSES = frozenset({"suggestion", "speculation", "pipelined", "recall"})


class RetryPolicy:
    """The retries of one request: tenacity's strategies, and the waits it chose."""

    def __init__(
        self,
        *,
        max_retries: int,
        backoff_s: float,
        backoff_max_s: float,
        wait_cap_s: float,
        background: bool = False,
    ) -> None:
        self.attempts = max_retries + 1
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._background = background
        self._cap_s = backoff_max_s + backoff_s if background else wait_cap_s
        self._cap_used = False  # a wait was cut to the cap: the next long ask ends it
        self._chosen: RetryWait | None = None

    def retrying(self) -> AsyncRetrying:
        """Tenacity's loop over the attempts of the request, with this policy."""
        return AsyncRetrying(
            retry=retry_if_exception_type(ModelError),  # other exceptions pass through
            stop=self._stop,
            wait=self._wait,
            before_sleep=self._choose,
            retry_error_callback=self._give_up,
            sleep=_sleep_in_the_client,
        )

    def take_wait(self) -> RetryWait | None:
        """The wait chosen after the last failure, once; None before the first attempt."""
        chosen, self._chosen = self._chosen, None
        return chosen

    def _ending(self, state: RetryCallState) -> ModelError | None:
        """The error that ends the request after the failure in ``state``, or None when
        there is a next attempt."""
        exc, attempt = _failure(state), state.attempt_number
        if not exc.retryable or attempt >= self.attempts:
            return exc.with_attempts(attempt)
        if self._background and exc.kind == "rate_limit":
            return exc.with_attempts(attempt)
        asked = exc.retry_after
        if asked is not None and asked > self._cap_s and (self._cap_used or self._background):
            return _asked_too_long(exc, attempt, asked, self._cap_s)
        return None

    def _stop(self, state: RetryCallState) -> bool:
        return self._ending(state) is not None

    def _give_up(self, state: RetryCallState) -> NoReturn:
        ending = self._ending(state)
        assert ending is not None  # tenacity gives up only when stop said so
        raise ending from _failure(state).__cause__

    def _wait(self, state: RetryCallState) -> float:
        """What the server asked for (at most the cap), else backoff: base·2^(n-1),
        capped, plus up to one base of jitter."""
        asked = _failure(state).retry_after
        if asked is not None:
            return min(asked, self._cap_s)
        exponential = self._backoff_s * 2 ** (state.attempt_number - 1)
        return float(min(self._backoff_max_s, exponential) + random.uniform(0, self._backoff_s))

    def _choose(self, state: RetryCallState) -> None:
        """Tenacity is about to wait: keep the wait, with its sentence, for the client."""
        exc = _failure(state)
        assert state.next_action is not None  # set before before_sleep is called
        asked = exc.retry_after
        too_long = asked is not None and asked > self._cap_s
        self._cap_used = self._cap_used or too_long
        reason = exc.kind if exc.kind in ("rate_limit", "server") else "connect"
        wait = RetryWait(
            reason=reason,
            delay_s=state.next_action.sleep,
            attempt=state.attempt_number + 1,
            attempts=self.attempts,
            text="",
            status=exc.status,
            asked_s=asked if too_long else None,
        )
        self._chosen = msgspec.structs.replace(wait, text=wait_sentence(wait))


async def _sleep_in_the_client(_seconds: float) -> None:
    """Tenacity's sleep: none, the client announces the wait first and then sleeps."""


def _failure(state: RetryCallState) -> ModelError:
    exc = state.outcome.exception() if state.outcome is not None else None
    assert isinstance(exc, ModelError)  # the retry strategy lets only ModelError through
    return exc


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
