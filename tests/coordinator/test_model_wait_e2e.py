"""A rate-limited endpoint through the real CLI and service: `specrun ask` shows the wait
as it starts, `specrun status` and the live view show it while it lasts, and Ctrl-C on
`ask` ends the turn at once instead of after the wait."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from protocol.wire.control import ControlReply, LiveEvent, LiveTurnEvent, Notice
from tests.coordinator.test_live_e2e import Subscriber
from tests.support import Specrun, local_http_server


class _RateLimited(BaseHTTPRequestHandler):
    """Every chat request: 429 with OpenAI's body and a 40 s Retry-After."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.path.endswith("/chat/completions"):  # the context-window probes
            self.send_error(404)
            return
        self.server.posts += 1  # type: ignore[attr-defined]
        self.server.purposes.append(self.headers.get("X-Specrun-Purpose"))  # type: ignore[attr-defined]
        body = json.dumps({"error": {"message": "Rate limit reached for requests.",
                                     "type": "requests", "code": "rate_limit_exceeded"}})
        self.send_response(429)
        self.send_header("Content-Type", "application/json")
        self.send_header("Retry-After", "40")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def limited() -> Iterator[Any]:
    with local_http_server(_RateLimited, posts=0, purposes=[]) as server:
        yield server


def test_a_rate_limit_wait_is_shown_in_ask_status_and_live_and_ctrl_c_ends_it(
    specrun: Specrun, limited: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = f"http://127.0.0.1:{limited.server_port}/v1"
    specrun.run("start", "--no-check", "--base-url", base, check=True)
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))  # for the live view
    live = Subscriber(specrun.project)
    assert live.snapshot().status.model_wait is None  # subscribed before the turn
    try:
        with specrun.follow("ask", "hello", "--json") as asked:
            proc, lines = asked.proc, asked.lines
            notice = json.loads(lines.get(timeout=60))
            assert notice["type"] == "notice"
            assert notice["text"] == (
                "The model endpoint is rate-limiting requests (HTTP 429) and asks to wait 40 s, "
                "more than specrun waits; retrying in 30 s (attempt 2 of 4)."
            )
            status = specrun.json("status")
            wait = status["model_wait"]
            assert wait["reason"] == "rate_limit" and wait["status"] == 429
            assert (wait["attempt"], wait["attempts"]) == (2, 4)
            assert 0 < wait["seconds_left"] <= 30
            shown = specrun.run("status", check=True).stdout
            assert "rate-limiting requests (HTTP 429)" in shown and "retrying in" in shown

            def noticed(got: list[ControlReply]) -> bool:
                return any(
                    isinstance(g, LiveEvent) and isinstance(g.change, LiveTurnEvent)
                    and isinstance(g.change.event, Notice) for g in got
                )

            assert noticed(live.read(until=noticed))  # the web view's event stream has it
            snapshot_wait = live.snapshot().status.model_wait
            assert snapshot_wait is not None and snapshot_wait.reason == "rate_limit"

            started = time.monotonic()
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=20) == 1
            assert time.monotonic() - started < 15  # not after the 30 s wait
            asked.reader.join(timeout=10)
            rest = [json.loads(line) for line in list(lines.queue) if line.strip()]
            assert (rest[-1]["type"], rest[-1]["reason"]) == ("turn_ended", "aborted")
            assert specrun.json("status")["model_wait"] is None
            assert limited.posts == 1, limited.purposes
    finally:
        live.close()
        specrun.run("stop")
