"""Every wire message survives a round trip; bad frames become ProtocolError."""

from __future__ import annotations

import typing

import msgspec
import pytest

from protocol import codec, control, work
from protocol.approval import ApprovalMode
from protocol.chat import CacheSafeSnapshot, Message, ToolCall, ToolResult, ToolSpec, Usage

CALL = ToolCall("c1", "read_file", '{"file_path": "a.py"}')
RESULT = ToolResult("c1", "read_file", output="1\tx")
SNAP = CacheSafeSnapshot(
    "sys", (ToolSpec("read_file", "reads", {"type": "object"}),), (Message.user("hi"),), "m", 3
)
OUTCOME = work.SpeculationOutcome(
    messages=(Message.assistant("t", (CALL,)), Message.tool((RESULT,))),
    written_files={"a.py": work.WrittenFile("/tmp/o/a.py", work.Fingerprint(1, 2, "ab"))},
    tool_use_count=1,
    turns=2,
)
INFO = control.WorkerInfo(1, "idle", None, None, None, 0.5, 100, "landlock")
SPEC_INFO = control.SpeculationInfo("s", "running", 1, 0, (), None, 0.1, 7, None)

REQUESTS = [
    control.StatusRequest(1),
    control.StopRequest(2),
    control.AskRequest(3, "fix it", ApprovalMode.YOLO, True, "tab"),
    control.SuggestionRequest(4, True),
    control.AcceptRequest(5, "tab"),
    control.RejectRequest(6),
    control.ResetRequest(7),
    control.WorkersRequest(8),
    control.StatsRequest(9),
    control.KillWorkerRequest(10, 1234),
    control.ApprovalAnswer(11, 3, "c1", True),
    control.CancelRequest(12, 3),
]
REPLIES = [
    control.ErrorReply(1, "bad_request", "no."),
    control.OkReply(2, "ok"),
    control.WorkersReply(3, (INFO,)),
    control.StatusReply(
        4,
        "/p",
        1,
        2,
        3.0,
        "http://x/v1",
        True,
        "m",
        "f",
        ApprovalMode.DEFAULT,
        "s",
        "none",
        (INFO,),
        True,
        True,
    ),
    control.SuggestionReply(5, "run the tests", True, None, SPEC_INFO),
    control.StatsReply(
        6,
        1,
        1,
        {"tab": 1},
        0,
        control.CountByReason(1, {"done": 1}),
        1,
        control.CountByReason(0, {}),
        0,
        0,
        (0.5,),
        0.5,
        0.5,
    ),
    control.TextChunk(7, "hel"),
    control.ToolShown(8, "c1", "read_file", "file_path: a.py", "success", "1\tx"),
    control.ApprovalNeeded(9, CALL, "writes"),
    control.Notice(10, "fyi"),
    control.Transcript(11, (control.TranscriptEntry("user", "x"),), ("a.py",), 1.5),
    control.TurnEnded(12, "completed"),
]
JOBS = [
    work.RunSpeculation(
        "s1",
        9,
        "run the tests",
        SNAP,
        ApprovalMode.AUTO_EDIT,
        "fast",
        "/p",
        "/o",
        work.ModelEndpoint("http://x/v1", "key"),
    ),
    work.RunTool("t1", 9, CALL, "/p", "full", 5.0),
    work.Shutdown(9),
]
EVENTS = [
    work.Hello(1, 9, "landlock", SNAP.tools),
    work.Heartbeat(1, 9, "s1"),
    work.ModelText("s1", 9, 0, "hi"),
    work.ToolStarted("s1", 9, 0, CALL, "allow"),
    work.ToolFinished("s1", 9, 0, RESULT),
    work.Boundary("s1", 9, "shell:rm -rf x", OUTCOME),
    work.Completed("s1", 9, OUTCOME),
    work.PipelinedSuggestion("s1", 9, "commit this"),
    work.ModelUsage("s1", 9, "speculation", Usage(1200, 40, 1240, 1100)),
    work.ToolDone("t1", 9, RESULT, "shell: command:rm"),
    work.Failed("s1", 9, "boom"),
]


def _members(union: object) -> set[type]:
    return set(typing.get_args(union))


