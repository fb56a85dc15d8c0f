"""The web view in a real browser against hostile input and hostile pages.

The model is scripted to suggest a prompt holding ``<script>`` and ``<img onerror>``, to
answer in its speculation with markup, a bidi override and terminal escapes, and to write
a file whose *name* is an ``<img onerror>`` tag and whose lines are markup and escapes.
All of it must show as the literal text it is (escapes as the terminal shows them) and
run nothing: no dialog, no element it names, no handler. And the page's doors: no token,
a rebinding host name, a POST from another origin are refused in the browser.
"""

from __future__ import annotations

import http.server
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from coordinator.service.chat.history import HistoryStore
from protocol.text.inert_text import inert
from tests.coordinator.e2e import FIX, scenario_variant, start_playing
from tests.support import Specrun, local_http_server, wait_until
from tests.web_support import (
    WebView,
    browser,
    need_chromium,
    open_page,
    signed_in_by,
    web_view,
)

# One Chromium for the module (tests/conftest.py): each test still gets a fresh context.
pytestmark = pytest.mark.usefixtures("shared_chromium")

# The service refuses a suggestion with control or bidi characters outright
# (hidden_characters); markup in one is plain text and must stay so.
SUGGESTION = "write <script>alert('s')</script> <img src=x onerror=alert('i')> pwned now"
FILE = "<img src=x onerror=alert('file')>.txt"
CONTENT = (
    "<script>alert('diff')</script>\n\x1b[2J\x1b]0;pwned\x07<img src=x onerror=alert('line')>\n"
)
MODEL_TEXT = "<script>alert('model')</script>\u202e \x1b[31mred"


def _hostile(rules: list[Any]) -> None:
    rules[:0] = [
        {
            "name": "hostile suggestion",
            "when": {"purpose": "suggestion", "prompt_contains": "Fixed `add` in src/calc.py"},
            "reply": {"json": {"suggestion": SUGGESTION}, "latency_ms": 50},
        },
        {
            "name": "hostile speculation writes",
            "when": {"last_user": "pwned"},
            "reply": {
                "text": MODEL_TEXT,
                "tool_calls": [
                    {"name": "write_file", "arguments": {"file_path": FILE, "content": CONTENT}},
                    {"name": "write_file",
                     "arguments": {"file_path": "conftest.py", "content": "import os\n"}},
                ],
            },
        },
        {
            "name": "hostile speculation ends",
            "when": {"turn_user": "pwned", "last_tool": "write_file"},
            "reply": {"text": "wrote <b onmouseover=alert('end')>it</b>"},
        },
    ]


@pytest.fixture
def hostile(specrun: Specrun, tmp_path: Path) -> Iterator[Specrun]:
    need_chromium()
    start_playing(specrun, scenario_variant(tmp_path, _hostile))
    try:
        yield specrun
    finally:
        specrun.run("stop")


def _no_foreign_markup(page: Any) -> None:
    found = page.evaluate(
        """() => ({
            scripts: [...document.scripts].map(s => s.getAttribute('src')),
            imgs: document.images.length,
            handlers: [...document.querySelectorAll('*')].flatMap(e =>
                [...e.attributes].filter(a => a.name.startsWith('on')).map(a => a.name)),
            bold: document.querySelectorAll('b').length,
            title: document.title,
        })"""
    )
    assert found == {"scripts": ["/first.js", "/app.js"], "imgs": 0, "handlers": [], "bold": 0,
                     "title": "specrun"}


