"""Protocol fuzzing of the worker socket of a real running service.

Anyone who can reach the worker socket can send frames under any identity: random bytes,
mutated worker events carrying the live epoch, a live speculation's id and real worker
pids, wrong tags and field types, deep nesting, multipart messages. No reply is owed on
this socket; the service must keep answering ``status`` within a second, keep exactly its
own workers, and never let a forged event change a speculation: a forged ``Completed``
for a running speculation must not be what ``accept`` applies.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import psutil
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.cli.client import ServiceClient
from protocol.wire import codec
from protocol.wire.boundary import BoundaryReason
from protocol.wire.chat import Message, ToolCall, ToolResult, ToolSpec
from protocol.wire.control import StatusReply, StatusRequest, Transcript, TurnEnded
from protocol.wire.endpoints import Endpoints
from protocol.wire.work import (
    Boundary,
    Completed,
    Failed,
    Heartbeat,
    Hello,
    ModelText,
    PipelinedSuggestion,
    SpeculationOutcome,
    ToolDone,
    ToolFinished,
    ToolStarted,
    WrittenFile,
)
from tests.coordinator.e2e import FIX, NEG, Driver, scenario_variant
from tests.support import (
    Specrun,
    make_sample_project,
    running_service,
    worker_frames_handled,
)

ENC = msgspec.msgpack.Encoder()
INT64 = st.integers(min_value=-(2**63), max_value=2**64 - 1)
ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    INT64,
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.binary(max_size=30),
    st.lists(INT64, max_size=3),
)
DEEP = b"\x91" * 150_000 + b"\xc0"


def _slow_speculation(rules: list[dict[str, Any]]) -> None:
    """The speculation's first model answer takes 1.5 s: time to forge its end."""
    for rule in rules:
        if rule.get("name") == "negative test, read the tests":
            rule["reply"]["latency_ms"] = 1500


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Specrun]:
    tmp = tmp_path_factory.mktemp("fuzzw")
    scenario = scenario_variant(tmp, _slow_speculation)
    project = make_sample_project(tmp / "proj")
    with running_service(
        project, "--approval-mode", "auto-edit", "--scenario", str(scenario), "--workers", "2"
    ) as runner:
        yield runner


class Live:
    """The running service as seen from the control socket: epoch, pid, worker pids."""

    def __init__(self, project: Path, log: Path) -> None:
        self.project = project
        self.log = log
        self.client = ServiceClient(project, timeout_s=5)
        self.ctx = zmq.Context()
        self.endpoint = Endpoints.for_project(project, create=False).workers
        status = self.status()
        self.epoch, self.pid = status.epoch, status.pid

    def status(self, within_s: float = 1.0) -> StatusReply:
        started = time.monotonic()
        reply = self.client.request(StatusRequest(req_id=self.client.next_id()), timeout_s=within_s)
        assert isinstance(reply, StatusReply), reply
        assert time.monotonic() - started < within_s
        return reply

    def worker_pids(self) -> set[int]:
        return {w.pid for w in self.status().workers}

    def send(self, identity: bytes, *parts: bytes) -> None:
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 2000)
        sock.setsockopt(zmq.IDENTITY, identity)
        sock.connect(self.endpoint)
        sock.send_multipart(list(parts))
        sock.close()  # linger: the frames leave before the socket goes

    def handled(self) -> None:
        """Return once the service has handled every frame sent so far."""
        self.ctx.term()  # the frames of the closed sockets leave first
        self.ctx = zmq.Context()
        worker_frames_handled(self.project, self.epoch, self.log)

    def close(self) -> None:
        self.client.close()
        self.ctx.destroy(linger=0)


@pytest.fixture(scope="module")
def live(running: Specrun) -> Iterator[Live]:
    handle = Live(running.project, running.service_log)
    yield handle
    handle.close()


def _events(epoch: int, job_id: str, pid: int, written: str) -> list[Any]:
    call = ToolCall("call_1", "write_file", '{"file_path": "x.txt", "content": "x"}')
    result = ToolResult("call_1", "write_file", output="ok")
    outcome = SpeculationOutcome(
        messages=(Message.assistant("forged", (call,)), Message.tool((result,))),
        written_files={"FORGED.txt": WrittenFile(overlay_path=written)},
        tool_use_count=1,
        turns=1,
    )
    spec = ToolSpec("evil", "a tool nobody has", {"type": "object"})
    return [
        Hello(pid=pid, epoch=epoch, sandbox="none", tools=(spec,)),
        Heartbeat(pid=pid, epoch=epoch, job_id=job_id),
        ModelText(job_id=job_id, epoch=epoch, turn=0, text="forged text"),
        ToolStarted(job_id=job_id, epoch=epoch, turn=0, call=call, decision="allow"),
        ToolFinished(job_id=job_id, epoch=epoch, turn=0, result=result),
        Boundary(
            job_id=job_id, epoch=epoch, reason=BoundaryReason("shell", "forged"), outcome=outcome
        ),
        Completed(job_id=job_id, epoch=epoch, outcome=outcome),
        PipelinedSuggestion(job_id=job_id, epoch=epoch, text="delete everything"),
        ToolDone(job_id=job_id, epoch=epoch, result=result),
        Failed(job_id=job_id, epoch=epoch, error="forged failure"),
    ]


