"""Protocol fuzzing of the control socket of a real running service.

Random frames and mutated valid requests (bit flips, truncation, spliced bytes, wrong tags,
wrong field types, huge values, unknown fields nested very deep, size-header bombs,
multipart messages) must each get exactly one reply: an ``ErrorReply`` (``bad_request``,
with the frame's ``req_id`` when one can be read) for a bad frame, the normal reply for a
frame that a mutation happened to keep valid. The service must never crash or wedge: it
answers ``status`` within a second afterwards and still runs a whole suggest → speculate →
accept round.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zmq
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from protocol.wire import codec
from protocol.wire.approval import ApprovalMode
from protocol.wire.control import (
    AcceptRequest,
    ApprovalAnswer,
    AskRequest,
    CancelRequest,
    ErrorReply,
    KillWorkerRequest,
    RejectRequest,
    ResetRequest,
    StatsReply,
    StatsRequest,
    StatusReply,
    StatusRequest,
    StopRequest,
    SuggestionReply,
    SuggestionRequest,
    Transcript,
    TurnEnded,
    WorkersReply,
    WorkersRequest,
)
from protocol.wire.endpoints import Endpoints
from tests.coordinator.e2e import FIX, NEG, Driver
from tests.support import (
    Specrun,
    make_sample_project,
    running_service,
    wait_until,
)

REQUESTS = codec.client_to_coordinator()
REPLIES = codec.coordinator_to_client()
ENC = msgspec.msgpack.Encoder()

VALID = [
    StatusRequest(1),
    WorkersRequest(2),
    StatsRequest(3),
    SuggestionRequest(4, False),
    AskRequest(5, "hello there", ApprovalMode.YOLO, True, "tab"),
    AcceptRequest(6, "tab"),
    RejectRequest(7),
    ResetRequest(8),
    KillWorkerRequest(9, 123),
    ApprovalAnswer(10, 5, "call-1", True),
    CancelRequest(11, 5),
    StopRequest(12),
]
ENCODED = [ENC.encode(m) for m in VALID]
# A mutated frame that still decodes is sent only when answering it has no side effect.
HARMLESS = {
    StatusRequest: StatusReply,
    WorkersRequest: WorkersReply,
    StatsRequest: StatsReply,
    SuggestionRequest: SuggestionReply,
}
BOMBS = [
    b"\xdd\xff\xff\xff\xff",  # array32 claiming 4 G elements
    b"\xdf\xff\xff\xff\xff",  # map32 claiming 4 G pairs
    b"\xdb\xff\xff\xff\xff",  # str32 claiming 4 GiB
    b"\xc6\xff\xff\xff\xff",  # bin32 claiming 4 GiB
    b"\x91" * 100_000 + b"\xc0",  # 100,000 nested arrays
    b"\x81\xa4type" + b"\x81\xa1a" * 50_000 + b"\xc0",  # nested maps under the tag key
    # a valid status request with an unknown field nested 200,000 deep (msgspec skips
    # unknown fields, recursively)
    b"\x83"
    + ENC.encode("type")
    + ENC.encode("status")
    + ENC.encode("req_id")
    + ENC.encode(1)
    + ENC.encode("junk")
    + b"\x91" * 200_000
    + b"\xc0",
]

INT64 = st.integers(min_value=-(2**63), max_value=2**64 - 1)  # what msgpack can carry
ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    INT64,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.binary(max_size=40),
    st.lists(INT64, max_size=4),
    st.dictionaries(st.text(max_size=5), INT64, max_size=3),
)


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    """A valid encoded request, broken in one of many ways (occasionally still valid)."""
    base = draw(st.sampled_from(ENCODED))
    how = draw(
        st.sampled_from(
            ["flip", "truncate", "append", "splice", "retag", "retype", "huge", "drop", "extra"]
        )
    )
    data = bytearray(base)
    if how == "flip":
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
        return bytes(data)
    if how == "truncate":
        return bytes(data[: draw(st.integers(0, len(data) - 1))])
    if how == "append":
        return bytes(data) + draw(st.binary(min_size=1, max_size=64))
    if how == "splice":
        i = draw(st.integers(0, len(data)))
        return bytes(data[:i]) + draw(st.binary(min_size=1, max_size=16)) + bytes(data[i:])
    fields: dict[str, Any] = msgspec.msgpack.decode(base)
    if how == "retag":
        fields["type"] = draw(
            st.one_of(
                st.text(max_size=20),
                st.sampled_from(["hello", "heartbeat", "run_speculation", "turn_ended", "error"]),
                ANY_VALUE,
            )
        )
    elif how == "retype":
        key = draw(st.sampled_from(sorted(fields)))
        fields[key] = draw(ANY_VALUE)
    elif how == "huge":
        key = draw(st.sampled_from(sorted(fields)))
        fields[key] = draw(
            st.sampled_from([2**64 - 1, -(2**63), 1e308, float("inf"), "x" * 300_000, [0] * 50_000])
        )
    elif how == "drop":
        fields.pop(draw(st.sampled_from(sorted(fields))))
    else:
        fields[draw(st.text(min_size=1, max_size=10))] = draw(ANY_VALUE)
    return ENC.encode(fields)


MARKER_ID = 987_654_321
MARKER = REQUESTS.encode(StatusRequest(MARKER_ID))


def _is_marker(reply: Any) -> bool:
    return isinstance(reply, StatusReply) and reply.req_id == MARKER_ID


class ControlPort:
    """One fresh DEALER per frame, so a missing or extra reply is never blamed on another."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.ctx = zmq.Context()

    def exchange(self, *parts: bytes, timeout_s: float = 5.0, settle_s: float = 0.0) -> list[Any]:
        """The replies to one message, up to the reply to a status request sent after it
        on the same socket: the service answers a frame it cannot decode before it reads
        the next one, so a second reply to such a frame comes before the marker's, and no
        fixed wait is needed to see it (the old 30 ms look after each of the ~700 frames
        was most of this module's time). A request that decodes is handled in a task of
        its own, which the marker's may overtake: ``settle_s`` then looks a while longer
        for a second reply."""
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(self.endpoint)
        try:
            sock.send_multipart(list(parts))
            sock.send(MARKER)
            deadline = time.monotonic() + timeout_s
            replies: list[Any] = []
            marked = False
            while not (marked and replies):
                left = deadline - time.monotonic()
                assert left > 0 and sock.poll(int(left * 1000) + 1), (
                    f"no reply within {timeout_s}s to {parts[0][:40]!r}: {replies}"
                )
                reply = REPLIES.decode(sock.recv())
                if _is_marker(reply) and not marked:
                    marked = True
                else:
                    replies.append(reply)
            while settle_s and sock.poll(int(settle_s * 1000)):
                replies.append(REPLIES.decode(sock.recv()))
            return replies
        finally:
            sock.close()

    def close(self) -> None:
        self.ctx.destroy(linger=0)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Specrun]:
    project = make_sample_project(tmp_path_factory.mktemp("fuzz") / "proj")
    with running_service(project, "--approval-mode", "auto-edit", "--workers", "2") as runner:
        yield runner


