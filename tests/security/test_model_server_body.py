"""The embedded scripted model server refuses a request body over its bound with 413
before reading it: any local process can reach its loopback port, and a body was read in
full on the strength of its Content-Length alone."""

from __future__ import annotations

import json
import socket
import time

from coordinator.scripted_model import ScriptedModelServer
from coordinator.scripted_model.server import MAX_BODY_BYTES


def exchange(server: ScriptedModelServer, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
    """Send ``head`` (and ``body``), read the answer until the server closes or it is
    complete; returns the status and the raw answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head + body)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < _length(answer):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    return int(answer.split(b" ", 2)[1]), answer


def _length(answer: bytes) -> int:
    for line in answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def head(length: int | str, extra: str = "") -> bytes:
    return (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    ).encode()


def test_an_oversized_body_is_refused_before_it_is_sent() -> None:
    with ScriptedModelServer({"rules": [{"default": {"text": "x"}}]}) as server:
        started = time.monotonic()
        # Claims 1 GiB and sends 5 bytes of it: a server that reads the whole body would
        # wait here for the rest (until the socket timeout fails the test).
        status, answer = exchange(server, head(1 << 30), b'{"a":')
        assert status == 413, answer
        assert time.monotonic() - started < 5
        message = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["message"]
        assert str(MAX_BODY_BYTES) in message
        assert server.requests[-1]["status"] == 413


def test_bad_and_chunked_lengths_are_refused_and_normal_requests_still_work() -> None:
    with ScriptedModelServer({"rules": [{"default": {"text": "x"}}]}) as server:
        assert exchange(server, head("-5"))[0] == 400
        chunked = head(0).replace(b"Content-Length: 0", b"Transfer-Encoding: chunked")
        assert exchange(server, chunked, b"5\r\nhello\r\n0\r\n\r\n")[0] == 411
        body = json.dumps(
            {"model": "m", "messages": [{"role": "user", "content": "q"}]}
        ).encode()
        status, answer = exchange(server, head(len(body), "Connection: close\r\n"), body)
        assert status == 200, answer
