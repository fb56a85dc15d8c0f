"""Every wire message survives a round trip; bad frames become ProtocolError."""

from __future__ import annotations

import typing
from collections.abc import Iterator

import msgspec
import msgspec.inspect as mi
import pytest

from protocol.wire import codec, control, work
from protocol.wire.approval import ApprovalMode
from protocol.wire.boundary import BoundaryReason
from protocol.wire.chat import CacheSafeSnapshot, Message, ToolCall, ToolResult, ToolSpec, Usage

CALL = ToolCall("c1", "read_file", '{"file_path": "a.py"}')
RESULT = ToolResult("c1", "read_file", output="1\tx")
SNAP = CacheSafeSnapshot(
    "sys", (ToolSpec("read_file", "reads", {"type": "object"}),), (Message.user("hi"),), "m", 3
)
OUTCOME = work.SpeculationOutcome(
    messages=(Message.assistant("t", (CALL,)), Message.tool((RESULT,))),
    written_files={"a.py": work.WrittenFile("/tmp/o/a.py", work.OriginalFile(1, 2, "ab"))},
    tool_use_count=1,
    turns=2,
)
INFO = control.WorkerInfo(1, control.WorkerState.IDLE, None, None, None, 0.5, 100, "landlock")
SPEC_INFO = control.SpeculationInfo("s", "running", 1, 0, (), None, 0.1, 7, None)
STATUS = control.StatusReply(
    4, "/p", 1, 2, 3.0, "http://x/v1", True, "m", "f", ApprovalMode.DEFAULT, "s", "none",
    (INFO,), True, True,
)
STATS = control.StatsReply(
    6, 1, 1, {"tab": 1}, 0, control.CountByReason(1, {"done": 1}), 1,
    control.CountByReason(0, {}), 0, 0, (0.5,), 0.5, 0.5,
)
STEP = control.LiveActivity("tool", "1\tx", "c1", "read_file", "file_path: a.py", "success")
DIFF = control.LiveDiff(
    "s", (control.FileDiff(control.FileChange("a.py", "modified", "+x", True), "+a\n", added=1),)
)
LIVE_WORKERS = control.LiveWorkers((control.LiveWorker(INFO, 12.5, 4096),))
LIVE_STATS = control.LiveStats(STATS, {0: 2})
SUGGESTION = control.SuggestionReply(5, "run the tests", True, None, SPEC_INFO)

UNDONE_FILE = control.UndoFile("a.py", "kept", "changed since")

