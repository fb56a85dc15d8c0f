"""How long a rate-limited or overloaded endpoint asks its clients to wait, read from the
headers providers send with a 429 or a 503.

Providers spell it differently: ``retry-after-ms`` (OpenAI, Azure OpenAI),
``Retry-After`` as seconds or an HTTP date (the standard; Azure, Groq, Anthropic),
``x-ratelimit-reset-requests`` / ``x-ratelimit-reset-tokens`` as a duration like ``6m0s``
(OpenAI, Groq), ``x-ratelimit-reset`` as epoch milliseconds (OpenRouter), and
``anthropic-ratelimit-*-reset`` as an RFC 3339 time. The most precise one present wins;
of the reset times, only those of a limit that is used up count (a limit with requests
left does not make anybody wait).
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from datetime import datetime

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION_WHOLE = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|h|m|s))+")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def server_wait(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asks to wait before the next request, or None if it says nothing
    readable. ``headers`` must look names up case-insensitively (``httpx.Headers``)."""
    now = time.time() if now is None else now
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    retry_after = retry_after_seconds(headers.get("retry-after"), now)
    if retry_after is not None:
        return retry_after
    resets = [
        wait
        for limit in ("requests", "tokens")
        if headers.get(f"x-ratelimit-remaining-{limit}", "0").strip() in ("0", "")
        and (wait := _duration(headers.get(f"x-ratelimit-reset-{limit}"))) is not None
    ]
    stamp = _number(headers.get("x-ratelimit-reset"))
    if stamp is not None:
        resets.append(_epoch_or_seconds(stamp, now))
    for limit in ("requests", "tokens", "input-tokens", "output-tokens"):
        remaining = headers.get(f"anthropic-ratelimit-{limit}-remaining", "0").strip()
        when = _rfc3339(headers.get(f"anthropic-ratelimit-{limit}-reset"))
        if remaining == "0" and when is not None:
            resets.append(max(0.0, when - now))
    return max(resets) if resets else None


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _number(value: str | None) -> float | None:
    if not value:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    if number != number or number in (float("inf"), float("-inf")):
        return None
    return max(0.0, number)


def _duration(value: str | None) -> float | None:
    """``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s`` or plain seconds."""
    if not value:
        return None
    value = value.strip()
    plain = _number(value)
    if plain is not None:
        return plain
    if not _DURATION_WHOLE.fullmatch(value):
        return None
    return sum(float(amount) * _UNIT_S[unit] for amount, unit in _DURATION.findall(value))


def _epoch_or_seconds(stamp: float, now: float) -> float:
    if stamp > 1e12:  # epoch milliseconds
        return max(0.0, stamp / 1000.0 - now)
    if stamp > 1e9:  # epoch seconds
        return max(0.0, stamp - now)
    return stamp


def _rfc3339(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
