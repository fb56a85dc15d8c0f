"""A loopback server that answers as a recorded llama.cpp server did: the recorded stream
(``streams/real/*.sse``, one token per event, as ``llama-server`` sends them), after the
recorded wait for the first byte (scaled down), and cut where the request's ``max_tokens``
says, as the server cuts it (``finish_reason`` ``length``). A request with no
``max_tokens`` gets the whole recording: the server would have gone on to its context's
end. Every request body it gets is kept."""

from __future__ import annotations

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
    first_byte_s: float
    prompt_tokens: int
    meta: dict[str, Any]

    @classmethod
    def load(cls, name: str) -> Recording:
        events = [
            json.loads(line[5:])
            for line in (REAL / f"{name}.sse").read_text().splitlines()
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]")
        ]
        meta = json.loads((REAL / f"{name}.json").read_text())
        usage = next((e["usage"] for e in reversed(events) if e.get("usage")), {})
        return cls(events, float(meta["first_byte_s"]), int(usage.get("prompt_tokens", 0)), meta)

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
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        with self.server.lock:  # type: ignore[attr-defined]
            self.server.served.bodies.append(body)  # type: ignore[attr-defined]
        recording: Recording = self.server.recording  # type: ignore[attr-defined]
        time.sleep(self.server.delay_s)  # type: ignore[attr-defined]  # reading the prompt
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
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

    def _send(self, event: dict[str, Any]) -> None:
        self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        self.send_response(404)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def replaying(recording: Recording, delay_s: float = 0.0) -> Iterator[Served]:
    served = Served("")
    with local_http_server(
        _Replay, recording=recording, delay_s=delay_s, served=served, lock=threading.Lock()
    ) as server:
        served.base_url = f"http://127.0.0.1:{server.server_port}/v1"
        yield served