def test_lists_cover_every_message_type() -> None:
    assert {type(m) for m in REQUESTS} == _members(control.ControlRequest)
    assert {type(m) for m in REPLIES} == _members(control.ControlReply)
    assert {type(m) for m in JOBS} == _members(work.WorkerJob)
    assert {type(m) for m in EVENTS} == _members(work.WorkerEvent)


@pytest.mark.parametrize(
    ("make_codec", "messages"),
    [
        (codec.client_to_coordinator, REQUESTS),
        (codec.coordinator_to_client, REPLIES),
        (codec.coordinator_to_worker, JOBS),
        (codec.worker_to_coordinator, EVENTS),
    ],
)
def test_round_trip(
    make_codec: typing.Callable[[], codec.Codec[typing.Any]], messages: list[typing.Any]
) -> None:
    c = make_codec()
    for message in messages:
        assert c.decode(c.encode(message)) == message


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\xc1",
        b"not msgpack at all",
        msgspec.msgpack.encode({"type": "nope", "req_id": 1}),
        msgspec.msgpack.encode({"type": "ask", "req_id": "one", "text": "x"}),
        msgspec.msgpack.encode({"type": "ask", "req_id": 1}),
        msgspec.msgpack.encode([1, 2, 3]),
        msgspec.msgpack.encode(
            {"type": "ask", "req_id": 1, "text": "x", "approval_mode": "reckless"}
        ),
    ],
)
def test_bad_frames_raise_protocol_error(frame: bytes) -> None:
    with pytest.raises(codec.ProtocolError, match="malformed control request frame"):
        codec.client_to_coordinator().decode(frame)


def test_a_reply_is_not_a_request() -> None:
    frame = codec.coordinator_to_client().encode(control.OkReply(1))
    with pytest.raises(codec.ProtocolError):
        codec.client_to_coordinator().decode(frame)


def test_peek_req_id_recovers_the_id_of_a_bad_request() -> None:
    assert codec.peek_req_id(msgspec.msgpack.encode({"type": "nope", "req_id": 42})) == 42
    assert codec.peek_req_id(b"\xc1") is None
    assert codec.peek_req_id(msgspec.msgpack.encode({"req_id": True})) is None


def test_the_api_key_stays_out_of_reprs() -> None:
    endpoint = work.ModelEndpoint("http://x/v1", "sk-secret")
    assert "sk-secret" not in repr(endpoint)
    assert "sk-secret" not in repr(JOBS[0])


def test_is_final_marks_the_last_reply_of_a_request() -> None:
    streaming = {
        control.TextChunk,
        control.ToolShown,
        control.ApprovalNeeded,
        control.Notice,
        control.Transcript,
    }
    for reply in REPLIES:
        assert control.is_final(reply) == (type(reply) not in streaming)


def test_stats_cost_fields_round_trip_and_older_replies_still_decode() -> None:
    full = control.StatsReply(
        6, 1, 1, {"tab": 1}, 0, control.CountByReason(0, {}), 1, control.CountByReason(0, {}),
        0, 0, (0.5,), 0.5, 0.5,
        tokens={"speculation": control.TokenCount(2, 1000, 900, 30)},
        speculation_tokens=control.SpeculationTokens(1030, 1030, 0, 0),
        time_saved_per_1k_tokens_s=0.4854,
        speculations_skipped=control.CountByReason(1, {"budget": 1}),
        speculation_budget=control.BudgetInfo(1000, "hour", 1030, True),
    )
    to_client = codec.coordinator_to_client()
    assert to_client.decode(to_client.encode(full)) == full
    # A reply from a service that predates the cost fields: they take their defaults.
    old = msgspec.msgpack.encode(msgspec.to_builtins(full))
    raw = msgspec.msgpack.decode(old)
    for name in ("tokens", "speculation_tokens", "time_saved_per_1k_tokens_s",
                 "speculations_skipped", "speculation_budget"):
        del raw[name]
    decoded = to_client.decode(msgspec.msgpack.encode(raw))
    assert isinstance(decoded, control.StatsReply)
    assert decoded.tokens == {} and decoded.speculation_budget is None
