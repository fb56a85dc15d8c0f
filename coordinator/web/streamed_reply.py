"""A model reply that is still streaming, as the page's sanitized markdown (``markdown_view``:
the same renderer and sanitizer as a finished reply), without rendering the whole reply
again at every chunk (a long reply would cost the square of its length).

The reply is cut into markdown blocks as it grows. A block that another block followed is
*closed*: its HTML is sent once and the page appends it. The rest (the last block, and a
line still being written) is *open*: its HTML is sent again whenever it is rendered again,
and replaces what the page had for it. The open part is rendered at every chunk while it
is short (``SHORT_OPEN_CHARS``); a longer one (a long code block) only once it grew by a
quarter since its last rendering, and meanwhile the page shows the new text after it as
plain text: every character is then rendered a bounded number of times, so the work stays
linear in the reply's length. When the reply ends (any other event of its turn), it is
rendered whole once, as the conversation's snapshot renders it, and that replaces the
pieces (a link reference defined at the end, say, changes text before it).

Every piece goes through ``markdown_html`` on its own, so each is a whole, balanced,
sanitized fragment: hostile text is as inert cut up as it is whole.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from coordinator.web.markdown_view import markdown_blocks_closed, markdown_html
from protocol.text.inert_text import inert
from protocol.wire.control import LiveChange, LiveReset, LiveTurnEvent, TextChunk

SHORT_OPEN_CHARS = 4096
GROWTH = 1.25  # a long open part is rendered again once it is this much longer
MAX_OPEN_REPLIES = 16  # turns streaming at once (a reply never ended is forgotten)


@dataclass(frozen=True)
class ReplyStep:
    """What a chunk changes on the page: ``closed``, HTML to append for good (may be
    empty); ``open``, the HTML of the open part, or None when it was not rendered again
    (the page shows the chunk's text after it, as text)."""

    closed: str
    open: str | None


class StreamedReply:
    def __init__(self) -> None:
        self._whole: list[str] = []  # every chunk, inert, for the final rendering
        self._open: list[str] = []  # the chunks of the open part
        self._open_chars = 0
        self._rendered_chars = 0  # the open part's length when it was last rendered

    def add(self, text: str) -> ReplyStep:
        text = inert(text)  # per character, so the same whole or in chunks
        self._whole.append(text)
        self._open.append(text)
        self._open_chars += len(text)
        if self._open_chars > SHORT_OPEN_CHARS and (
                self._open_chars < GROWTH * self._rendered_chars):
            return ReplyStep("", None)
        open_text = "".join(self._open)
        cut = markdown_blocks_closed(open_text)
        closed = markdown_html(open_text[:cut]) if cut else ""
        rest = open_text[cut:]
        self._open = [rest]
        self._open_chars = self._rendered_chars = len(rest)
        return ReplyStep(closed, markdown_html(rest))

    def finish(self) -> str:
        """The whole reply, rendered as a finished one is."""
        return markdown_html("".join(self._whole))


class StreamedReplies:
    """The replies streaming now, one per turn, as the web view sends their changes: the
    fields a change's JSON gains for the page."""

    def __init__(self) -> None:
        self._open: OrderedDict[int, StreamedReply] = OrderedDict()

    def fields_for(self, change: LiveChange) -> dict[str, object]:
        if isinstance(change, LiveReset):
            self._open.clear()
            return {}
        if not isinstance(change, LiveTurnEvent):
            return {}
        if isinstance(change.event, TextChunk):
            reply = self._open.get(change.turn)
            if reply is None:
                reply = self._open[change.turn] = StreamedReply()
                while len(self._open) > MAX_OPEN_REPLIES:
                    self._open.popitem(last=False)
            step = reply.add(change.event.text)
            return {"markdown": {"closed": step.closed, "open": step.open}}
        # any other event of the turn ends the text before it: a tool call, the end
        ended = self._open.pop(change.turn, None)
        return {} if ended is None else {"reply_html": ended.finish()}

    def forget(self) -> None:
        """The view missed events (a resync): the pages start again from a snapshot."""
        self._open.clear()