def test_hostile_suggestion_file_names_and_diff_lines_show_as_text_and_run_nothing(
    hostile: Specrun,
) -> None:
    with web_view(hostile) as web, browser() as context:
        page = context.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(web.url)
        page.wait_for_selector("#connection.ok")
        signed_in_by(page, web)
        assert hostile.run("ask", FIX).returncode == 0

        page.wait_for_selector('.branch[data-rank="0"] .badge.status-completed', timeout=30_000)
        branch = page.locator('.branch[data-rank="0"]')
        assert branch.locator(".branch-text").text_content() == inert(SUGGESTION)
        page.wait_for_selector('.file-head >> text=created: conftest.py +1 -0')
        heads = branch.locator(".file-head").all_text_contents()
        assert heads == [f"created: {FILE} +2 -0", "created: conftest.py +1 -0"]
        named, conftest = branch.locator(".file").all()
        added = named.locator("pre.diff span.add").all_text_contents()
        assert added == ["+" + inert(line) for line in CONTENT.splitlines()]
        # The file a later step runs by itself is marked so (the other one is not).
        assert conftest.locator(".warn").text_content().startswith("runs later")
        assert named.locator(".warn").count() == 0
        steps = branch.locator(".steps").text_content()
        assert inert(MODEL_TEXT) in steps
        assert "wrote <b onmouseover=alert('end')>it</b>" in steps
        _no_foreign_markup(page)

        # Taking it puts the file with that very name on disk; the conversation then
        # shows the hostile transcript, as text too.
        branch.locator("button.accept").click()
        assert wait_until(lambda: (hostile.project / FILE).exists(), timeout=20)
        assert (hostile.project / FILE).read_text() == CONTENT
        page.wait_for_selector(".turn .end >> text=turn accepted")
        conversation = page.locator("#conversation").text_content()
        assert inert(MODEL_TEXT) in conversation
        assert inert(SUGGESTION) in conversation
        _no_foreign_markup(page)
        assert dialogs == [] and errors == []


