"""A reply rendered while it streams (coordinator/web/streamed_reply.py): however it is cut
into chunks, the closed pieces and the last open rendering are the whole reply's markdown,
every piece is sanitized on its own, and a long open block is not rendered at every chunk."""

from __future__ import annotations

import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.web.markdown_view import ALLOWED_TAGS, markdown_html
from coordinator.web.streamed_reply import SHORT_OPEN_CHARS, StreamedReplies, StreamedReply
from protocol.wire.control import LiveReset, LiveTurnEvent, TextChunk, ToolShown

REPLIES = [
    "# Title\n\nSome **bold** text\nmore.\n\n- a\n- b\n\n```python\nx = 1\n\ny = 2\n```\n\n"
    "| a | b |\n|---|---|\n| 1 | 2 |\n\nEnd.\n",
    "para\n- item one\n- item two\n\n  continued\n\n> quote\nlazy\n\n---\nSetext\n===\n",
    "1. one\n2. two\n\n    indented code\n\n    more code\n\ntext\n#\n#x\n",
    "<script>alert(1)</script>\n\n<img src=x onerror=alert(1)> [a](javascript:x)\n\n"
    "![i](data:image/png;base64,AAAA) <b onclick=x>b</b>\x1b]52;c;eA==\x07\n\n`done`",
]


def _streamed(text: str, cuts: list[int]) -> tuple[str, StreamedReply, list[str]]:
    reply, closed, open_html = StreamedReply(), [], ""
    bounds = [0, *sorted(set(cuts)), len(text)]
    for start, end in itertools.pairwise(bounds):
        if end <= start:
            continue
        step = reply.add(text[start:end])
        closed.append(step.closed)
        if step.open is not None:
            open_html = step.open
    return "".join(closed) + open_html, reply, closed


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(REPLIES), st.lists(st.integers(min_value=0, max_value=400), max_size=40))
def test_the_pieces_are_the_whole_replys_markdown_however_it_is_cut(
    text: str, cuts: list[int]
) -> None:
    shown, reply, closed = _streamed(text, [c for c in cuts if c < len(text)])
    assert shown == markdown_html(text)
    assert reply.finish() == markdown_html(text)
    for piece in closed:  # each piece alone is sanitized: structure only, no attributes
        tags = re.findall(r"<\s*/?\s*([a-zA-Z0-9]+)([^>]*)>", piece)
        assert {name.lower() for name, _ in tags} <= ALLOWED_TAGS, piece
        assert all(not attrs.strip() for _, attrs in tags), piece


def test_a_long_open_block_is_rendered_again_only_as_it_grows_by_a_quarter() -> None:
    reply = StreamedReply()
    reply.add("```\n")
    rendered = 0
    line = "x = 1\n"
    for _ in range(20 * SHORT_OPEN_CHARS // len(line)):
        step = reply.add(line)
        rendered += step.open is not None
    # all of it while under SHORT_OPEN_CHARS, then about log_1.25(20) more times
    assert rendered <= SHORT_OPEN_CHARS // len(line) + 20, rendered
    assert "x = 1" in reply.finish()


def test_a_turns_other_event_ends_its_reply_and_a_reset_forgets_them() -> None:
    replies = StreamedReplies()
    text = replies.fields_for(LiveTurnEvent(1, TextChunk(7, "**a**\n\nb")))
    # the line being written may still change what came before it: nothing closed yet
    assert text == {"markdown": {"closed": "", "open": "<p><strong>a</strong></p>\n<p>b</p>\n"}}
    text = replies.fields_for(LiveTurnEvent(1, TextChunk(7, "\n")))
    assert text == {"markdown": {"closed": "<p><strong>a</strong></p>\n", "open": "<p>b</p>\n"}}
    assert replies.fields_for(LiveTurnEvent(2, TextChunk(8, "other turn"))) != {}
    ended = replies.fields_for(LiveTurnEvent(1, ToolShown(7, "c1", "read_file", "", "running")))
    assert ended == {"reply_html": "<p><strong>a</strong></p>\n<p>b</p>\n"}
    finished = ToolShown(7, "c1", "read_file", "", "success")
    assert replies.fields_for(LiveTurnEvent(1, finished)) == {}
    replies.fields_for(LiveReset("s2"))
    assert replies.fields_for(LiveTurnEvent(2, ToolShown(8, "c2", "x", "", "running"))) == {}
