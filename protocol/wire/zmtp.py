"""A ZeroMQ DEALER socket on one ``ipc://`` endpoint, in the standard library alone.

The CLI asks the service one question per call, and a shell pays for every import on
every call: pyzmq costs a ``specrun status`` about as much as the interpreter's own start
(``docs/benchmarks.md``). The CLI needs little of it: one connection over a Unix socket
to the service's ROUTER, one-frame messages both ways, no security mechanism. That much of
ZMTP 3.0 (rfc.zeromq.org/spec/23) is written here; the service, the workers and the web
view keep pyzmq.

What is spoken: the 64-byte greeting with the NULL mechanism, a READY command saying
``Socket-Type: DEALER``, then frames (a flags byte, a size of one byte or, with the LONG
flag, eight, the body). The peer's greeting must be ZMTP 3 with NULL and its READY a
ROUTER's; anything else ends the connection with ``ZmtpError``. A message of several
frames is taken as its frames joined (the service sends one each), a PING after the
handshake is answered with its PONG (a peer with heartbeats on would otherwise hang up)
and other commands are skipped, and a frame larger than ``max_frame`` ends the
connection, so a hostile peer cannot make the client allocate without bound.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import time

SIGNATURE = b"\xff" + b"\x00" * 8 + b"\x7f"
GREETING = SIGNATURE + b"\x03\x00" + b"NULL".ljust(20, b"\x00") + b"\x00" + b"\x00" * 31

MORE, LONG, COMMAND = 0x01, 0x02, 0x04
DEFAULT_MAX_FRAME = 64 * 1024 * 1024


class ZmtpError(ConnectionError):
    """The peer is not a ZMTP 3 ROUTER speaking NULL, or broke the framing."""


def _command(name: bytes, properties: dict[bytes, bytes]) -> bytes:
    body = bytes([len(name)]) + name
    for key, value in properties.items():
        body += bytes([len(key)]) + key + struct.pack(">I", len(value)) + value
    return _frame(body, COMMAND)


def _frame(body: bytes, flags: int = 0) -> bytes:
    if len(body) > 255:
        return bytes([flags | LONG]) + struct.pack(">Q", len(body)) + body
    return bytes([flags, len(body)]) + body


def _properties(body: bytes) -> dict[bytes, bytes]:
    """A READY command's metadata (after its name)."""
    found: dict[bytes, bytes] = {}
    at = 0
    while at < len(body):
        size = body[at]
        key = body[at + 1:at + 1 + size]
        at += 1 + size
        if at + 4 > len(body):
            raise ZmtpError("the peer's READY command is cut short")
        (length,) = struct.unpack(">I", body[at:at + 4])
        found[key.lower()] = body[at + 4:at + 4 + length]
        at += 4 + length
    return found


