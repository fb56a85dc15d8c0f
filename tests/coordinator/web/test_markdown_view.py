"""The model's markdown as the page gets it: structure only, nothing that runs or links."""

from __future__ import annotations

import re

import pytest

from coordinator.web.markdown_view import ALLOWED_TAGS, markdown_html

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "![x](http://evil/x.png)",
    '<a href="http://evil">x</a>',
    "<iframe srcdoc='<script>1</script>'></iframe>",
    "*a* <b onclick=x>b</b> `c`",
    "<svg><style>*{}</style></svg>",
    "text\x1b]52;c;Y3VybA==\x07 more",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_markdown_gives_no_attribute_no_foreign_tag_no_control_byte(text: str) -> None:
    html = markdown_html(text)
    tags = re.findall(r"<\s*/?\s*([a-zA-Z0-9]+)([^>]*)>", html)
    assert {name.lower() for name, _ in tags} <= ALLOWED_TAGS, html
    assert all(not attrs.strip() for _, attrs in tags), html
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", html), html
    assert "javascript:" not in html.lower() or "<a" not in html.lower()


def test_structure_survives() -> None:
    html = markdown_html("# Title\n\n- *one*\n- `two`\n\n```\ncode\n```\n")
    for tag in ("<h1>", "<ul>", "<li>", "<em>", "<code>", "<pre>"):
        assert tag in html


def test_a_link_shows_where_it_pointed_and_an_image_what_it_showed_as_text_only() -> None:
    assert markdown_html("see [the docs](https://example.com/a?b=<1>) now") == (
        "<p>see the docs (https://example.com/a?b=%3C1%3E) now</p>\n")
    assert markdown_html("<https://example.com>") == "<p>https://example.com</p>\n"
    assert markdown_html("![a *cat*](https://evil/x.png)") == "<p>[image: a cat]</p>\n"
    # the links markdown-it refuses stay what the model wrote
    assert markdown_html("[x](javascript:alert(1))") == "<p>[x](javascript:alert(1))</p>\n"