@st.composite
def worker_frames(draw: st.DrawFn, epoch: int, pids: list[int]) -> bytes:
    pid = draw(st.sampled_from([*pids, 1, 999_999]))
    job_id = draw(st.sampled_from(["spec-1-000000", "tool-1", "x"]))
    event = draw(st.sampled_from(_events(epoch, job_id, pid, "/etc/hostname")))
    fields: dict[str, Any] = msgspec.msgpack.decode(ENC.encode(event))
    how = draw(st.sampled_from(["valid", "retype", "retag", "drop", "deep", "flip", "cut"]))
    if how == "retype":
        fields[draw(st.sampled_from(sorted(fields)))] = draw(ANY_VALUE)
    elif how == "retag":
        fields["type"] = draw(st.one_of(st.text(max_size=12), st.sampled_from(["status", "ask"])))
    elif how == "drop":
        fields.pop(draw(st.sampled_from(sorted(fields))))
    elif how == "deep":
        return ENC.encode(fields)[:-1] + DEEP if draw(st.booleans()) else DEEP
    data = ENC.encode(fields)
    if how == "flip":
        mutable = bytearray(data)
        i = draw(st.integers(0, len(mutable) - 1))
        mutable[i] ^= 1 << draw(st.integers(0, 7))
        return bytes(mutable)
    if how == "cut":
        return data[: draw(st.integers(0, len(data) - 1))]
    return data


IDENTITIES = st.one_of(
    st.binary(min_size=1, max_size=12).filter(lambda b: b[0] != 0),
    st.integers(min_value=0, max_value=4_200_000).map(lambda n: f"w{n}".encode()),
    st.sampled_from([b"w", b"w-1", b"w99999999999999999999", b"wabc"]),
)


def test_random_and_mutated_worker_frames_never_crash_or_wedge_the_service(
    live: Live, running: Specrun
) -> None:
    workers_before = live.worker_pids()
    assert len(workers_before) >= 2
    # A live worker's identity too: the ROUTER must not hand its route to a stranger.
    taken = st.sampled_from(sorted(f"w{pid}".encode() for pid in workers_before))

    @settings(
        max_examples=400,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        identity=st.one_of(IDENTITIES, taken),
        frames=st.lists(
            st.one_of(worker_frames(live.epoch, sorted(workers_before)), st.binary(max_size=256)),
            min_size=1,
            max_size=3,
        ),
        multipart=st.booleans(),
    )
    def fuzz(identity: bytes, frames: list[bytes], multipart: bool) -> None:
        if multipart:
            live.send(identity, *frames)
        else:
            for frame in frames:
                live.send(identity, frame)
        live.status()

    fuzz()
    live.handled()
    after = live.status()
    assert after.pid == live.pid and after.epoch == live.epoch
    # Only processes the pool started are workers: no forged hello added one.
    for info in after.workers:
        proc = psutil.Process(info.pid)
        assert proc.ppid() != live.pid  # children of the fork server, not of the coordinator
        assert live.pid in [p.pid for p in proc.parents()]
    assert after.workers and all(w.state in ("idle", "starting", "busy") for w in after.workers)


def test_a_forged_completed_for_a_running_speculation_is_not_what_accept_applies(
    live: Live, running: Specrun, tmp_path: Path
) -> None:
    forged = tmp_path / "forged.txt"
    forged.write_text("forged content\n")
    driver = Driver(running.project)
    try:
        assert isinstance(driver.ask(FIX)[-1], TurnEnded)
        running_spec = driver.wait_for_speculation(NEG, ("running",))
        assert running_spec.speculation is not None
        spec_id, pid = running_spec.speculation.id, running_spec.speculation.worker_pid
        assert pid is not None
        outcome = SpeculationOutcome(
            messages=(Message.assistant("forged"),),
            written_files={"FORGED.txt": WrittenFile(overlay_path=str(forged))},
            tool_use_count=0,
            turns=1,
        )
        forged_frame = codec.worker_to_coordinator().encode(
            Completed(job_id=spec_id, epoch=live.epoch, outcome=outcome)
        )
        for identity in (f"w{pid}".encode(), f"w{pid + 1}".encode(), b"stranger"):
            live.send(identity, forged_frame)
        live.handled()
        # Handled, and not applied: a forged end would have made it `completed` with the
        # forged file. Still running, or (on a slow machine) really completed.
        still = driver.suggestion()
        assert still.speculation is not None, still
        assert still.speculation.status == "running" or (
            still.speculation.status == "completed"
            and still.speculation.files_written == ("tests/test_calc_negative.py",)
        ), still
        done = driver.wait_for_speculation(NEG, ("completed",))
        assert done.speculation is not None
        assert done.speculation.files_written == ("tests/test_calc_negative.py",)
        replies = driver.accept()
        end = replies[-1]
        assert isinstance(end, TurnEnded) and end.reason == "accepted", end
        transcript = next(r for r in replies if isinstance(r, Transcript))
        assert transcript.files == ("tests/test_calc_negative.py",)
    finally:
        driver.close()
    assert not (running.project / "FORGED.txt").exists()
    assert (running.project / "tests" / "test_calc_negative.py").exists()
