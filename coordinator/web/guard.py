"""Who may talk to the web view: the rules every request passes before any route runs.

The page shows model text, file names and diffs, and its buttons change the project, so
it is guarded like a door, not like a page:

1. **Host**: the Host header must be a loopback name with the view's port
   (``127.0.0.1:P``, ``localhost:P``, ``[::1]:P``). A web page whose domain was pointed at
   127.0.0.1 (DNS rebinding) sends its own name and is refused.
2. **Token**: the printed URL carries a random token, good once. The first load with it
   sets an HttpOnly, SameSite=Strict cookie and redirects to the bare URL; every request
   must carry that cookie. A second load with the spent token (from the browser's history,
   a shared screen) is refused. The redirect's fragment holds a one-time *handoff code*:
   the page's first script takes it (and the query) out of the address bar and the history
   entry before anything else loads, and the page trades it once (``POST /handoff``, with
   the cookie) for the *key*, which it keeps in its origin's ``localStorage`` and sends
   with every request to ``/api/`` (a header, or ``?key=`` on the event stream). The key
   is never in a URL. The key is what guards the data and the buttons, because the cookie
   alone cannot: browsers send a host's cookies to *every* port of it, so any server on
   127.0.0.1 the browser visits (another user's, on another port) receives the cookie.
   Storage is per origin, port included, so the key reaches no other port. The cookie's
   value, the key and the printed token are three separate secrets: the cookie gives
   neither of the others. Secrets are compared in constant time.
3. **Origin**: a request that changes something (POST) must come from the page itself:
   an ``Origin`` equal to its own ``http://host:port``, ``Sec-Fetch-Site`` (when sent)
   ``same-origin``, and a JSON body (which a cross-site form cannot send).
4. **Headers** on every answer: a Content-Security-Policy allowing scripts, styles and
   connections from the view itself only (no inline script, no eval, no frames), no
   sniffing, no referrer, no caching.
"""

from __future__ import annotations

import json
import secrets
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
KEY_HEADER = b"x-specrun-key"
SIGNED_OUT = "Not signed in: open the URL `specrun web` printed (it holds a token)."
SPENT = ("That sign-in link was used already (it works once); a browser it signed in stays "
         "signed in. For another one, run `specrun web` again.")
HANDOFF_PATH = "/handoff"
CHANGING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def cookie_name(port: int) -> str:
    # Browsers share cookies between ports of one host: one name per view.
    return f"specrun_web_{port}"


