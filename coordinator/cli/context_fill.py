"""How full the main chat's context window is, in one line (``status`` and ``chat``)."""

from __future__ import annotations

from protocol.wire.control import ContextInfo

SOURCES = {
    "setting": "contextWindow setting",
    "endpoint": "reported by the endpoint",
    "default": "default: the endpoint reports none",
    "provider": "learnt from the provider's overflow error",
}

SHOW_IN_CHAT_FROM = 0.5  # `chat` mentions the fill after a turn once it is this full


def context_line(info: ContextInfo) -> str:
    """E.g. ``context 41% full: ~13,400 of 32,768 tokens (compacts at 80%; 2 compactions)``."""
    share = info.tokens / info.window if info.window else 0.0
    compactions = f"; {info.compactions} compaction{'s' if info.compactions != 1 else ''}"
    return (
        f"context {share:.0%} full: ~{info.tokens:,} of {info.window:,} tokens "
        f"({SOURCES.get(info.window_source, info.window_source)}; compacts at "
        f"{info.compact_at:.0%}{compactions if info.compactions else ''})"
    )


def worth_showing(info: ContextInfo | None) -> bool:
    return info is not None and info.window > 0 and info.tokens / info.window >= SHOW_IN_CHAT_FROM
