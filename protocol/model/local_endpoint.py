"""Whether an endpoint is a local model server (llama.cpp, Ollama, LM Studio, a vLLM on the
LAN) rather than a hosted API: where small models run and write tool calls as text."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

_LOCAL_NAMES = frozenset({"localhost", "host.docker.internal"})


def is_local_endpoint(base_url: str) -> bool:
    """A loopback, private (RFC 1918, unique-local) or link-local address, ``localhost``
    or a ``.local``/``.lan`` name."""
    host = (urlsplit(base_url).hostname or "").lower().rstrip(".")
    if not host:
        return False
    if host in _LOCAL_NAMES or host.endswith((".localhost", ".local", ".lan")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local