class Dealer:
    """A connected DEALER: ``send`` a one-frame message, ``recv`` the next one.

    ``connect`` retries for ``connect_timeout_s`` while the socket file is missing or
    refuses (a service still starting), as a ZeroMQ socket would reconnect."""

    def __init__(self, endpoint: str, *, max_frame: int = DEFAULT_MAX_FRAME,
                 connect_timeout_s: float = 5.0) -> None:
        if not endpoint.startswith("ipc://"):
            raise ValueError(f"not an ipc:// endpoint: {endpoint}")
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._sock = self._connect(endpoint.removeprefix("ipc://"), connect_timeout_s)
        try:
            self._handshake(connect_timeout_s)
        except BaseException:
            self._sock.close()
            raise

    @staticmethod
    def _connect(path: str, timeout_s: float) -> socket.socket:
        deadline = time.monotonic() + timeout_s
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(path)
                return sock
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)
            except BaseException:
                sock.close()
                raise

    def _handshake(self, timeout_s: float) -> None:
        self._write(GREETING + _command(b"READY", {b"Socket-Type": b"DEALER", b"Identity": b""}))
        deadline = time.monotonic() + timeout_s
        try:
            greeting = self._read_exactly(64, deadline)
            if greeting[0] != 0xFF or greeting[9] != 0x7F or greeting[10] < 3:
                raise ZmtpError("the peer does not speak ZMTP 3")
            if greeting[12:32].rstrip(b"\x00") != b"NULL":
                raise ZmtpError("the peer asks for a security mechanism other than NULL")
            flags, body = self._read_frame(deadline)
        except ConnectionResetError:
            raise ZmtpError("the peer hung up during the ZMTP handshake") from None
        if not flags & COMMAND or body[:1] != b"\x05" or body[1:6] != b"READY":
            raise ZmtpError("the peer's first command is not READY")
        kind = _properties(body[6:]).get(b"socket-type")
        if kind != b"ROUTER":
            raise ZmtpError(f"the peer is a {kind!r} socket, not a ROUTER")

    def _write(self, data: bytes) -> None:
        # MSG_NOSIGNAL: a peer that hung up is an error here, never a SIGPIPE (the CLI
        # restores SIGPIPE's default for `| head`, which would end it without a word).
        self._sock.sendall(data, socket.MSG_NOSIGNAL)

    def fileno(self) -> int:
        return self._sock.fileno()

    def send(self, message: bytes) -> None:
        self._write(_frame(message))

    def poll(self, timeout_ms: int) -> bool:
        """Whether a whole message can be read now, waiting up to ``timeout_ms``."""
        deadline = time.monotonic() + timeout_ms / 1000
        while not self._has_message():
            left = deadline - time.monotonic()
            if left <= 0 or not self._fill(left):
                return self._has_message()
        return True

    def recv(self) -> bytes:
        """The next message (its frames joined); blocks until one is whole."""
        parts: list[bytes] = []
        while True:
            flags, body = self._read_frame(None)
            if flags & COMMAND:
                self._answer(body)
                continue
            parts.append(body)
            if not flags & MORE:
                return b"".join(parts)

    def close(self) -> None:
        self._sock.close()

    # -- reading ------------------------------------------------------------------

    def _answer(self, command: bytes) -> None:
        """PING (name, a two-byte TTL, the peer's context): PONG with that context."""
        if command[:5] == b"\x04PING":
            self._write(_frame(b"\x04PONG" + command[7:], COMMAND))

    def _has_message(self) -> bool:
        """Whether the buffer holds a whole data message; commands before it are taken
        (and a PING answered) on the way."""
        while True:
            header = self._frame_header(self._buffer, 0)
            if header is None or not header[0] & COMMAND:
                break
            if len(self._buffer) < header[1] + header[2]:
                return False
            self._answer(self._read_frame(None)[1])
        at = 0
        data = self._buffer
        while True:
            header = self._frame_header(data, at)
            if header is None:
                return False
            flags, start, size = header
            if len(data) < start + size:
                return False
            at = start + size
            if not flags & (COMMAND | MORE):
                return True

    def _frame_header(self, data: bytearray, at: int) -> tuple[int, int, int] | None:
        if len(data) < at + 2:
            return None
        flags = data[at]
        if flags & LONG:
            if len(data) < at + 9:
                return None
            (size,) = struct.unpack_from(">Q", data, at + 1)
            start = at + 9
        else:
            size, start = data[at + 1], at + 2
        if size > self.max_frame:
            raise ZmtpError(f"the peer sent a frame of {size} bytes "
                            f"(at most {self.max_frame})")
        return flags, start, size

    def _fill(self, timeout_s: float | None) -> bool:
        """Read what has arrived, waiting up to ``timeout_s`` (None: for ever); False
        when nothing came in time. A closed connection is ``ConnectionResetError``."""
        if timeout_s is not None:
            ready, _, _ = select.select([self._sock], [], [], max(timeout_s, 0.0))
            if not ready:
                return False
        chunk = self._sock.recv(1 << 16)
        if not chunk:
            raise ConnectionResetError(os.strerror(104))
        self._buffer += chunk
        return True

    def _read_exactly(self, size: int, deadline: float | None) -> bytes:
        while len(self._buffer) < size:
            left = None if deadline is None else deadline - time.monotonic()
            if (left is not None and left <= 0) or not self._fill(left):
                raise TimeoutError("the peer did not finish its ZMTP handshake")
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def _read_frame(self, deadline: float | None) -> tuple[int, bytes]:
        while True:
            header = self._frame_header(self._buffer, 0)
            if header is not None and len(self._buffer) >= header[1] + header[2]:
                flags, start, size = header
                body = bytes(self._buffer[start:start + size])
                del self._buffer[:start + size]
                return flags, body
            left = None if deadline is None else deadline - time.monotonic()
            if (left is not None and left <= 0) or not self._fill(left):
                raise TimeoutError("the peer did not finish its ZMTP handshake")
