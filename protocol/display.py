"""How tool calls and results are shortened for people, on the wire (``ToolShown.args`` and
``.result``) and wherever a client shows a call itself (an approval question)."""

from __future__ import annotations

from protocol.chat import ToolCall

__all__ = ["cut", "format_args"]


def cut(text: str, limit: int, *, one_line: bool = False) -> str:
    """``text`` shortened to ``limit`` characters with an ellipsis; ``one_line`` folds
    newlines first (argument displays)."""
    if one_line:
        text = text.replace("\n", " ").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_args(call: ToolCall) -> str:
    """`key: value` pairs for display, each cut to 80 characters."""
    parts = []
    for key, value in call.args().items():
        shown = value if isinstance(value, str) else repr(value)
        parts.append(cut(f"{key}: {shown}", 80, one_line=True))
    return ", ".join(parts)
