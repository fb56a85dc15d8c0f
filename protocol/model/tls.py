"""One TLS context per process, built at import.

Building a verifying SSL context (loading the CA bundle) is most of what a new
``httpx.AsyncClient`` costs (~20-40 ms). Worker processes come from a fork server that
imports this module, so every worker inherits a ready context and its first model
request does not pay for it.
"""

from __future__ import annotations

import ssl

import certifi

SSL_CONTEXT: ssl.SSLContext = ssl.create_default_context(cafile=certifi.where())
