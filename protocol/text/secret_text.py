"""A URL as it may be shown: without the password it may carry.

``baseUrl`` can hold basic-auth credentials (``http://user:pw@host/v1``, a proxy's or a
gateway's). The password is a secret like the API key: ``status``, ``config show``, a log
line or a ``repr`` shows the URL with ``***`` in its place, and the rest as it is.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def url_password(url: str) -> str | None:
    """The password ``url`` carries, or None (also when it does not parse as a URL)."""
    try:
        return urlsplit(url).password
    except ValueError:  # an unclosed IPv6 bracket, a bad port: no credentials to find
        return None


def without_password(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``; anything that does not parse
    as a URL comes back unchanged."""
    if url_password(url) is None:
        return url
    parts = urlsplit(url)
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hostport}"))
