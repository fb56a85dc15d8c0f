"""The standard-library DEALER (``protocol/wire/zmtp.py``) against a real pyzmq ROUTER,
as the service binds it: the handshake, messages both ways in short and long frames,
frames joined, commands skipped, and a peer that is not what it should be refused."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from protocol.wire.endpoints import make_router
from protocol.wire.zmtp import Dealer, ZmtpError


@pytest.fixture
def ctx() -> Iterator[zmq.Context[Any]]:
    context: zmq.Context[Any] = zmq.Context()
    yield context
    context.term()


@pytest.fixture
def endpoint(tmp_path: Path) -> str:
    return f"ipc://{tmp_path / 'control.sock'}"


def test_a_request_and_its_replies_go_both_ways(ctx: zmq.Context[Any], endpoint: str) -> None:
    router = make_router(ctx, endpoint)
    dealer = Dealer(endpoint)
    try:
        long_body = bytes(range(256)) * 300  # a LONG frame
        for body in (b"", b"status", long_body):
            dealer.send(body)
            assert router.poll(5000)
            identity, got = router.recv_multipart()
            assert got == body
            router.send_multipart([identity, b"reply:" + body])
            assert dealer.poll(5000)
            assert dealer.recv() == b"reply:" + body
        assert not dealer.poll(50)  # nothing more came
        # A message of several frames arrives as one, its frames joined.
        router.send_multipart([identity, b"a", b"b", b"c"])
        assert dealer.poll(5000) and dealer.recv() == b"abc"
    finally:
        dealer.close()
        router.close(linger=0)


def test_commands_after_the_handshake_are_skipped(ctx: zmq.Context[Any], endpoint: str) -> None:
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.setsockopt(zmq.HEARTBEAT_IVL, 20)  # the ROUTER sends PING commands
    router.bind(endpoint)
    dealer = Dealer(endpoint)
    try:
        dealer.send(b"hello")
        assert router.poll(5000)
        identity, _ = router.recv_multipart()
        assert not dealer.poll(200)  # PINGs came meanwhile: no message
        router.send_multipart([identity, b"after the pings"])
        assert dealer.poll(5000) and dealer.recv() == b"after the pings"
    finally:
        dealer.close()
        router.close(linger=0)


def test_a_frame_over_the_limit_ends_the_connection(ctx: zmq.Context[Any],
                                                   endpoint: str) -> None:
    router = make_router(ctx, endpoint)
    dealer = Dealer(endpoint, max_frame=1000)
    try:
        dealer.send(b"x")
        assert router.poll(5000)
        identity, _ = router.recv_multipart()
        router.send_multipart([identity, b"y" * 1001])
        with pytest.raises(ZmtpError, match="frame of 1001 bytes"):
            dealer.poll(5000)
    finally:
        dealer.close()
        router.close(linger=0)


def test_a_peer_that_is_not_a_router_is_refused(ctx: zmq.Context[Any], endpoint: str) -> None:
    publisher = ctx.socket(zmq.PUB)
    publisher.setsockopt(zmq.LINGER, 0)
    publisher.bind(endpoint)
    try:
        with pytest.raises(ZmtpError):
            Dealer(endpoint, connect_timeout_s=2.0)
    finally:
        publisher.close(linger=0)


def test_a_peer_that_speaks_no_zmtp_is_refused(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "plain.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def answer() -> None:
        conn, _ = server.accept()
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n" + b" " * 64)
        conn.recv(1024)
        conn.close()

    thread = threading.Thread(target=answer)
    thread.start()
    try:
        with pytest.raises(ZmtpError, match="does not speak ZMTP 3"):
            Dealer(f"ipc://{path}", connect_timeout_s=2.0)
    finally:
        thread.join(timeout=5)
        server.close()


def test_the_peer_gone_is_a_connection_error(ctx: zmq.Context[Any], endpoint: str) -> None:
    router = make_router(ctx, endpoint)
    dealer = Dealer(endpoint)
    try:
        router.close(linger=0)
        with pytest.raises(ConnectionResetError):
            dealer.poll(5000)
    finally:
        dealer.close()


def test_no_socket_to_connect_to_is_an_error_after_the_wait(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Dealer(f"ipc://{tmp_path / 'absent.sock'}", connect_timeout_s=0.2)
