"""The TLS context of every model client in a process: built once, and only for an
``https`` endpoint.

Building a verifying SSL context (loading the CA bundle) is most of what a new
``httpx.AsyncClient`` costs (~20-40 ms), and the loaded bundle stays in the C heap (about
1.1 MB). The service builds it before it forks its fork server when its endpoint is
``https`` (``coordinator.service.service``), so every worker inherits a ready context and
its first model request does not pay for it. A plain ``http`` endpoint (the embedded
scripted model, a model served on the same machine) never needs one: its clients get a
context that trusts no certificate at all, so nothing can be sent over TLS with it
unverified.
"""

from __future__ import annotations

import functools
import ssl
from urllib.parse import urlsplit


def ssl_context(base_url: str) -> ssl.SSLContext:
    """The context for a client of ``base_url``."""
    if urlsplit(base_url).scheme.lower() == "https":
        return _verifying()
    return _trusting_nothing()


@functools.cache
def _verifying() -> ssl.SSLContext:
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


@functools.cache
def _trusting_nothing() -> ssl.SSLContext:
    # Verifies certificates and host names like any client context, with no trusted
    # certificate loaded: every handshake fails.
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