REQUESTS = [
    control.StatusRequest(1),
    control.StopRequest(2),
    control.AskRequest(3, "fix it", ApprovalMode.YOLO, True, "tab"),
    control.SuggestionRequest(4, True),
    control.AcceptRequest(5, "tab"),
    control.RejectRequest(6),
    control.ResetRequest(7),
    control.CompactRequest(7),
    control.WorkersRequest(8),
    control.StatsRequest(9),
    control.KillWorkerRequest(10, 1234),
    control.ApprovalAnswer(11, 3, "c1", True),
    control.CancelRequest(12, 3),
    control.TypedRequest(13, "run the"),
    control.DiffRequest(14, 1, stat=True),
    control.SuggestionRequest(15, transcript=0),
    control.SubscribeRequest(16, 4321),
    control.LiveSnapshotRequest(17),
    control.UndoRequest(18, 2, conversation=True),
    control.ApprovalModeRequest(19, ApprovalMode.PLAN),
    control.PresenceRequest(20, "unfocused", 4321),
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
        context=control.ContextInfo(32768, "endpoint", 1200, 0.8, 0),
        model_wait=control.ModelWaitInfo("waiting", "rate_limit", 12.0, 2, 4, 429),
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
    control.DiffReply(13, 0, "tidy", "completed", refused="Nothing was applied."),
    control.LiveEvent(14, 1, control.LivePrompt(1, "fix it")),
    control.LiveEvent(15, 2, control.LiveTurnEvent(1, control.TextChunk(3, "hel"))),
    control.LiveEvent(16, 3, control.LiveSpeculationStep("s", STEP)),
    control.LiveEvent(17, 4, DIFF),
    control.LiveEvent(18, 5, LIVE_WORKERS),
    control.LiveEvent(19, 6, LIVE_STATS),
    control.LiveEvent(20, 7, control.LiveSuggestion(SUGGESTION)),
    control.LiveEvent(21, 8, control.LiveReset("s2")),
    control.LiveResync(22, 8),
    control.UndoReply(
        24,
        (control.CheckpointInfo(1, "accept", "fix it", 1.5, (UNDONE_FILE,)),),
        (UNDONE_FILE,),
    ),
    control.LiveSnapshot(
        23, 8, STATUS, (control.TranscriptEntry("user", "x"),), SUGGESTION, {"s": (STEP,)},
        {"s": DIFF}, LIVE_WORKERS, LIVE_STATS,
    ),
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
    work.ToolFinished(
        "s1", 9, 1, RESULT, written={"a.py": work.WrittenFile("/tmp/o/a.py", deleted=True)}
    ),
    work.Boundary("s1", 9, BoundaryReason("shell", "rm -rf x"), OUTCOME),
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
        control.LiveEvent,  # a subscription has no last reply
        control.LiveResync,
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


# --- fields with a fixed set of values ---------------------------------------------------

# Messages that hold a value in the optional fixed-value fields the lists above leave None,
# so that every such field of every wire type is exercised below.
FILLED = {
    "control reply": [
        control.WorkersReply(
            1, (control.WorkerInfo(2, "busy", "tool-1", "tool", None, 0.5, None, "unknown"),)
        ),
        control.SuggestionReply(2, None, False, "too_long", None),
        control.SuggestionReply(3, "x", True, None, None, speculation_skipped="budget"),
        control.SuggestionReply(
            3,
            "x",
            True,
            None,
            SPEC_INFO,
            branches=(
                control.Branch(0, "x", SPEC_INFO),
                control.Branch(1, "y", None, skipped="budget"),
            ),
        ),
        control.StatsReply(
            4, 0, 0, {}, 0, control.CountByReason(0, {}), 0, control.CountByReason(0, {}),
            0, 0, (), 0.0, 0.0, speculation_budget=control.BudgetInfo(10, "session", 0, False),
        ),
        control.Transcript(
            5, (control.TranscriptEntry("tool", "out", "read_file", "", "success"),), (), 0.0
        ),
        control.DiffReply(
            7, 0, "tidy", "running",
            (control.FileDiff(control.FileChange("a", "created"), "+x\n", added=1),),
        ),
        control.Transcript(
            6, (), ("a", "b", "c", "d"), 0.0,
            changes=tuple(
                control.FileChange(path, status, runs_later=path == "b", ignored=path == "c")
                for path, status in zip(
                    "abcd", ("created", "modified", "deleted", "mode"), strict=True
                )
            ),
            ignored_skipped=1,
        ),
    ],
    "worker event": [
        work.PipelinedSuggestion("s1", 9, None, "too_few_words"),
        work.Hello(1, 9, "none", (), (
            work.LayerStatus("network", True, "netns"),
            work.LayerStatus("chat_backstop", False, "unavailable: no user namespaces"),
        )),
    ],
}
CODECS = {
    "control request": (codec.client_to_coordinator, REQUESTS),
    "control reply": (codec.coordinator_to_client, REPLIES),
    "worker job": (codec.coordinator_to_worker, JOBS),
    "worker event": (codec.worker_to_coordinator, EVENTS),
}
UNIONS = {
    "control request": control.ControlRequest,
    "control reply": control.ControlReply,
    "worker job": work.WorkerJob,
    "worker event": work.WorkerEvent,
}
Path = tuple[str | int, ...]


class DictKey(str):
    """A path step that is a dict key (msgspec names a dict value's place ``[...]``)."""


def _choices(t: mi.Type) -> tuple[object, ...] | None:
    """The values a fixed-set type allows (``None`` allowed or not), or None if it is open."""
    if isinstance(t, mi.LiteralType):
        return t.values
    if isinstance(t, mi.EnumType):
        return tuple(member.value for member in t.cls)
    if isinstance(t, mi.UnionType):
        found = [c for member in t.types if (c := _choices(member)) is not None]
        return tuple(v for c in found for v in c) if found else None
    return None


def _is_member(t: mi.StructType, data: object) -> bool:
    return isinstance(data, dict) and (t.tag_field is None or data.get(t.tag_field) == t.tag)


def _fixed_fields(
    t: mi.Type, data: object, path: Path = (), owner: str = ""
) -> Iterator[tuple[Path, str, tuple[object, ...]]]:
    """``(path, "Struct.field", allowed values)`` of each fixed-value field that ``data``
    (a message as builtins) holds a value in. Dict keys are left to their own test."""
    choices = _choices(t)
    if choices is not None:
        if data is not None:
            yield path, owner, choices
    elif isinstance(t, mi.UnionType):
        for member in t.types:
            if isinstance(member, mi.StructType) and _is_member(member, data):
                yield from _fixed_fields(member, data, path, owner)
                return
    elif isinstance(t, mi.StructType):
        assert isinstance(data, dict)
        for f in t.fields:
            if f.encode_name in data:
                label = f"{t.cls.__name__}.{f.name}"
                yield from _fixed_fields(f.type, data[f.encode_name], (*path, f.encode_name), label)
    elif isinstance(t, mi.ListType | mi.VarTupleType):
        assert isinstance(data, list)
        for index, item in enumerate(data):
            yield from _fixed_fields(t.item_type, item, (*path, index), owner)
    elif isinstance(t, mi.DictType):
        assert isinstance(data, dict)
        for key, value in data.items():
            yield from _fixed_fields(t.value_type, value, (*path, DictKey(key)), owner)


def _all_fixed_fields(t: mi.Type, seen: set[type], owner: str = "") -> Iterator[str]:
    """Every ``Struct.field`` of the wire types reachable from ``t`` whose values are fixed."""
    if _choices(t) is not None:
        yield owner
    elif isinstance(t, mi.UnionType):
        for member in t.types:
            yield from _all_fixed_fields(member, seen, owner)
    elif isinstance(t, mi.StructType) and t.cls not in seen:
        seen.add(t.cls)
        for f in t.fields:
            yield from _all_fixed_fields(f.type, seen, f"{t.cls.__name__}.{f.name}")
    elif isinstance(t, mi.ListType | mi.VarTupleType):
        yield from _all_fixed_fields(t.item_type, seen, owner)
    elif isinstance(t, mi.DictType):
        yield from _all_fixed_fields(t.value_type, seen, owner)


def _cases() -> Iterator[tuple[str, typing.Any, Path, str, tuple[object, ...]]]:
    for name, (_, messages) in CODECS.items():
        union = mi.type_info(UNIONS[name])
        for message in [*messages, *FILLED.get(name, [])]:
            data = _plain(message)
            for path, owner, choices in _fixed_fields(union, data):
                yield name, message, path, owner, choices


def _plain(message: object) -> typing.Any:
    """The message as the plain maps, arrays and strings it is on the wire."""
    return msgspec.msgpack.decode(msgspec.msgpack.encode(message))


def _set(data: typing.Any, path: Path, value: object) -> typing.Any:
    for step in path[:-1]:
        data = data[step]
    data[path[-1]] = value


def _where(path: Path) -> str:
    return "$" + "".join(
        "[...]" if isinstance(step, DictKey) else f"[{step}]" if isinstance(step, int)
        else f".{step}"
        for step in path
    )


CASES = [
    pytest.param(*case, id=f"{case[3]} at {_where(case[2])} ({case[0]})") for case in _cases()
]


def test_the_samples_hold_every_fixed_value_field_of_the_wire() -> None:
    seen: set[type] = set()
    every = {
        label
        for union in UNIONS.values()
        for label in _all_fixed_fields(mi.type_info(union), seen)
    }
    covered = {owner for *_, owner, _ in _cases()}
    assert every - covered == set()
    # the Literal and enum fields added for #16, among others
    assert {
        "ErrorReply.code", "WorkerInfo.state", "WorkerInfo.job_kind", "WorkerInfo.sandbox",
        "SpeculationInfo.status", "SuggestionReply.suppressed_reason", "TurnEnded.reason",
        "BudgetInfo.window", "Hello.sandbox", "ToolStarted.decision", "RunTool.shell",
        "PipelinedSuggestion.reason", "ModelUsage.purpose", "TranscriptEntry.status",
    } <= every


@pytest.mark.parametrize(("direction", "message", "path", "owner", "choices"), CASES)
def test_every_value_of_a_fixed_field_round_trips_byte_identical(
    direction: str, message: typing.Any, path: Path, owner: str, choices: tuple[object, ...]
) -> None:
    """Each allowed value, sent as the plain string an older build wrote, decodes and is
    encoded again to the very same bytes."""
    c = CODECS[direction][0]()
    for value in choices:
        data = _plain(message)
        _set(data, path, value)
        frame = msgspec.msgpack.encode(data)
        decoded = c.decode(frame)
        assert c.encode(decoded) == frame, (owner, value)


@pytest.mark.parametrize(("direction", "message", "path", "owner", "choices"), CASES)
def test_a_value_outside_its_set_is_refused_naming_the_field(
    direction: str, message: typing.Any, path: Path, owner: str, choices: tuple[object, ...]
) -> None:
    data = _plain(message)
    _set(data, path, "no-such-value")
    with pytest.raises(codec.ProtocolError) as refused:
        CODECS[direction][0]().decode(msgspec.msgpack.encode(data))
    assert str(refused.value) == (
        f"malformed {direction} frame: Invalid enum value 'no-such-value' - at `{_where(path)}`"
    )


def test_dict_keys_with_a_fixed_set_are_checked_too() -> None:
    to_client = codec.coordinator_to_client()
    stats = REPLIES[5]
    assert isinstance(stats, control.StatsReply)
    for method in typing.get_args(control.AcceptMethod):
        raw = _plain(stats)
        raw["accepted_by_method"] = {method: 2}
        frame = msgspec.msgpack.encode(raw)
        assert to_client.encode(to_client.decode(frame)) == frame
    raw["accepted_by_method"] = {"mouse": 1}
    with pytest.raises(codec.ProtocolError, match="Invalid enum value 'mouse'"):
        to_client.decode(msgspec.msgpack.encode(raw))


def test_an_enum_field_is_the_plain_string_on_the_wire() -> None:
    assert msgspec.msgpack.encode(control.WorkerState.BUSY) == msgspec.msgpack.encode("busy")
    decoded = codec.coordinator_to_client().decode(
        codec.coordinator_to_client().encode(control.WorkersReply(1, (INFO,)))
    )
    assert isinstance(decoded, control.WorkersReply)
    assert decoded.workers[0].state is control.WorkerState.IDLE
