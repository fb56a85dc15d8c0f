"""``specrun undo``'s reply drawn for a person (the chat's ``/undo`` prints the same)."""

from __future__ import annotations

import time

from protocol.text.inert_text import inert
from protocol.wire.control import CheckpointInfo, UndoFile, UndoReply

VERBS = {
    "restore": "restored",
    "remove": "removed",
    "recreate": "recreated",
    "kept": "kept",
    "already": "already as before",
}
PREVIEW = {
    "restore": "restores",
    "remove": "removes",
    "recreate": "recreates",
    "kept": "keeps",
    "already": "already as before",
}


def undo_text(reply: UndoReply) -> str:
    """A listing (``--list``: no message), or what an undo did or would do."""
    if not reply.message:
        if not reply.checkpoints:
            return "Nothing to undo: no accept or turn of this session wrote files."
        return _listing(reply)
    lines = [inert(reply.message)]
    lines += [_file_line(f, VERBS if reply.undone else PREVIEW) for f in reply.files]
    return "\n".join(lines)


def _listing(reply: UndoReply) -> str:
    lines = ["turn  kind    when      prompt"]
    for checkpoint in reply.checkpoints:
        lines.append(_checkpoint_line(checkpoint))
        lines += ["      " + _file_line(f, PREVIEW) for f in checkpoint.files]
    lines.append(f"`specrun undo` takes back turn {reply.checkpoints[-1].turn}; "
                 "`specrun undo N` every turn from N on. "
                 f"Earlier contents kept: {_size(reply.store_bytes)}.")
    return "\n".join(lines)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1024 * 1024:
        return f"{count / 1024:,.1f} KiB"
    return f"{count / (1024 * 1024):,.1f} MiB"


def _checkpoint_line(checkpoint: CheckpointInfo) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(checkpoint.created))
    prompt = inert(checkpoint.prompt).replace("\n", " ")
    if len(prompt) > 50:
        prompt = prompt[:49] + "…"
    return f"{checkpoint.turn:>4}  {checkpoint.kind:<6}  {when}  {prompt}"


def _file_line(entry: UndoFile, verbs: dict[str, str]) -> str:
    why = f" ({inert(entry.why)})" if entry.why else ""
    return f"  {verbs[entry.action]:<9} {inert(entry.path)}{why}"
