"""A reopened chat shows where the conversation stands: the last few turns of the saved
session, dimmed, as the service's live snapshot has them (the same entries the web page
starts from)."""

from __future__ import annotations

from coordinator.cli import render
from coordinator.cli.client import ServiceClient
from protocol.text.inert_text import inert
from protocol.wire.control import LiveSnapshot, LiveSnapshotRequest, TranscriptEntry

RECAP_TURNS = 3
MODEL_LINES = 4
DIFF_LINES = 6


def last_turns(entries: tuple[TranscriptEntry, ...], turns: int) -> list[TranscriptEntry]:
    """The entries of the last ``turns`` user turns."""
    starts = [i for i, e in enumerate(entries) if e.kind == "user"]
    if not starts:
        return []
    return list(entries[starts[-turns:][0]:])


def _short(diff: str) -> str:
    """An edit's diff as the live turn showed it, cut to ``DIFF_LINES`` lines."""
    lines = diff.splitlines()
    if len(lines) <= DIFF_LINES:
        return diff
    return "\n".join([*lines[:DIFF_LINES], f"… {len(lines) - DIFF_LINES} more line(s)"])


def show_recap(client: ServiceClient, turns: int = RECAP_TURNS) -> int:
    """Print the session's last turns; how many turns the session has before them
    (0 when there is nothing to show)."""
    from rich.text import Text

    reply = client.request(LiveSnapshotRequest(req_id=client.next_id()), timeout_s=10.0)
    if not isinstance(reply, LiveSnapshot):
        return 0
    entries = reply.conversation
    total = sum(e.kind == "user" for e in entries)
    shown = last_turns(entries, turns)
    if not shown:
        return 0
    earlier = total - sum(e.kind == "user" for e in shown)
    more = f" ({earlier} earlier)" if earlier else ""
    render.console.print(Text(f"── the last turns of this session{more} ──", style="bright_black"))
    for entry in shown:
        if entry.kind == "user":
            render.console.print(Text(f"❯ {inert(entry.text, multiline=False)}",
                                      style="bold bright_black"))
        elif entry.kind == "model":
            lines = inert(entry.text).strip().splitlines()
            cut = lines[:MODEL_LINES] + (["…"] if len(lines) > MODEL_LINES else [])
            render.console.print(Text("\n".join(cut), style="bright_black"))
        else:
            render.console.print(render.tool_line(entry.tool, entry.args, entry.status,
                                                  excerpt=False, exit_code=entry.exit_code,
                                                  diff=_short(entry.diff), path=entry.path))
    render.console.print(Text("──", style="bright_black"))
    return total
