"""The live subscription through a real service: events numbered one by one, a snapshot
that says where it stands, streamed text gathered into few events, speculation steps and
diffs, and the control socket still answering every request while a subscriber follows
(and while another one never reads)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zmq

from protocol.wire import codec
from protocol.wire.control import (
    AskRequest,
    ControlReply,
    LiveDiff,
    LiveEvent,
    LivePrompt,
    LiveResync,
    LiveSnapshot,
    LiveSnapshotRequest,
    LiveSpeculationStep,
    LiveSuggestion,
    LiveTurnEvent,
    OkReply,
    ResetRequest,
    SubscribeRequest,
    TextChunk,
    TurnEnded,
)
from protocol.wire.endpoints import Endpoints, make_dealer
from tests.coordinator.e2e import FIX, NEG, scenario_variant, start_playing
from tests.support import Specrun

WORDS = 900  # the streaming turn's answer: about 300 chunks of three words


def _streaming(rules: list[Any]) -> None:
    text = " ".join(f"w{i}" for i in range(WORDS))
    rules[:0] = [
        {"when": {"last_user": "stream it"}, "reply": {"text": text, "chunk_ms": 0}},
    ]


class Subscriber:
    def __init__(self, project: Path, read: bool = True) -> None:
        self.ctx = zmq.Context()
        control = Endpoints.for_project(project, create=False).control
        self.events = make_dealer(self.ctx, control)
        self.requests = make_dealer(self.ctx, control)
        self.replies = codec.coordinator_to_client()
        self.encoder = msgspec.msgpack.Encoder()
        self.events.send(self.encoder.encode(SubscribeRequest(1, os.getpid())))

    def snapshot(self) -> LiveSnapshot:
        self.requests.send(self.encoder.encode(LiveSnapshotRequest(2)))
        assert self.requests.poll(10_000), "no snapshot"
        reply = self.replies.decode(self.requests.recv())
        assert isinstance(reply, LiveSnapshot), reply
        return reply

    def read(self, until: Any, timeout: float = 30) -> list[ControlReply]:
        got: list[ControlReply] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.events.poll(100):
                got.append(self.replies.decode(self.events.recv()))
                if until(got):
                    return got
        raise AssertionError(f"not seen in {timeout} s; got {[type(g).__name__ for g in got]}")

    def close(self) -> None:
        self.events.close(linger=0)
        self.requests.close(linger=0)
        self.ctx.term()


@pytest.fixture
def live(specrun: Specrun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Specrun]:
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))  # for the sockets here
    start_playing(specrun, scenario_variant(tmp_path, _streaming))
    try:
        yield specrun
    finally:
        specrun.run("stop")


def _changes(got: list[ControlReply]) -> list[Any]:
    return [g.change for g in got if isinstance(g, LiveEvent)]


def test_a_subscriber_sees_the_turn_its_speculation_and_the_diff_numbered_in_order(
    live: Specrun,
) -> None:
    sub = Subscriber(live.project)
    try:
        first = sub.snapshot()
        assert first.status.project == str(live.project)
        assert live.run("ask", FIX).returncode == 0

        def diff_seen(got: list[ControlReply]) -> bool:
            return any(isinstance(c, LiveDiff) and c.files for c in _changes(got))

        got = sub.read(diff_seen)
        events = [g for g in got if isinstance(g, LiveEvent)]
        assert [e.seq for e in events] == list(
            range(events[0].seq, events[0].seq + len(events))
        ), "numbered one by one, none missing"
        # The snapshot stood at a number within what the subscription delivered: the
        # events after it are exactly the ones numbered after it.
        assert events[0].seq - 1 <= first.seq <= events[-1].seq
        changes = _changes(got)
        prompts = [c for c in changes if isinstance(c, LivePrompt)]
        assert [p.text for p in prompts] == [FIX]
        ended = [c for c in changes if isinstance(c, LiveTurnEvent)
                 and isinstance(c.event, TurnEnded)]
        assert ended and ended[0].event.reason == "completed"  # type: ignore[union-attr]
        suggestions = [c.suggestion for c in changes if isinstance(c, LiveSuggestion)]
        assert any(s.text == NEG for s in suggestions)
        steps = [c.step for c in changes if isinstance(c, LiveSpeculationStep)]
        assert {(s.tool, s.status) for s in steps} >= {("read_file", "success"),
                                                       ("write_file", "success")}
        diff = next(c for c in changes if isinstance(c, LiveDiff) and c.files)
        (created,) = diff.files
        assert (created.change.path, created.change.status) == (
            "tests/test_calc_negative.py", "created"
        )
        assert "+def test_add_negative_numbers():" in created.diff
        assert created.change.runs_later is False and diff.refused == ""

        # A fresh snapshot holds all of it, as of its own number.
        later = sub.snapshot()
        assert later.seq >= events[-1].seq
        assert later.suggestion.text == NEG
        spec_id = diff.speculation_id
        assert later.diffs[spec_id] == diff
        assert (later.conversation[0].kind, later.conversation[0].text) == ("user", FIX)
    finally:
        sub.close()


def test_streamed_text_is_gathered_and_every_request_is_answered_while_subscribers_follow(
    live: Specrun,
) -> None:
    reading = Subscriber(live.project)
    stalled = Subscriber(live.project)  # subscribes and never reads an event
    client = zmq.Context()
    control = Endpoints.for_project(live.project, create=False).control
    sock = make_dealer(client, control)
    replies = codec.coordinator_to_client()
    encoder = msgspec.msgpack.Encoder()

    def call(request: Any, timeout_ms: int = 15_000) -> ControlReply:
        sock.send(encoder.encode(request))
        while True:
            assert sock.poll(timeout_ms), f"no answer to {type(request).__name__}"
            reply = replies.decode(sock.recv())
            if reply.req_id == request.req_id and isinstance(reply, (OkReply, TurnEnded)):
                return reply

    try:
        reading.snapshot()
        texts = 0
        for n in range(20):
            assert isinstance(call(ResetRequest(100 + 2 * n)), OkReply)
            end = call(AskRequest(101 + 2 * n, "stream it"))
            assert isinstance(end, TurnEnded) and end.reason == "completed"
            got = reading.read(lambda g: any(
                isinstance(c, LiveTurnEvent) and isinstance(c.event, TurnEnded)
                for c in _changes(g)
            ))
            chunks = [c.event.text for c in _changes(got)
                      if isinstance(c, LiveTurnEvent) and isinstance(c.event, TextChunk)]
            assert "".join(chunks).split() == [f"w{i}" for i in range(WORDS)]
            texts += len(chunks)
            assert not any(isinstance(g, LiveResync) for g in got)
        # About 300 chunks a turn reached the client that asked; the view got few events.
        assert texts <= 20 * 30, texts
    finally:
        sock.close(linger=0)
        client.term()
        reading.close()
        stalled.close()
