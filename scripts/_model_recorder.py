"""A loopback proxy between specrun and a model server that records every exchange: the
request body, the purpose specrun gave it, the answer's bytes as they came, and when the
first and the last byte came. ``scripts/real_model`` reads its records for the table, and
keeps them (``--record DIR``) as the recorded streams the suite replays.

Each exchange is written as ``NNN-<purpose>.json`` (what was asked and when things came)
and ``NNN-<purpose>.sse`` (the answer, byte for byte) as soon as it ends.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

PURPOSE_HEADER = "X-Specrun-Purpose"
PASSED_HEADERS = ("content-type", "accept", "x-specrun-purpose")


@dataclass
class Exchange:
    number: int
    method: str
    path: str
    purpose: str
    request: dict[str, Any] | None
    started: float  # time.monotonic()
    first_byte_s: float | None = None  # any byte: llama-server's keep-alive comments count
    first_data_s: float | None = None  # the first event: the prompt has been read
    total_s: float = 0.0
    status: int = 0
    body: bytes = b""

    def answer_events(self) -> list[dict[str, Any]]:
        """The answer's ``data:`` JSON objects (a streamed answer), or its one body."""
        text = self.body.decode("utf-8", "replace")
        if not text.lstrip().startswith("data:") and text.strip().startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                return [json.loads(text)]
        events = []
        for line in text.splitlines():
            data = line.removeprefix("data:").strip() if line.startswith("data:") else ""
            if data and data != "[DONE]":
                with contextlib.suppress(json.JSONDecodeError):
                    events.append(json.loads(data))
        return events


@dataclass
class Recorder:
    upstream: str  # the server's root, http://127.0.0.1:PORT
    keep_in: Path | None = None
    exchanges: list[Exchange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, exchange: Exchange) -> None:
        with self.lock:
            self.exchanges.append(exchange)
        if self.keep_in is None or exchange.request is None:
            return
        self.keep_in.mkdir(parents=True, exist_ok=True)
        stem = self.keep_in / f"{exchange.number:03d}-{exchange.purpose}"
        stem.with_suffix(".sse").write_bytes(exchange.body)
        meta = {
            "purpose": exchange.purpose,
            "path": exchange.path,
            "status": exchange.status,
            "first_byte_s": exchange.first_byte_s,
            "first_data_s": exchange.first_data_s,
            "total_s": exchange.total_s,
            "request": exchange.request,
        }
        stem.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")

    def since(self, started: float) -> list[Exchange]:
        with self.lock:
            return [e for e in self.exchanges if e.started >= started]


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the answer ends when the connection closes
    server: _RecordingServer

    def do_GET(self) -> None:
        self._forward(None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._forward(self.rfile.read(length))

    def _forward(self, content: bytes | None) -> None:
        recorder = self.server.recorder
        request: dict[str, Any] | None = None
        if content and self.path.endswith("/chat/completions"):
            with contextlib.suppress(json.JSONDecodeError):
                request = json.loads(content)
        exchange = Exchange(
            number=self.server.next_number(),
            method=self.command,
            path=self.path,
            purpose=self.headers.get(PURPOSE_HEADER, "none"),
            request=request,
            started=time.monotonic(),
        )
        headers = {k: v for k, v in self.headers.items() if k.lower() in PASSED_HEADERS}
        body = bytearray()
        try:
            with httpx.stream(
                self.command, recorder.upstream + self.path, content=content, headers=headers,
                timeout=httpx.Timeout(3600.0, connect=10.0),
            ) as answer:
                exchange.status = answer.status_code
                self.send_response(answer.status_code)
                kind = answer.headers.get("content-type")
                if kind:
                    self.send_header("Content-Type", kind)
                self.end_headers()
                for chunk in answer.iter_raw():
                    if exchange.first_byte_s is None and chunk:
                        exchange.first_byte_s = time.monotonic() - exchange.started
                    if exchange.first_data_s is None and b"data:" in chunk:
                        exchange.first_data_s = time.monotonic() - exchange.started
                    body += chunk
                    self.wfile.write(chunk)
                    self.wfile.flush()
        except (httpx.HTTPError, OSError):
            pass  # the client gave up or the server went away: what came is recorded
        finally:
            exchange.total_s = time.monotonic() - exchange.started
            exchange.body = bytes(body)
            recorder.add(exchange)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, recorder: Recorder) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.recorder = recorder
        self._count = 0
        self._count_lock = threading.Lock()

    def next_number(self) -> int:
        with self._count_lock:
            self._count += 1
            return self._count


@contextlib.contextmanager
def recording_proxy(recorder: Recorder) -> Iterator[str]:
    """The proxy's OpenAI base URL while it runs."""
    server = _RecordingServer(recorder)
    thread = threading.Thread(target=server.serve_forever, name="model-recorder", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