@pytest.fixture(scope="module")
def port(running: Specrun) -> Iterator[ControlPort]:
    p = ControlPort(Endpoints.for_project(running.project, create=False).control)
    yield p
    p.close()


def _expect_one_error(
    port: ControlPort, frame: bytes, *more: bytes, timeout_s: float = 5.0
) -> ErrorReply:
    replies = port.exchange(frame, *more, timeout_s=timeout_s)
    assert len(replies) == 1, replies
    reply = replies[0]
    assert isinstance(reply, ErrorReply), reply
    assert reply.code == "bad_request", reply
    assert reply.message.strip(), reply
    return reply


def _check_frame(port: ControlPort, frame: bytes) -> None:
    try:
        request = REQUESTS.decode(frame)
    except codec.ProtocolError:
        reply = _expect_one_error(port, frame)
        assert reply.req_id == (codec.peek_req_id(frame) or 0)
        return
    assume(type(request) in HARMLESS)
    replies = port.exchange(frame, settle_s=0.03)
    assert len(replies) == 1, replies
    assert isinstance(replies[0], HARMLESS[type(request)]), replies
    assert replies[0].req_id == request.req_id


FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)


@FUZZ
@given(frame=st.binary(max_size=2048))
def test_random_bytes_get_one_error_reply_each(port: ControlPort, frame: bytes) -> None:
    _check_frame(port, frame)


@FUZZ
@given(frame=mutated_frames())
def test_mutated_requests_get_one_error_reply_each(port: ControlPort, frame: bytes) -> None:
    _check_frame(port, frame)


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(
        st.one_of(st.sampled_from(ENCODED), st.binary(max_size=64)), min_size=2, max_size=5
    )
)
def test_multipart_messages_get_one_error_reply_each(port: ControlPort, parts: list[bytes]) -> None:
    reply = _expect_one_error(port, *parts)
    assert reply.req_id == (codec.peek_req_id(parts[0]) or 0)


@pytest.mark.parametrize("index", range(len(BOMBS)))
def test_size_and_depth_bombs_get_an_error_reply(port: ControlPort, index: int) -> None:
    started = time.monotonic()
    _expect_one_error(port, BOMBS[index])
    assert time.monotonic() - started < 2.0


def test_a_fifty_megabyte_frame_gets_an_error_reply(port: ControlPort) -> None:
    _expect_one_error(port, random.Random(3).randbytes(50 * 1024 * 1024), timeout_s=20)


def test_many_clients_sending_garbage_at_once_each_get_their_replies(port: ControlPort) -> None:
    rng = random.Random(9)
    socks = []
    for _ in range(20):
        sock = port.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(port.endpoint)
        socks.append(sock)
    try:
        for _ in range(25):
            for sock in socks:
                sock.send(rng.randbytes(rng.randint(1, 80)))
        for sock in socks:
            got = 0
            while got < 25 and sock.poll(5000):
                assert isinstance(REPLIES.decode(sock.recv()), ErrorReply)
                got += 1
            assert got == 25
    finally:
        for sock in socks:
            sock.close()


def test_after_the_fuzzing_the_service_still_serves_a_whole_round(
    running: Specrun, port: ControlPort
) -> None:
    started = time.monotonic()
    status = port.exchange(REQUESTS.encode(StatusRequest(42)))
    assert isinstance(status[0], StatusReply) and time.monotonic() - started < 1.0
    assert wait_until(lambda: len(running.query(WorkersRequest)["workers"]) >= 2, timeout=10)
    driver = Driver(running.project)
    try:
        assert isinstance(driver.ask(FIX)[-1], TurnEnded)
        driver.wait_for_speculation(NEG, ("completed",))
        replies = driver.accept()
        assert any(isinstance(r, Transcript) for r in replies)
        end = replies[-1]
        assert isinstance(end, TurnEnded) and end.reason == "accepted", end
    finally:
        driver.close()
    assert (Path(running.project) / "tests" / "test_calc_negative.py").exists()
