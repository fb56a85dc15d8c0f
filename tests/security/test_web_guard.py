"""The web view's guard at the HTTP level (httpx against a real `specrun web` and a real
service): the token, the cookie it becomes, loopback Host names only, same-origin POSTs,
and the security headers on every answer. The page's own code is checked for the
constructs that would turn text into markup or code."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from coordinator.service.chat.history import HistoryStore
from tests.support import REPO, Specrun, make_sample_project, running_service
from tests.web_support import WebView, web_view

STATIC = REPO / "coordinator" / "web" / "static"


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Specrun, WebView]]:
    project = make_sample_project(tmp_path_factory.mktemp("web") / "proj")
    with running_service(project, "--approval-mode", "auto-edit") as specrun, web_view(
        specrun
    ) as web:
        yield specrun, web


def _get(web: WebView, path: str, *, host: str | None = None, cookie: bool = True,
         **headers: str) -> httpx.Response:
    sent = {"host": host or f"127.0.0.1:{web.port}", **headers}
    if cookie:
        sent["cookie"] = web.cookie
        if path.startswith("/api/"):
            sent["x-specrun-key"] = web.key
    return httpx.get(web.base + path, headers=sent, follow_redirects=False, timeout=30)


def _post(web: WebView, path: str, body: str = "{}", *, origin: str | None = "same",
          content_type: str = "application/json", **headers: str) -> httpx.Response:
    sent = {"host": f"127.0.0.1:{web.port}", "cookie": web.cookie, "content-type": content_type,
            "x-specrun-key": web.key, **headers}
    if origin == "same":
        sent["origin"] = web.base
    elif origin is not None:
        sent["origin"] = origin
    return httpx.post(web.base + path, content=body, headers=sent, timeout=60)


def _csp_ok(response: httpx.Response) -> None:
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert "server" not in response.headers  # nothing said of what serves it


def test_the_view_listens_on_loopback_only(view: tuple[Specrun, WebView]) -> None:
    _, web = view
    assert web.url.startswith("http://127.0.0.1:")
    import psutil

    listening = [
        c.laddr for c in psutil.Process(web.proc.pid).net_connections("inet")
        if c.status == psutil.CONN_LISTEN
    ]
    assert listening and all(addr.ip == "127.0.0.1" for addr in listening), listening


def test_without_the_token_nothing_is_served(view: tuple[Specrun, WebView]) -> None:
    _, web = view
    for path in ("/", "/first.js", "/app.js", "/app.css", "/api/events"):
        response = _get(web, path, cookie=False)
        assert response.status_code == 403, path
        assert "specrun web" in response.text and "<script" not in response.text
        _csp_ok(response)
    wrong = _get(web, "/?token=" + "A" * len(web.token), cookie=False)
    assert wrong.status_code == 403
    forged = httpx.get(web.base + "/", headers={"cookie": f"specrun_web_{web.port}=nope"})
    assert forged.status_code == 403
    posted = httpx.post(web.base + "/api/reject", content="{}",
                        headers={"origin": web.base, "content-type": "application/json"})
    assert posted.status_code == 403


def test_the_token_becomes_an_httponly_strict_cookie_and_leaves_the_url(
    view: tuple[Specrun, WebView],
) -> None:
    _, web = view
    response = web.trade
    assert response.status_code == 303
    # To the bare URL; the fragment (which no request carries) holds a one-time code the
    # page trades for its key: the key is in no URL, and the code works once.
    code = response.headers["location"].removeprefix("/#handoff=")
    assert response.headers["location"] == f"/#handoff={code}" and code != web.key
    assert web.key  # traded (web_support), so the code is spent now:
    again = httpx.post(web.base + "/handoff", json={"code": code},
                       headers={"cookie": web.cookie, "origin": web.base})
    assert again.status_code == 403 and "used already" in again.text
    # And the printed token is spent too: the browser's history cannot sign in again.
    spent = httpx.get(web.url, follow_redirects=False)
    assert spent.status_code == 403 and "used already" in spent.text
    assert "set-cookie" not in spent.headers
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"specrun_web_{web.port}=")
    value = cookie.split(";")[0].split("=", 1)[1]
    assert len({value, web.key, web.token}) == 3  # three secrets: none gives another
    attributes = {a.strip().lower() for a in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attributes
    _csp_ok(response)
    page = _get(web, "/")
    assert page.status_code == 200 and '<script src="/app.js"' in page.text
    _csp_ok(page)


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:{port}", "127.0.0.1", "127.0.0.1:1", "localhost.evil:{port}",
     "127.0.0.2:{port}", "0.0.0.0:{port}"],
)
def test_a_host_that_is_not_a_loopback_name_with_the_port_is_refused(
    view: tuple[Specrun, WebView], host: str
) -> None:
    _, web = view
    response = _get(web, "/", host=host.format(port=web.port))
    assert response.status_code == 421
    assert "<script" not in response.text
    with_token = _get(web, f"/?token={web.token}", host=host.format(port=web.port), cookie=False)
    assert with_token.status_code == 421 and "set-cookie" not in with_token.headers


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "[::1]"])
def test_each_loopback_name_is_served(view: tuple[Specrun, WebView], name: str) -> None:
    _, web = view
    assert _get(web, "/", host=f"{name}:{web.port}").status_code == 200


def test_a_post_from_another_origin_or_without_one_is_refused(
    view: tuple[Specrun, WebView],
) -> None:
    specrun, web = view
    before = HistoryStore(specrun.project).load()
    for origin in (None, "null", "http://evil.example", f"http://127.0.0.1:{web.port + 1}",
                   f"http://localhost:{web.port}", f"https://127.0.0.1:{web.port}"):
        response = _post(web, "/api/ask", '{"text": "fix the failing test"}', origin=origin)
        assert response.status_code == 403, origin
    cross_site = _post(web, "/api/reject", **{"sec-fetch-site": "cross-site"})
    assert cross_site.status_code == 403
    form = _post(web, "/api/ask", "text=hi", content_type="application/x-www-form-urlencoded")
    assert form.status_code == 415
    plain = _post(web, "/api/reject", "{}", content_type="text/plain")
    assert plain.status_code == 415
    assert _post(web, "/api/reject", "{}").status_code == 200  # the page's own request
    assert HistoryStore(specrun.project).load() == before  # no refused prompt ran
    options = httpx.options(web.base + "/api/ask",
                            headers={"cookie": web.cookie, "origin": "http://evil.example"})
    assert options.status_code == 405
    assert "access-control-allow-origin" not in options.headers


def test_the_cookie_alone_opens_neither_the_data_nor_the_buttons(
    view: tuple[Specrun, WebView],
) -> None:
    """A browser sends 127.0.0.1's cookies to every port of it, so another user's server
    there can learn the cookie: it must not be enough for the event stream or a POST."""
    specrun, web = view
    before = HistoryStore(specrun.project).load()
    only_cookie = {"host": f"127.0.0.1:{web.port}", "cookie": web.cookie}
    for key in (None, "", "A" * len(web.key), web.token):
        sent = dict(only_cookie) if key is None else {**only_cookie, "x-specrun-key": key}
        assert httpx.get(web.base + "/api/events", headers=sent).status_code == 403, key
        posted = httpx.post(web.base + "/api/ask", content='{"text": "commit this"}',
                            headers={**sent, "origin": web.base,
                                     "content-type": "application/json"})
        assert posted.status_code == 403, key
    twice = httpx.get(f"{web.base}/api/events?key={web.key}&key={web.key}", headers=only_cookie)
    assert twice.status_code == 403
    # Nor can the cookie alone get the key handed out by the first load's answer.
    for method, path in (("POST", "/?token=x"), ("GET", "/?xtoken=1"), ("HEAD", "/?token=x"),
                         ("POST", f"/?token={'A' * len(web.token)}")):
        answer = httpx.request(method, web.base + path, content="{}", headers={
            **only_cookie, "origin": web.base, "content-type": "application/json"})
        assert web.key not in answer.headers.get("location", ""), (method, path)
        assert "set-cookie" not in answer.headers, (method, path)
    assert HistoryStore(specrun.project).load() == before
    # The page itself needs no key (it holds no data); the cookie still guards it.
    assert _get(web, "/").status_code == 200


def test_the_event_stream_needs_the_cookie_and_starts_with_a_snapshot(
    view: tuple[Specrun, WebView],
) -> None:
    specrun, web = view
    refused = _get(web, "/api/events", cookie=False)
    assert refused.status_code == 403
    headers = {"cookie": web.cookie}
    url = f"{web.base}/api/events?key={web.key}"  # as the page's EventSource asks
    with httpx.stream("GET", url, headers=headers, timeout=30) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        _csp_ok(stream)  # type: ignore[arg-type]
        lines = stream.iter_lines()
        assert next(lines) == "event: snapshot"
        data = next(lines)
        assert data.startswith('data: {"type":"live_snapshot"')
        assert str(specrun.project) in data


def test_the_page_never_turns_text_into_markup_or_code() -> None:
    script = (STATIC / "app.js").read_text()
    code = re.sub(r"//.*", "", script)  # its comments name what it avoids
    # The one exception: the model's markdown, which the web view renders and passes
    # through the nh3 sanitizer with no attributes allowed (coordinator/web/markdown_view.py,
    # tests/coordinator/web/test_markdown_view.py), put on the page by one function only,
    # and only ever given those fields.
    sink = re.search(r"function putSanitized\(node, html, append = false\) \{\n(.*?)\n\}",
                     code, re.S)
    assert sink is not None
    assert sink.group(1).split("\n") == [
        '  if (append) node.insertAdjacentHTML("beforeend", html);',
        "  else node.innerHTML = html;"]
    code = code.replace(sink.group(0), "")
    given = re.findall(r"putSanitized\(([^;]*)\);", code)
    assert given and all(re.fullmatch(
        r"(node|item\.\w+), (html|markdown\.(closed|open)(, true)?)", g) for g in given), given
    assert set(re.findall(r"Node\(([^)]*\bhtml\b[^)]*)\)", code)) <= {
        "entry.html", "step.html", "html"}
    for construct in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                      "eval(", "new Function", "setTimeout(\"", "setInterval(\"",
                      "createContextualFragment", "DOMParser", "srcdoc"):
        assert construct not in code, construct
    page = (STATIC / "index.html").read_text()
    assert re.findall(r"<script[^>]*>", page) == [
        '<script src="/first.js">', '<script src="/app.js" defer>']
    assert not re.search(r"\son[a-z]+\s*=", page), "an inline event handler"
    assert "style=" not in page
