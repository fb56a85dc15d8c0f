"""One tool result never fills the model's context window by itself.

The workers cap a tool's output at a number of characters, but what a character costs
depends on the text (one token per non-ASCII character, one per five ASCII letters), so
a capped result can still be most of a small window. The main chat and a speculation cut
any result estimated above ``TOOL_RESULT_SHARE`` of the window, with a note the model
reads, so the request that carries it still fits beside the history.
"""

from __future__ import annotations

from protocol.model.tokens import cut_to_tokens, estimate_tokens
from protocol.wire.chat import ToolResult

TOOL_RESULT_SHARE = 0.25  # of the window, the most one tool result may take
NOTE_TOKENS = 60  # room kept for the note


def tool_result_tokens(window: int) -> int:
    """The most one tool result may take in a ``window``-token context."""
    return max(256, int(window * TOOL_RESULT_SHARE))


def fit_tool_result(result: ToolResult, limit: int) -> ToolResult:
    """``result`` itself if its text is estimated at most ``limit`` tokens, else cut to
    fit with a note saying how much is shown."""
    body = result.error if result.error is not None else result.output or ""
    if estimate_tokens(body) <= limit:
        return result
    cut = cut_to_tokens(body, limit - NOTE_TOKENS)
    note = (
        f"\n[Output cut to fit the model's context window: showing {len(cut):,} of "
        f"{len(body):,} characters; ask for a narrower part to see more.]"
    )
    if result.error is not None:
        return ToolResult(result.call_id, result.name, error=cut + note)
    return ToolResult(result.call_id, result.name, output=cut + note)


__all__ = ["TOOL_RESULT_SHARE", "fit_tool_result", "tool_result_tokens"]
