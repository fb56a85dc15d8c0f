"""How tool calls and results are shortened for people, on the wire (``ToolShown.args`` and
``.result``) and wherever a client shows a call itself (an approval question)."""

from __future__ import annotations

import difflib

from protocol.text.inert_text import inert
from protocol.wire.chat import ToolCall

__all__ = ["call_diff", "call_path", "cut", "format_args"]

# What a file tool call changes, as a person reads an edit: a unified diff of the text it
# replaces (``edit``: ``old_string`` to ``new_string``) or the lines it writes
# (``write_file``), bounded. Built from the call's own arguments, so it shows what the model
# asked for; what Tab applies is the coordinator's diff of the real files (``specrun diff``).
MAX_DIFF_LINES = 40


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



def call_diff(call: ToolCall, max_lines: int = MAX_DIFF_LINES) -> str:
    """The call's change as diff lines (``-``/``+``/`` `` prefixed, no file headers), or
    '' for a call that is not a file edit or write, or whose arguments are not text."""
    args = call.args()
    if call.name == "edit":
        old, new = args.get("old_string"), args.get("new_string")
        if not isinstance(old, str) or not isinstance(new, str):
            return ""
        hunks = list(difflib.unified_diff(
            old.splitlines(), new.splitlines(), lineterm="", n=2))[2:]  # no ---/+++ lines
        # line numbers of the replaced text say nothing of the file: hunks apart by "…"
        lines = [("…" if line.startswith("@@") else line) for line in hunks][1:]
    elif call.name == "write_file":
        content = args.get("content")
        if not isinstance(content, str):
            return ""
        lines = ["+" + line for line in content.splitlines()]
    else:
        return ""
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"… {len(lines) - max_lines} more line(s)"]
    return "\n".join(lines)


def call_path(call: ToolCall) -> str:
    """The file a file tool call names ('' if none)."""
    path = call.args().get("file_path")
    return path if isinstance(path, str) else ""
