"""What a failed model request means, as one :class:`ModelError` sentence naming the
endpoint: a transport failure (refused, unresolvable, timed out, dropped), an HTTP error
status with the server's own words, or the optional total time limit."""

from __future__ import annotations

import email.utils
import socket
import time
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec

from protocol.model.errors import ErrorKind, ModelError, one_line, redact
from protocol.model.overflow import is_context_overflow, stated_window, window_in_body
from protocol.secret_text import url_password, without_password


@dataclass(frozen=True)
class EndpointErrors:
    """Builds the errors of one endpoint; the API key is redacted from every message.
    The timeouts are the client's, named in the messages."""

    base_url: str
    api_key: str | None
    timeout_s: float
    connect_timeout_s: float
    total_timeout_s: float | None

    def error(self, kind: ErrorKind, message: str, **extra: Any) -> ModelError:
        # A password in the URL (``http://user:pw@host/v1``, a proxy's basic auth) is a
        # secret like the key: the URL in a message shows ``***`` for it, and any other
        # copy of it (a server quoting its request) goes too.
        shown = without_password(self.base_url)
        text = redact(message.replace(self.base_url, shown), self.api_key)
        text = redact(text, url_password(self.base_url))
        return ModelError(kind, text, endpoint=shown, **extra)

    def transport(self, exc: Exception, *, started: bool) -> ModelError:
        """A ``ModelError`` for an httpx exception (``started``: the body was flowing)."""
        ep = self.base_url
        if isinstance(exc, httpx.ConnectTimeout):
            return self.error(
                "timeout",
                f"Connecting to the model endpoint {ep} timed out after "
                f"{self.connect_timeout_s:g} s.",
            )
        if isinstance(exc, httpx.TimeoutException):
            what = "stopped sending" if started else "sent nothing"
            return self.error(
                "timeout",
                f"The model endpoint {ep} {what} for {self.timeout_s:g} s, "
                "so the request was given up.",
            )
        if isinstance(exc, httpx.ConnectError):
            chain = _cause_chain(exc)
            if any(isinstance(e, ConnectionRefusedError) for e in chain):
                return self.error(
                    "connect",
                    f"The model endpoint {ep} refused the connection",
                    hint="is the server running?",
                )
            if any(isinstance(e, socket.gaierror) for e in chain):
                return self.error(
                    "connect",
                    f"The host of the model endpoint {ep} could not be resolved",
                    hint="check the base URL and the network.",
                )
            return self.error(
                "connect", f"Could not connect to the model endpoint {ep} ({one_line(str(exc))})."
            )
        if started:
            return self.error(
                "connect",
                f"The model endpoint {ep} dropped the connection in the middle of a response.",
            )
        return self.error(
            "connect",
            f"The connection to the model endpoint {ep} failed before an answer arrived "
            f"({one_line(str(exc)) or type(exc).__name__}).",
        )

    def status(self, response: httpx.Response) -> ModelError:
        status = response.status_code
        detail = _error_detail(response).rstrip(".")
        suffix = f": {detail}" if detail else ""
        ep = self.base_url
        if status in (401, 403):
            if self.api_key:
                text = f"The model endpoint {ep} rejected the API key (HTTP {status}){suffix}."
            else:
                text = f"The model endpoint {ep} requires an API key (HTTP {status})"
            return self.error(
                "auth",
                text,
                status=status,
                hint="" if self.api_key else "set OPENAI_API_KEY or DASHSCOPE_API_KEY.",
            )
        if status == 429:
            return self.error(
                "rate_limit",
                f"The model endpoint {ep} is rate limiting requests (HTTP 429){suffix}.",
                status=status,
                retry_after=_parse_retry_after(response.headers.get("retry-after")),
            )
        if status >= 500:
            return self.error(
                "server",
                f"The model endpoint {ep} failed with HTTP {status}{suffix}.",
                status=status,
                retry_after=_parse_retry_after(response.headers.get("retry-after")),
            )
        if status == 408:
            return self.error(
                "timeout", f"The model endpoint {ep} timed out the request (HTTP 408).", status=408
            )
        overflow, window = _overflow(response)
        if overflow:
            size = f"; context window is {window} tokens" if window else ""
            return self.error(
                "context_length",
                f"The model endpoint {ep} refused the request because it does not fit the "
                f"model's context window (HTTP {status}{size}){suffix}.",
                status=status,
            )
        hint = ""
        if status == 404 and "model" in detail.lower():  # an unknown model: the URL is right
            hint = "is the model name right?"
        elif status == 404:
            hint = "is the base URL right (it usually ends in /v1)?"
        return self.error(
            "bad_request",
            f"The model endpoint {ep} rejected the request (HTTP {status}){suffix}.",
            status=status,
            hint=hint,
        )

    def total_timeout(self) -> ModelError:
        return self.error(
            "timeout",
            f"The request to the model endpoint {self.base_url} took longer than the "
            f"{self.total_timeout_s:g} s limit.",
        )


def _overflow(response: httpx.Response) -> tuple[bool, int | None]:
    """Whether an error answer is a context overflow, and the window its body names."""
    try:
        raw = response.content
    except httpx.ResponseNotRead:
        return False, None
    try:
        payload = msgspec.json.decode(raw) if raw else None
    except msgspec.DecodeError:
        payload = None
    text = raw[:4096].decode("utf-8", "replace")
    if not is_context_overflow(response.status_code, payload, text):
        return False, None
    # From the whole body: the detail shown is cut to one short line, and a gateway's
    # wrapping (LiteLLM's) can push the provider's "N tokens > M maximum" past the cut.
    return True, window_in_body(payload) or stated_window(text)


def _error_detail(response: httpx.Response) -> str:
    """The server's own error text, if any, on one line."""
    try:
        raw = response.content
    except httpx.ResponseNotRead:
        return ""
    if not raw:
        return ""
    try:
        payload = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        text = raw.decode("utf-8", "replace")
        return "" if text.lstrip().startswith("<") else one_line(text)
    message: Any = payload
    if isinstance(message, list) and message:  # Gemini's OpenAI endpoint: [{"error": …}]
        message = message[0]
    if isinstance(message, dict) and "error" in message:
        message = message["error"]
    if isinstance(message, dict):
        message = message.get("message") or message.get("msg") or message.get("detail")
    return one_line(message) if isinstance(message, str) else ""


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _cause_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 12:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain
