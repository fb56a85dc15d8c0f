"""A boundary reason crosses the worker's wire as a tagged struct, every code intact, and is
text (``code:detail``) only where a script or a log reads it."""

from __future__ import annotations

import msgspec
import pytest

from protocol.wire import codec
from protocol.wire.boundary import BOUNDARY_CODES, BoundaryReason
from protocol.wire.work import Boundary, SpeculationOutcome

OUTCOME = SpeculationOutcome(messages=(), written_files={}, tool_use_count=0, turns=1)


@pytest.mark.parametrize("code", BOUNDARY_CODES)
def test_every_code_round_trips_in_a_boundary_event(code: str) -> None:
    reason = msgspec.convert({"code": code, "detail": "git commit -m 'a: b'"}, BoundaryReason)
    sent = Boundary(job_id="s1", epoch=3, reason=reason, outcome=OUTCOME)
    wire = codec.worker_to_coordinator()
    received = wire.decode(wire.encode(sent))
    assert received == sent
    assert isinstance(received, Boundary) and received.reason.code == code
    assert received.reason.detail == "git commit -m 'a: b'"  # a colon in the detail stays


def test_the_wire_carries_code_and_detail_apart() -> None:
    sent = Boundary("s1", 3, BoundaryReason("limit", "memory"), OUTCOME)
    assert msgspec.to_builtins(sent)["reason"] == {"code": "limit", "detail": "memory"}


def test_an_unknown_code_is_refused_at_the_wire() -> None:
    wire = codec.worker_to_coordinator()
    frame = msgspec.msgpack.encode(
        {"type": "boundary", "job_id": "s1", "epoch": 3,
         "reason": {"code": "brand_new", "detail": "x"}, "outcome": msgspec.to_builtins(OUTCOME)}
    )
    with pytest.raises(codec.ProtocolError, match="code"):
        wire.decode(frame)


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        (BoundaryReason("shell", "git push"), "shell:git push"),
        (BoundaryReason("path_rewrite_failed", "edit: no path argument"),
         "path_rewrite_failed:edit: no path argument"),
        (BoundaryReason("quota", "overlay_bytes"), "quota:overlay_bytes"),
        (BoundaryReason("refusal"), "refusal"),  # no detail: the code alone, as before
    ],
)
def test_the_text_is_the_code_colon_detail_scripts_always_read(
    reason: BoundaryReason, text: str
) -> None:
    assert reason.text() == text