class Guard:
    """ASGI middleware enforcing the rules above for ``app``."""

    def __init__(self, app: ASGIApp, token: str, port: int) -> None:
        self.app = app
        self.token = token
        self.cookie_value = secrets.token_urlsafe(32)
        self.key = secrets.token_urlsafe(32)
        self.port = port
        self.hosts = frozenset(f"{name}:{port}".encode() for name in LOOPBACK_NAMES)
        self.cookie = cookie_name(port)
        self.token_spent = False
        self.handoff = ""  # the one-time code the redirect gave, until it is traded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return  # websockets: none are served

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        refusal = self.refusal(scope)
        if refusal is not None:
            status, text = refusal
            await _plain(send_with_headers, status, text)
            return
        if _is_trade(scope, _query(scope)):  # its token was checked by refusal()
            await self._trade_token(scope, send_with_headers)
            return
        if scope["path"] == HANDOFF_PATH:  # cookie, origin and JSON checked by refusal()
            await self._trade_handoff(receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """(status, one sentence) when the request breaks a rule; None when it may pass."""
        headers = _headers(scope)
        host = headers.get(b"host", b"")
        if host not in self.hosts:
            return 421, "This address is not the web view's: open the URL `specrun web` printed."
        method = scope["method"]
        if method not in ("GET", "HEAD", "POST"):
            return 405, "Method not allowed."
        query = _query(scope)
        if _is_trade(scope, query):
            given = query["token"][0]
            if not secrets.compare_digest(given.encode(), self.token.encode()):
                return 403, "That token is not this web view's: open the URL `specrun web` printed."
            if self.token_spent:
                return 403, SPENT
            return None
        if scope["path"] == HANDOFF_PATH and method != "POST":
            return 405, "Method not allowed."
        if not self._has_cookie(headers.get(b"cookie", b"")):
            return 403, SIGNED_OUT
        if method in CHANGING_METHODS:
            origin = headers.get(b"origin")
            if origin != b"http://" + host:
                return 403, "Refused: this request did not come from the web view's own page."
            site = headers.get(b"sec-fetch-site")
            if site is not None and site != b"same-origin":
                return 403, "Refused: this request did not come from the web view's own page."
            content_type = headers.get(b"content-type", b"").split(b";")[0].strip()
            if content_type != b"application/json":
                return 415, "Requests must send JSON."
        if scope["path"].startswith("/api/") and not self._has_key(headers, query):
            return 403, SIGNED_OUT
        return None

    def _has_cookie(self, raw: bytes) -> bool:
        try:
            jar = SimpleCookie(raw.decode("latin-1"))
        except CookieError:
            return False
        morsel = jar.get(self.cookie)
        return morsel is not None and secrets.compare_digest(
            morsel.value.encode(), self.cookie_value.encode()
        )

    def _has_key(self, headers: dict[bytes, bytes], query: dict[str, list[str]]) -> bool:
        given = headers.get(KEY_HEADER)
        if given is None:
            values = query.get("key", [])
            if len(values) != 1:
                return False
            given = values[0].encode()
        return secrets.compare_digest(given, self.key.encode())

    async def _trade_token(self, scope: Scope, send: Send) -> None:
        """The first load: the token becomes a cookie and leaves the URL; the page finds
        its key in the fragment (never sent to a server), stores it and clears it."""
        cookie = f"{self.cookie}={self.cookie_value}; HttpOnly; SameSite=Strict; Path=/"
        self.token_spent = True
        self.handoff = secrets.token_urlsafe(32)
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", f"/#handoff={self.handoff}".encode()),
                    (b"set-cookie", cookie.encode()),
                    (b"content-length", b"0"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


    async def _trade_handoff(self, receive: Receive, send: Send) -> None:
        """The page's one-time code for the key: answered once, then never again."""
        body = b""
        while len(body) <= 4096:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            code = json.loads(body).get("code", "")
        except (ValueError, AttributeError):
            code = ""
        expected, self.handoff = self.handoff, ""  # one try, right or wrong
        if not (isinstance(code, str) and expected
                and secrets.compare_digest(code.encode(), expected.encode())):

            await _plain(send, 403, SPENT)
            return
        data = json.dumps({"key": self.key}).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})


def _query(scope: Scope) -> dict[str, list[str]]:
    return parse_qs(scope.get("query_string", b"").decode("latin-1"))


def _is_trade(scope: Scope, query: dict[str, list[str]]) -> bool:
    """The first load: ``GET /?token=…``. One test decides both that the token is checked
    and that the answer hands out the cookie and the key, so no other request (a POST to
    ``/?token=``, a ``?xtoken=``) gets the key with the cookie alone."""
    return scope["method"] == "GET" and scope["path"] == "/" and "token" in query


def _headers(scope: Scope) -> dict[bytes, bytes]:
    """Lower-cased header names to values. Host, Origin, Cookie, Sec-Fetch-Site and the
    key sent twice get a value no rule accepts; other headers keep their first value."""
    out: dict[bytes, bytes] = {}
    for name, value in scope.get("headers", []):
        key = name.lower()
        if key in out and key in (b"host", b"origin", b"cookie", b"sec-fetch-site", KEY_HEADER):
            out[key] = b"\0duplicate"
            continue
        out.setdefault(key, value)
    return out


async def _plain(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
