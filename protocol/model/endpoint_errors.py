"""What a failed model request means, as one :class:`ModelError` sentence naming the
endpoint: a transport failure (refused, unresolvable, timed out, dropped, TLS), an HTTP
error status with the server's own words, an error the server reported inside a stream or
a 200 answer, or the optional total time limit.

The kind comes from the status refined by the body's ``code`` / ``type``, because
providers reuse statuses: OpenAI answers an exhausted quota with 429 like a rate limit
(``insufficient_quota``, which waiting does not fix), DashScope an unpaid account with 400
(``Arrearage``), Azure its content filter with 400 (``content_filter``); OpenRouter puts
an upstream failure's status in ``error.code`` of an event of a 200 stream, and
Anthropic-style gateways send ``{"type": "error", "error": {"type": "overloaded_error"}}``.
A 401/403 or 5xx whose body is an HTML page came from a proxy in front of the API, not
from the API, and is described as such."""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec

from protocol.model.errors import ErrorKind, ModelError, one_line, redact
from protocol.model.overflow import is_context_overflow, stated_window, window_in_body
from protocol.model.server_wait import server_wait
from protocol.text.secret_text import url_password, without_password

# error.code / error.type values (lower case) that name the kind whatever the status.
_QUOTA_CODES = frozenset({
    "insufficient_quota", "arrearage", "billing_hard_limit_reached", "insufficient_balance",
    "payment_required", "credit_balance_too_low",
})
_FILTER_CODES = frozenset({"content_filter", "data_inspection_failed", "content_policy_violation"})
_RATE_CODES = frozenset({
    "rate_limit_exceeded", "rate_limit_error", "limit_requests", "throttling",
    "throttling.ratequota", "throttling.allocationquota", "too_many_requests",
})
_OVERLOADED_CODES = frozenset({"overloaded_error", "server_overloaded", "unavailable_error"})
_AUTH_CODES = frozenset({
    "invalid_api_key", "authentication_error", "permission_error", "invalidapikey",
})
_QUOTA_WORDS = ("insufficient balance", "insufficient credits", "requires more credits",
                "exceeded your current quota", "account is not in good standing",
                "make sure your account is in good standing")


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
        chain = _cause_chain(exc)
        tls = next((e for e in chain if isinstance(e, ssl.SSLError)), None)
        if tls is not None:
            return self._tls(tls)
        if isinstance(exc, httpx.ConnectError):
            if any(isinstance(e, ConnectionRefusedError) for e in chain):
                return self.error(
                    "connect",
                    f"The model endpoint {ep} refused the connection",
                    hint="is the server running?",
                )
            unresolved = next((e for e in chain if isinstance(e, socket.gaierror)), None)
            if unresolved is not None:
                # "no such name" stays so on a retry a second later; "try again" may not.
                return self.error(
                    "connect",
                    f"The host of the model endpoint {ep} could not be resolved",
                    hint="check the base URL and the network.",
                    permanent=unresolved.errno == socket.EAI_NONAME,
                )
            return self.error(
                "connect", f"Could not connect to the model endpoint {ep} ({one_line(str(exc))})."
            )
        if started:
            return self.error(
                "connect",
                f"The model endpoint {ep} dropped the connection in the middle of a response.",
            )
        why = one_line(str(exc)) or "the server closed the connection"
        return self.error(
            "connect",
            f"The connection to the model endpoint {ep} failed before an answer arrived "
            f"({why}).",
        )

    def _tls(self, exc: ssl.SSLError) -> ModelError:
        """A TLS failure: retrying cannot fix a certificate or a protocol mismatch."""
        ep = self.base_url
        if isinstance(exc, ssl.SSLCertVerificationError):
            why = one_line(str(exc.verify_message or exc.reason or "unknown reason"), 120)
            return self.error(
                "tls",
                f"The TLS certificate of the model endpoint {ep} could not be verified "
                f"({why})",
                hint="check the host name in the base URL; a private CA is not trusted.",
            )
        reason = one_line(str(exc.reason or "").replace("_", " ").lower(), 120)
        return self.error(
            "tls",
            f"The TLS handshake with the model endpoint {ep} failed"
            + (f" ({reason})" if reason else ""),
            hint="does the endpoint speak https, or should the base URL start with http://?",
        )

    def status(self, response: httpx.Response) -> ModelError:
        status = response.status_code
        payload = _json_body(response)
        detail = _error_detail(response).rstrip(".")
        suffix = f": {detail}" if detail else ""
        ep = self.base_url
        code = _error_code(payload)
        wait = server_wait(response.headers)
        if _is_html(response) and (status in (401, 403) or status >= 500):
            return self._proxy_page(status, wait)
        if code in _QUOTA_CODES or status == 402 or _says_quota(detail):
            return self._quota(status, suffix)
        if code in _FILTER_CODES:
            return self._filtered(status, suffix)
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
                retry_after=wait,
            )
        if status >= 500:
            return self.error(
                "server",
                f"The model endpoint {ep} failed with HTTP {status}{suffix}.",
                status=status,
                retry_after=wait,
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
        if status == 404 and ("model" in detail.lower() or "model" in code):
            hint = "is the model name right?"  # an unknown model: the URL is right
        elif status == 404:
            hint = "is the base URL right (it usually ends in /v1)?"
        return self.error(
            "bad_request",
            f"The model endpoint {ep} rejected the request (HTTP {status}){suffix}.",
            status=status,
            hint=hint,
        )

    def reported(self, payload: Any, *, in_stream: bool) -> ModelError:
        """An error the server put in a 200 answer: an event of its stream (OpenRouter,
        Anthropic-style gateways) or a JSON body. Its ``code`` (a status number or a
        name) or ``type`` gives the kind, as the status would have."""
        error = payload.get("error") if isinstance(payload, dict) else None
        error = error if error is not None else payload
        raw = error.get("message") if isinstance(error, dict) else error
        detail = one_line(str(raw or "")).rstrip(".")
        suffix = f": {detail}" if detail else ""
        where = "in its stream" if in_stream else "in its answer"
        ep = self.base_url
        number = error.get("code") if isinstance(error, dict) else None
        status = number if isinstance(number, int) and 400 <= number < 600 else None
        code = _error_code(payload)
        if code in _QUOTA_CODES or status == 402 or _says_quota(detail):
            return self._quota(status, suffix)
        if code in _FILTER_CODES:
            return self._filtered(status, suffix)
        if code in _AUTH_CODES or status in (401, 403):
            return self.error(
                "auth", f"The model endpoint {ep} refused the API key {where}{suffix}.",
                status=status,
            )
        if code in _RATE_CODES or status == 429:
            return self.error(
                "rate_limit",
                f"The model endpoint {ep} is rate limiting requests (said {where}){suffix}.",
                status=429,
            )
        if is_context_overflow(400, payload, detail):
            return self.error(
                "context_length",
                f"The model endpoint {ep} refused the request because it does not fit the "
                f"model's context window (said {where}){suffix}.",
                status=status,
            )
        if status is not None and status < 500 and status != 408:
            return self.error(
                "bad_request",
                f"The model endpoint {ep} rejected the request {where} (HTTP {status}){suffix}.",
                status=status,
            )
        if code in _OVERLOADED_CODES:
            status = status or 529
        return self.error(
            "server", f"The model endpoint {ep} reported an error {where}{suffix}.", status=status
        )

    def _quota(self, status: int | None, suffix: str) -> ModelError:
        shown = f" (HTTP {status})" if status else ""
        return self.error(
            "quota",
            f"The model endpoint {self.base_url} refused the request because the account "
            f"is out of credit or quota{shown}{suffix}.",
            status=status,
            hint="add credit or raise the quota in the provider's console; waiting will not help.",
        )

    def _filtered(self, status: int | None, suffix: str) -> ModelError:
        shown = f" (HTTP {status})" if status else ""
        return self.error(
            "content_filter",
            f"The content filter of the model endpoint {self.base_url} refused the "
            f"request{shown}{suffix}.",
            status=status,
            hint="rephrase the request.",
        )

    def _proxy_page(self, status: int, wait: float | None) -> ModelError:
        ep = self.base_url
        if status >= 500:
            return self.error(
                "server",
                f"The model endpoint {ep} failed with HTTP {status} (an HTML error page: a "
                "proxy or gateway in front of the API could not reach it).",
                status=status,
                retry_after=wait,
            )
        return self.error(
            "bad_request",
            f"The model endpoint {ep} answered HTTP {status} with an HTML page, not the "
            "API's JSON: a proxy or firewall in front of it refused the request",
            status=status,
            hint="check the base URL and the network (a VPN or a blocked region?).",
        )

    def not_a_stream(self, response: httpx.Response, why: str) -> ModelError:
        """A 200 answer to a stream request that is not an event stream."""
        if "html" in response.headers.get("content-type", "").lower():
            # A web page (a proxy's, a portal's, a site's front page): the URL is wrong.
            return self.error(
                "protocol",
                f"The model endpoint {self.base_url} answered with an HTML page, not an "
                "event stream",
                hint="is the base URL right (it usually ends in /v1)?",
            )
        return self.error(
            "protocol",
            f"The model endpoint {self.base_url} did not answer with an event stream "
            f"({one_line(why)}).",
        )

    def first_byte(self, waited_s: float, unread: int) -> ModelError:
        """Nothing came by the first-byte deadline (``first_byte.py``)."""
        return self.error(
            "timeout",
            f"The model endpoint {self.base_url} sent nothing for {round(waited_s, 1):g} s "
            f"after a request with about {unread:,} prompt tokens it had not read yet, so "
            "the request was given up",
            hint="a slow local server may need a larger firstByteTimeoutS or "
            "firstByteSecondsPer1kTokens.",
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


def _json_body(response: httpx.Response) -> Any:
    try:
        raw = response.content
    except httpx.ResponseNotRead:
        return None
    try:
        return msgspec.json.decode(raw) if raw else None
    except msgspec.DecodeError:
        return None


def _is_html(response: httpx.Response) -> bool:
    if "html" in response.headers.get("content-type", "").lower():
        return True
    try:
        head = response.content[:256].lstrip().lower()
    except httpx.ResponseNotRead:
        return False
    return head.startswith((b"<!doctype html", b"<html"))


def _error_code(payload: Any) -> str:
    """The error's ``code`` or ``type`` that names a kind (lower case), or ""."""
    error = payload.get("error") if isinstance(payload, dict) else None
    names: list[str] = []
    for holder in (error, payload):
        if isinstance(holder, dict):
            names += [str(holder.get(key) or "").lower() for key in ("code", "type")]
    known = _QUOTA_CODES | _FILTER_CODES | _RATE_CODES | _OVERLOADED_CODES | _AUTH_CODES
    return next((name for name in names if name in known), next(iter(names), ""))


def _says_quota(detail: str) -> bool:
    lower = detail.lower()
    return any(words in lower for words in _QUOTA_WORDS)


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


def _cause_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 12:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain
