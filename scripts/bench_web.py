#!/usr/bin/env python3
"""What the live web view costs a turn, and what one event's fan-out costs the service.

1. Turn latency with the view open vs without, through a real service on the scripted
   model: each turn streams 400 text chunks and runs a tool (about 410 live events). Blocks
   of turns alternate between "no view" and "view open": a `specrun web` process subscribed
   to the service, one browser-like reader following the event stream (httpx), and one
   stalled reader that opened the stream and never reads. Medians; ratio = open / closed.
2. Fan-out: ``LiveHub.publish`` of one turn event (a text chunk) to N subscribers on a real
   ZeroMQ ipc socket (N = 1, 4, 16), against the service's normal reply to one client (the
   same event encoded and sent with ``send_multipart``) on the same socket; the web
   process's side of one event (decode, inert strings, JSON) beside it.

Usage: scripts/bench_web.py [--rounds N] [--events N] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
for entry in (str(ROOT), str(Path(__file__).resolve().parent)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

import httpx  # noqa: E402
import msgspec  # noqa: E402
import zmq  # noqa: E402
import zmq.asyncio  # noqa: E402
from _sample_project import copy_sample_project  # noqa: E402

from coordinator.cli.client import ServiceClient  # noqa: E402
from coordinator.cli.daemon import start_daemon, stop_daemon  # noqa: E402
from coordinator.service.live.hub import LiveHub  # noqa: E402
from coordinator.web.shown import shown_json  # noqa: E402
from protocol.wire import codec  # noqa: E402
from protocol.wire.control import (  # noqa: E402
    AskRequest,
    LiveTurnEvent,
    ResetRequest,
    TextChunk,
    TurnEnded,
)
from protocol.wire.endpoints import make_router  # noqa: E402

CHUNKS = 400


def scenario() -> dict[str, Any]:
    text = " ".join(f"w{i}" for i in range(3 * CHUNKS))  # streamed three words a chunk
    return {
        "name": "bench-web",
        "latency_ms": 5,
        "chunk_ms": 0,
        "rules": [
            {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
            {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}},
            {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
            {
                "when": {"last_user": "stream"},
                "reply": {"tool_calls": [{"name": "read_file",
                                          "arguments": {"file_path": "src/calc.py"}}]},
            },
            {"when": {"turn_user": "stream", "last_tool": "read_file"}, "reply": {"text": text}},
            {"default": {"text": "ok"}},
        ],
    }


class Session:
    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="sr-web-"))
        self.project = self.base / "proj"
        copy_sample_project(self.project)
        path = self.base / "scenario.json"
        path.write_text(json.dumps(scenario()))
        os.environ["SPECRUN_RUNTIME_DIR"] = str(self.base / "run")
        start_daemon(self.project, ["--scenario", str(path)])
        self.client = ServiceClient(self.project, timeout_s=60)

    def turn(self) -> float:
        self.client.request(ResetRequest(req_id=self.client.next_id()))
        request = AskRequest(req_id=self.client.next_id(), text="stream it")
        t0 = time.perf_counter()
        self.client.send(request)
        *_, end = self.client.replies(request.req_id, timeout_s=120)
        elapsed = time.perf_counter() - t0
        assert isinstance(end, TurnEnded) and end.reason == "completed", end
        return elapsed

    def close(self) -> None:
        self.client.close()
        stop_daemon(self.project)
        shutil.rmtree(self.base, ignore_errors=True)


class OpenView:
    """`specrun web` with a reading viewer and a stalled one."""

    def __init__(self, project: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "coordinator", "--project", str(project), "web"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            bufsize=0,
        )
        assert self.proc.stdout is not None
        url = ""
        while not url.startswith("http://"):
            url = self.proc.stdout.readline().decode().strip()
            if not url and self.proc.poll() is not None:
                raise SystemExit("`specrun web` did not start")
        parts = urlsplit(url)
        port = parts.port or 0
        self.base = f"http://127.0.0.1:{port}"
        signed_in = httpx.get(url, follow_redirects=False, timeout=30)
        self.cookie = signed_in.headers["set-cookie"].split(";")[0]
        self.key = signed_in.headers["location"].removeprefix("/#key=")
        self.events = 0
        self.stop = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        # A stalled viewer: it asks for the stream and never reads a byte of it.
        self.stalled = socket.create_connection(("127.0.0.1", port))
        self.stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.stalled.sendall(
            f"GET /api/events?key={self.key} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Cookie: {self.cookie}\r\n\r\n".encode()
        )
        deadline = time.monotonic() + 10
        while self.events == 0 and time.monotonic() < deadline:
            time.sleep(0.01)

    def _read(self) -> None:
        with httpx.stream("GET", f"{self.base}/api/events?key={self.key}",
                          headers={"cookie": self.cookie},
                          timeout=None) as stream:
            for line in stream.iter_lines():
                if line.startswith("event:"):
                    self.events += 1
                if self.stop.is_set():
                    return

    def close(self) -> None:
        self.stop.set()
        self.stalled.close()
        self.proc.send_signal(2)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def turn_latency(rounds: int, per_block: int = 3) -> dict[str, Any]:
    session = Session()
    closed: list[float] = []
    opened: list[float] = []
    seen = 0
    try:
        session.turn()  # warm-up: imports, the first model connection
        for _ in range(rounds):
            closed += [session.turn() for _ in range(per_block)]
            view = OpenView(session.project)
            try:
                before = view.events
                opened += [session.turn() for _ in range(per_block)]
                deadline = time.monotonic() + 5
                while view.events - before < per_block * CHUNKS and time.monotonic() < deadline:
                    time.sleep(0.01)
                seen += view.events - before
            finally:
                view.close()
    finally:
        session.close()
    return {
        "closed_ms": statistics.median(closed) * 1000,
        "open_ms": statistics.median(opened) * 1000,
        "turns": len(opened),
        "events_seen_per_turn": seen / max(1, len(opened)),
    }


async def _fanout(subscribers: int, events: int) -> tuple[float, float]:
    """Per-event seconds: LiveHub.publish to ``subscribers`` readers, and one plain reply."""
    base = tempfile.mkdtemp(prefix="sr-fan-")
    ctx = zmq.asyncio.Context()
    router = make_router(ctx, f"ipc://{base}/c.sock")
    dealers = []
    try:
        for n in range(subscribers + 1):
            dealer = ctx.socket(zmq.DEALER)
            dealer.setsockopt(zmq.LINGER, 0)
            dealer.setsockopt(zmq.IDENTITY, b"s%d" % n)
            dealer.connect(f"ipc://{base}/c.sock")
            await dealer.send(b"hi")
            await router.recv_multipart()
            dealers.append(dealer)

        def send_nowait(identity: bytes, frame: bytes, failed: Any) -> None:
            sent = router.send_multipart([identity, frame], flags=zmq.NOBLOCK)
            if sent.done() and sent.exception() is not None:
                raise sent.exception()  # type: ignore[misc]

        hub = LiveHub(send_nowait)
        for n in range(subscribers):
            hub.subscribe(b"s%d" % n, 1, None)
        chunk = TextChunk(7, "word ")
        change = LiveTurnEvent(3, chunk)
        replies = codec.coordinator_to_client()

        async def drain(expected: int) -> None:
            """Until every reader got its ``expected`` frames: the next batch starts with
            room in every queue (the cost measured is the send, not a full queue)."""
            for dealer in dealers:
                got = 0
                while got < expected and await dealer.poll(5000):
                    await dealer.recv()
                    got += 1

        batch = 50
        hub_times, reply_times = [], []
        for _ in range(max(1, events // batch)):
            t0 = time.perf_counter()
            for _ in range(batch):
                hub.publish(change)
            hub_times.append((time.perf_counter() - t0) / batch)
            t0 = time.perf_counter()
            for _ in range(batch):
                await router.send_multipart([b"s%d" % subscribers, replies.encode(chunk)])
            reply_times.append((time.perf_counter() - t0) / batch)
            await drain(batch)
        assert all(s.missed == 0 for s in hub.subscribers), "a reader fell behind"
        return statistics.median(hub_times), statistics.median(reply_times)
    finally:
        for dealer in dealers:
            dealer.close(linger=0)
        router.close(linger=0)
        ctx.term()
        shutil.rmtree(base, ignore_errors=True)


def web_side_us(events: int) -> float:
    """The web process's work per event: decode the frame, inert every string, JSON."""
    replies = codec.coordinator_to_client()
    from protocol.wire.control import LiveEvent

    frame = msgspec.msgpack.encode(LiveEvent(1, 1, LiveTurnEvent(3, TextChunk(7, "word "))))
    t0 = time.perf_counter()
    for _ in range(events):
        event = replies.decode(frame)
        shown_json(event.change)  # type: ignore[union-attr]
    return (time.perf_counter() - t0) / events * 1e6


def measure(rounds: int, events: int) -> dict[str, Any]:
    fan = {n: asyncio.run(_fanout(n, events)) for n in (1, 4, 16)}
    return {
        "turn": turn_latency(rounds),
        "fanout_us": {n: hub * 1e6 for n, (hub, _) in fan.items()},
        "reply_us": statistics.median(reply for _, reply in fan.values()) * 1e6,
        "web_side_us": web_side_us(events),
    }


def main() -> int:
    from _interrupt import stop_like_ctrl_c

    stop_like_ctrl_c()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="blocks of 3 turns each way")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.rounds, args.events)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    turn = result["turn"]
    print(f"turn ({CHUNKS} text chunks + a tool call), median of {turn['turns']} each way:")
    print(f"  without the view   {turn['closed_ms']:8.1f} ms")
    print(f"  view open          {turn['open_ms']:8.1f} ms   ratio "
          f"{turn['open_ms'] / turn['closed_ms']:.3f}  "
          f"({turn['events_seen_per_turn']:.0f} events per turn reached the reading viewer)")
    print("one event's fan-out (LiveHub.publish, per event):")
    for n, us in result["fanout_us"].items():
        print(f"  {n:2d} subscriber(s)   {us:8.1f} µs")
    print(f"  a plain reply to one client (baseline) {result['reply_us']:.1f} µs")
    print(f"  the web process's side of one event    {result['web_side_us']:.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
