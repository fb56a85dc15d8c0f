"""A loopback server that answers as a recorded llama.cpp server did: the recorded stream
(``streams/real/*.sse``, one token per event, as ``llama-server`` sends them), after the
recorded wait for the first byte (scaled down; silent, or with llama-server's keep-alive
comments), and cut where the request's ``max_tokens`` says, as the server cuts it
(``finish_reason`` ``length``). A request with no ``max_tokens`` gets the whole recording:
the server would have gone on to its context's end. Every request body it gets is kept."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.support import local_http_server

REAL = Path(__file__).parent / "streams" / "real"


@dataclass
class Recording:
    """One recorded answer: its events and what the recording measured."""

    events: list[dict[str, Any]]
    prompt_s: float  # how long the server read the prompt (its own ``timings``)
    prompt_tokens: int  # of them, not in its cache
    meta: dict[str, Any]

    @classmethod
    def load(cls, name: str) -> Recording:
        events = [
            json.loads(line[5:])
            for line in (REAL / f"{name}.sse").read_text().splitlines()
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]")
        ]
        meta = json.loads((REAL / f"{name}.json").read_text())
        timings = next((e["timings"] for e in reversed(events) if e.get("timings")), None)
        if timings is None:  # a recording cut short: the recorder's own measure
            return cls(events, float(meta["first_data_s"]), int(meta["prompt_tokens"]), meta)
        return cls(events, timings["prompt_ms"] / 1000, int(timings["prompt_n"]), meta)

    def text(self) -> str:
        return "".join(
            choice.get("delta", {}).get("content") or ""
            for event in self.events
            for choice in event.get("choices", [])
        )


@dataclass
class Served:
    base_url: str
    bodies: list[dict[str, Any]] = field(default_factory=list)


class _Replay(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    recording: Recording
    delay_s: float
    served: Served
    lock: threading.Lock

    def do_POST(self) -> None:
        # The client may give up waiting: what the tests of a timeout want.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._answer()

    def _answer(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        with self.server.lock:  # type: ignore[attr-defined]
            self.server.served.bodies.append(body)  # type: ignore[attr-defined]
        recording: Recording = self.server.recording  # type: ignore[attr-defined]
        ping_s: float | None = self.server.ping_s  # type: ignore[attr-defined]
        if not body.get("stream"):
            self._whole(recording, body.get("max_tokens"))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        # Reading the prompt: silence, or (as llama-server does) a comment now and then.
        reading_until = time.monotonic() + self.server.delay_s  # type: ignore[attr-defined]
        while (left := reading_until - time.monotonic()) > 0:
            time.sleep(left if ping_s is None else min(left, ping_s))
            if ping_s is not None and reading_until - time.monotonic() > 0:
                self.wfile.write(b":\n\n")
                self.wfile.flush()
        cap = body.get("max_tokens")
        tokens = 0
        for event in recording.events:
            choices = event.get("choices") or []
            if choices and choices[0].get("delta", {}).get("content"):
                tokens += 1
                if cap is not None and tokens > cap:
                    event = {**event, "choices": [{"index": 0, "delta": {},
                                                   "finish_reason": "length"}]}
                    self._send(event)
                    break
            self._send(event)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _whole(self, recording: Recording, cap: int | None) -> None:
        """A non-streamed answer: the recorded tokens (up to ``cap``) in one message."""
        time.sleep(self.server.delay_s)  # type: ignore[attr-defined]  # nothing meanwhile
        pieces = [
            c["delta"]["content"] for e in recording.events for c in e.get("choices") or []
            if c.get("delta", {}).get("content")
        ]
        cut = cap is not None and len(pieces) > cap
        message = {"role": "assistant", "content": "".join(pieces[:cap] if cut else pieces)}
        data = json.dumps({
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "length" if cut else "stop"}],
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send(self, event: dict[str, Any]) -> None:
        self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        self.send_response(404)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def replaying(
    recording: Recording, delay_s: float = 0.0, ping_s: float | None = None
) -> Iterator[Served]:
    """The recording served on loopback: ``delay_s`` of reading before the first event,
    with a keep-alive comment every ``ping_s`` meanwhile (None: silence)."""
    served = Served("")
    with local_http_server(
        _Replay, recording=recording, delay_s=delay_s, ping_s=ping_s, served=served,
        lock=threading.Lock(),
    ) as server:
        served.base_url = f"http://127.0.0.1:{server.server_port}/v1"
        yield served
