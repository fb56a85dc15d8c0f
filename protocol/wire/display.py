"""How tool calls and results are shortened for people, on the wire (``ToolShown.args`` and
``.result``) and wherever a client shows a call itself (an approval question)."""

from __future__ import annotations

from protocol.text.inert_text import inert
from protocol.wire.chat import ToolCall

__all__ = ["cut", "format_args"]


def cut(text: str, limit: int, *, one_line: bool = False) -> str:
    """``text`` shortened to ``limit`` characters with an ellipsis; ``one_line`` folds
    newlines first (argument displays)."""
    if one_line:
        text = text.replace("\n", " ").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_args(call: ToolCall, *, limit: int | None = 80) -> str:
    """`key: value` pairs for display, each cut to ``limit`` characters (None: whole).

    A value is put on one line by :func:`inert`, never by folding: a newline shows as
    ``\\n`` and surrounding spaces stay, so ``a\\nb`` and ``a b`` (two file names, or a
    command whose second line hides behind a ``#`` on the first) never look alike."""
    parts = []
    for key, value in call.args().items():
        shown = value if isinstance(value, str) else repr(value)
        part = inert(f"{key}: {shown}", multiline=False)
        parts.append(part if limit is None else cut(part, limit))
    return ", ".join(parts)
