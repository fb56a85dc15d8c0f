"""Typed errors of the model client.

Every failure of a model request surfaces as one :class:`ModelError` whose ``kind``
says what went wrong and whose message is one sentence naming the endpoint, fit to
show a user as is. The API key never appears in a message: :func:`redact` removes it
from anything a server echoes back.
"""

from __future__ import annotations

from typing import Any, Literal

ErrorKind = Literal[
    "auth",
    "rate_limit",
    "server",
    "connect",
    "timeout",
    "protocol",
    "bad_request",
    "context_length",
    "quota",
    "content_filter",
    "tls",
]

RETRYABLE_KINDS: frozenset[str] = frozenset({"rate_limit", "server", "connect"})


class ModelError(Exception):
    """A model request failed.

    ``kind``: ``auth`` (401/403), ``rate_limit`` (429), ``server`` (5xx, or an error
    event in a stream), ``connect`` (refused, unreachable, dropped connection),
    ``timeout`` (connect or read timeout, or the optional total cap), ``protocol``
    (an answer the client cannot parse), ``context_length`` (the request does not fit the
    model's context window: a 400 whose body says so, see ``overflow.py``), ``quota``
    (the account is out of credit or quota: 402, OpenAI's ``insufficient_quota`` 429,
    DashScope's ``Arrearage``; waiting does not help), ``content_filter`` (the provider's
    moderation refused the prompt), ``tls`` (the endpoint's certificate could not be
    verified) or ``bad_request`` (any other 4xx).
    ``status`` is the HTTP status when there was one, ``retry_after`` how long the server
    asked to wait in seconds, ``attempts`` how many requests were made in total.
    ``permanent`` marks an error of a retryable kind that a new attempt cannot fix (a
    host name that does not exist).
    """

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        endpoint: str = "",
        status: int | None = None,
        retry_after: float | None = None,
        attempts: int = 1,
        hint: str = "",
        permanent: bool = False,
    ) -> None:
        self.summary = message.rstrip(".")
        self.hint = hint
        if attempts > 1:
            message = f"{self.summary} (gave up after {attempts} attempts)"
        message = f"{message.rstrip('.')}; {hint}" if hint else message
        if message[-1:] not in (".", "?", "!"):
            message += "."
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.endpoint = endpoint
        self.status = status
        self.retry_after = retry_after
        self.attempts = attempts
        self.permanent = permanent

    @property
    def retryable(self) -> bool:
        """Whether a new attempt may succeed (rate limit, 5xx, connection failure)."""
        return self.kind in RETRYABLE_KINDS and not self.permanent

    def with_attempts(self, attempts: int) -> ModelError:
        """The same error, saying how many attempts were made before giving up."""
        if attempts <= 1:
            return self
        return ModelError(
            self.kind,
            self.summary,
            endpoint=self.endpoint,
            status=self.status,
            retry_after=self.retry_after,
            attempts=attempts,
            hint=self.hint,
            permanent=self.permanent,
        )

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"ModelError(kind={self.kind!r}, status={self.status!r}, message={self.message!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments do not survive the default exception pickling; the
        # error may cross a process boundary (worker -> coordinator), so spell it out.
        state = (
            self.endpoint, self.status, self.retry_after, self.attempts, self.hint, self.permanent
        )
        return (_rebuild, (self.kind, self.summary, *state))


def _rebuild(
    kind: ErrorKind,
    summary: str,
    endpoint: str,
    status: int | None,
    retry_after: float | None,
    attempts: int,
    hint: str,
    permanent: bool = False,
) -> ModelError:
    return ModelError(
        kind,
        summary,
        endpoint=endpoint,
        status=status,
        retry_after=retry_after,
        attempts=attempts,
        hint=hint,
        permanent=permanent,
    )


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``***``."""
    if secret and secret in text:
        return text.replace(secret, "***")
    return text


def one_line(text: str, limit: int = 200) -> str:
    """Collapse whitespace and cut to ``limit`` characters (an ellipsis marks the cut)."""
    flat = " ".join(text.split())
    if len(flat) > limit:
        return flat[: limit - 1].rstrip() + "…"
    return flat
