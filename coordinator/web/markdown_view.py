"""The model's text as the page shows it: markdown rendered by markdown-it (CommonMark, raw
HTML in the text disabled) and the result passed through nh3 (the ammonia sanitizer) with a
small allowlist: text structure only (paragraphs, emphasis, code, lists, headings, quotes,
tables), no attributes at all, so no link, image, style or script can come from model text:
a link shows its text and then its address as text, an image its description.
The text is made inert first, as everywhere on the page: a control character shows as its
escape, never as itself."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererProtocol
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from protocol.text.inert_text import inert

ALLOWED_TAGS = {
    "p", "br", "em", "strong", "code", "pre", "ul", "ol", "li", "blockquote", "hr",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "del",
}


def _link_close(
    renderer: RendererProtocol, tokens: Sequence[Token], idx: int, options: OptionsDict,
    env: EnvType,
) -> str:
    """A link's end: its address after its text, as text (the sanitizer keeps no link, and a
    person should still see where it pointed; a link whose text is its address says it
    once). markdown-it already refused ``javascript:``, ``data:`` and the like: those stay
    the literal text the model wrote."""
    depth = 0
    for back in range(idx - 1, -1, -1):  # this close's open, past any nested one
        token = tokens[back]
        if token.type == "link_close":
            depth += 1
        elif token.type == "link_open":
            if depth == 0:
                href = str(token.attrGet("href") or "")
                text = "".join(t.content for t in tokens[back + 1 : idx])
                return "" if not href or text == href else f" ({escapeHtml(href)})"
            depth -= 1
    return ""


def _image(
    renderer: RendererProtocol, tokens: Sequence[Token], idx: int, options: OptionsDict,
    env: EnvType,
) -> str:
    """An image as the words it stands for (the page loads nothing the model names)."""
    alt = "".join(t.content for t in tokens[idx].children or [])
    return f"[image: {escapeHtml(alt)}]" if alt else "[image]"


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    parser.add_render_rule("link_close", _link_close)
    parser.add_render_rule("image", _image)
    return parser


def markdown_html(text: str) -> str:
    """``text`` (model output) as sanitized HTML."""
    html = _parser().render(inert(text))
    return nh3.clean(html, tags=ALLOWED_TAGS, attributes={}, link_rel=None)


def markdown_blocks_closed(text: str) -> int:
    """How much of ``text`` (a reply still streaming) is whole markdown blocks that no
    more text can change: everything before the start of its last block, found among its
    whole lines (the line being written may still turn into anything). 0 when it is one
    block so far."""
    whole_lines = text[: text.rfind("\n") + 1]
    if not whole_lines:
        return 0
    starts = [token.map[0] for token in _parser().parse(whole_lines)
              if token.level == 0 and token.nesting >= 0 and token.map is not None]
    if len(starts) < 2:
        return 0
    offset = 0
    for _ in range(starts[-1]):  # markdown-it counts lines at "\n" only, as here
        offset = whole_lines.index("\n", offset) + 1
    return offset