def _send_html(handler: http.server.BaseHTTPRequestHandler, body: bytes) -> None:
    handler.send_response(200)
    handler.send_header("content-type", "text/html")
    handler.send_header("content-length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _EvilPage(http.server.BaseHTTPRequestHandler):
    """Another site on this machine: its page posts to the web view on its own."""

    target = ""

    def do_GET(self) -> None:
        body = f"""<!doctype html><title>evil</title>
<form method="post" action="{self.target}/api/ask" enctype="text/plain">
<input name='{{"text": "fix the failing test in tests/test_calc.py", "x": "' value='"}}'>
</form>
<script>
fetch("{self.target}/api/ask", {{method: "POST", mode: "no-cors", credentials: "include",
  headers: {{"Content-Type": "text/plain"}}, body: JSON.stringify({{text: "commit this"}})}})
  .finally(() => document.forms[0].submit());
</script>""".encode()
        _send_html(self, body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def evil_site(web_service: Specrun) -> Iterator[tuple[Specrun, WebView, str]]:
    with web_view(web_service) as web:
        handler = type("Evil", (_EvilPage,), {"target": web.base})
        with local_http_server(handler) as server:
            yield web_service, web, f"http://127.0.0.1:{server.server_port}/"


def test_in_the_browser_no_token_a_rebinding_host_and_a_cross_origin_post_are_refused(
    evil_site: tuple[Specrun, WebView, str],
) -> None:
    specrun, web, evil = evil_site
    rebind = "--host-resolver-rules=MAP rebound.test 127.0.0.1"
    with browser(rebind) as context:
        page = context.new_page()
        # No token: nothing but the refusal.
        response = page.goto(web.base + "/")
        assert response.status == 403
        assert "open the URL `specrun web` printed" in page.locator("body").text_content()
        assert page.evaluate("document.scripts.length") == 0

        # Signed in, as the person is...
        page.goto(web.url)
        page.wait_for_selector("#connection.ok")
        before = HistoryStore(specrun.project).load()

        # ... a page whose name resolves to 127.0.0.1 (DNS rebinding) gets nothing, not
        # even with the token,
        for path in (f"/?token={web.token}", "/", "/api/events"):
            response = page.goto(f"http://rebound.test:{web.port}{path}")
            assert response.status == 421, path
        assert not any(c["domain"] == "rebound.test" for c in context.cookies())

        # ... and another site's page that posts to the view (a form, and a no-cors
        # fetch) is refused: same site as far as the cookie goes, but not same origin.
        page.goto(evil)
        page.wait_for_url(web.base + "/api/ask", timeout=20_000)
        assert "did not come from the web view's own page" in page.locator("body").text_content()
        assert HistoryStore(specrun.project).load() == before
        assert specrun.json("suggestion")["text"] is None


class _CookieCatcher(http.server.BaseHTTPRequestHandler):
    """Another user's server on another port of 127.0.0.1: it keeps the cookies it is sent."""

    caught: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.caught.append(self.headers.get("cookie") or "")
        body = b"<!doctype html><title>other</title><p>another server"
        _send_html(self, body)

    def log_message(self, *args: Any) -> None:
        pass


def test_the_cookie_a_browser_hands_to_another_port_opens_nothing(
    web_service: Specrun,
) -> None:
    """Browsers send a host's cookies to every port of it: a server on another port of
    127.0.0.1 that the person opens learns the view's cookie. Replayed with every header a
    browser would send, it must get neither the event stream nor a button."""
    import httpx

    specrun = web_service
    catcher: type[_CookieCatcher] = type("Catcher", (_CookieCatcher,), {"caught": []})
    with web_view(specrun) as web, local_http_server(catcher) as other, browser() as context:
        page = open_page(context, web)
        assert page.url == web.base + "/"  # the key left the address bar too
        page.goto(f"http://127.0.0.1:{other.server_port}/")
        assert wait_until(lambda: catcher.caught, timeout=10)
        stolen = catcher.caught[0]
        assert stolen.startswith(f"specrun_web_{web.port}="), catcher.caught
        assert web.token not in stolen and web.key not in stolen
        before = HistoryStore(specrun.project).load()
        forged = {"host": f"127.0.0.1:{web.port}", "cookie": stolen, "origin": web.base,
                  "sec-fetch-site": "same-origin"}
        events = httpx.get(web.base + "/api/events", headers=forged, timeout=30)
        assert events.status_code == 403
        asked = httpx.post(web.base + "/api/ask", content='{"text": "commit this"}',
                           headers={**forged, "content-type": "application/json"}, timeout=30)
        assert asked.status_code == 403
        assert HistoryStore(specrun.project).load() == before
        # The person's own page still works, back from the other site: a reload reads
        # its key from the origin's storage.
        page.goto(web.base + "/")
        page.wait_for_selector("#connection.ok")


def test_a_link_with_another_key_does_not_sign_the_page_out(web_service: Specrun) -> None:
    """A page on another port of 127.0.0.1 may link to the view with a #handoff= code of
    its own (the cookie goes along: same site). The page keeps the key that works."""
    with web_view(web_service) as web, browser() as context:
        page = open_page(context, web)
        linked = context.new_page()  # a new document, as a link from elsewhere opens
        linked.goto(f"{web.base}/#handoff=not-the-code")
        linked.wait_for_selector("#connection.ok", timeout=20_000)
        assert linked.url == web.base + "/"
        assert linked.evaluate("localStorage.getItem('specrun_key')") == web.key
        page.reload()
        page.wait_for_selector("#connection.ok", timeout=20_000)


def test_the_printed_url_signs_in_once_and_leaves_no_secret_in_the_address(
    web_service: Specrun,
) -> None:
    """The history of the browser that opened the printed URL holds neither the token nor
    the key: the token is spent by that load, and the key was never in a URL (the page's
    first script takes the one-time code out before anything else loads)."""
    with web_view(web_service) as web, browser() as context:
        seen: list[str] = []
        page = context.new_page()
        page.on("framenavigated", lambda frame: seen.append(frame.url))
        page.goto(web.url)
        page.wait_for_selector("#connection.ok")
        signed_in_by(page, web)
        assert page.url == web.base + "/"
        assert not any(web.key in url for url in seen), seen
        other = context.new_page()  # the same URL again, from the history or a paste
        answer = other.goto(web.url)
        assert answer is not None and answer.status == 403
        assert "used already" in other.locator("body").text_content()
        page.reload()
        page.wait_for_selector("#connection.ok")  # the signed-in page stays signed in
