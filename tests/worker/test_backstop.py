"""The kernel write backstop (design §9): a confined speculation worker cannot write the real
tree even when a command gets past the gate.

The gate never lets ``touch`` run, so the workers here are built by the test with
``WorkerSeams(ungated_command=...)``: a worker that runs exactly that one command without the
gate. They are spawned by the test (the seams are an argument of ``worker_entry``) and talk
to a ZeroMQ ROUTER owned by the test.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import multiprocess
import pytest
import zmq

from overlay import speculation_base_dir
from protocol.wire import codec
from protocol.wire.boundary import BoundaryReason
from protocol.wire.endpoints import make_router
from protocol.wire.seams import NO_SEAMS, WorkerSeams
from protocol.wire.work import (
    Boundary,
    Completed,
    Hello,
    RunSpeculation,
    Shutdown,
    ToolFinished,
    WorkerEvent,
)
from tests.support import needs_containment
from tests.worker.conftest import PIPELINED_RULE, Harness, call, rule, tree_state
from worker.contain.landlock import abi as landlock_abi
from worker.process import worker_entry
from worker.tools import TOOL_SPECS

pytestmark = pytest.mark.usefixtures("stop_multiprocess_helpers")

EPOCH = 7


@dataclass
class Spawned:
    """One worker process spawned by the test, and the test's end of its socket."""

    process: Any
    sock: zmq.Socket
    hello: Hello
    identity: bytes

    def send(self, job: RunSpeculation | Shutdown) -> None:
        self.sock.send_multipart([self.identity, codec.coordinator_to_worker().encode(job)])

    def until(self, kinds: tuple[type[Any], ...], timeout: float = 15.0) -> list[WorkerEvent]:
        decoder = codec.worker_to_coordinator()
        seen: list[WorkerEvent] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.sock.poll(100):
                continue
            _, frame = self.sock.recv_multipart()
            event = decoder.decode(frame)
            seen.append(event)
            if isinstance(event, kinds):
                return seen
        raise AssertionError(f"no {kinds} within {timeout} s; saw {seen}")


@pytest.fixture
def spawn_worker() -> Iterator[Any]:
    ctx = zmq.Context()
    runtime = Path(tempfile.mkdtemp(prefix="sb-"))
    started: list[Spawned] = []

    def start(ungated: str | None) -> Spawned:
        seams = NO_SEAMS if ungated is None else WorkerSeams(ungated_command=ungated)
        endpoint = f"ipc://{runtime}/w{len(started)}.sock"
        sock = make_router(ctx, endpoint)
        process = multiprocess.get_context("spawn").Process(
            target=worker_entry, args=(endpoint, EPOCH, os.getpid(), 0.5, seams), daemon=False
        )
        process.start()
        decoder = codec.worker_to_coordinator()
        assert sock.poll(20_000), "the spawned worker never said hello"
        identity, frame = sock.recv_multipart()
        hello = decoder.decode(frame)
        assert isinstance(hello, Hello)
        spawned = Spawned(process, sock, hello, identity)
        started.append(spawned)
        return spawned

    lingering: list[int] = []
    leftovers: list[Path] = []
    try:
        yield start
    finally:
        for s in started:
            s.process.join(5)  # a worker exits by itself after its speculation
            if s.process.is_alive():
                lingering.append(s.hello.pid)
                s.process.kill()
                s.process.join(5)
            s.sock.close(linger=0)
            own = speculation_base_dir() / str(s.hello.pid)
            if own.exists():
                leftovers.append(own)
                shutil.rmtree(own, ignore_errors=True)
        ctx.term()
        shutil.rmtree(runtime, ignore_errors=True)
    assert not lingering, f"workers still running after their speculation: {lingering}"
    assert not leftovers, f"per-pid speculation dirs left behind: {leftovers}"


def probe_rules(command: str) -> list[dict[str, Any]]:
    return [
        rule({"tool_calls": [call("run_shell_command", command=command)]}, times=1),
        rule({"text": "Touched."}),
        PIPELINED_RULE,
    ]


def shell_output(events: list[WorkerEvent]) -> str:
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.result.ok, finished.result
    return finished.result.output or ""


@needs_containment("the kernel has no Landlock" if landlock_abi() == 0 else None)
def test_confined_worker_cannot_write_the_real_tree(
    harness: Any, spawn_worker: Any, spec_project: Path
) -> None:
    real = spec_project / "README.md"
    new = spec_project / "created-by-probe.txt"
    # Each write form on its own, `;`-separated so every one is tried. (Landlock does not
    # govern timestamps: `touch` of an *existing* file would still change its mtime.)
    command = (
        'echo "scratch:$TMPDIR" > "$TMPDIR/s" && cat "$TMPDIR/s"; '
        f"touch {new}; echo more >> {real}; rm -f {spec_project / 'src/util.py'}; "
        f"mv {spec_project / 'src/app.py'} {spec_project / 'moved.py'}; mkdir {spec_project / 'd'}"
    )
    h: Harness = harness(probe_rules(command))
    before = tree_state(h.project)

    worker = spawn_worker(command)
    assert worker.hello.sandbox == "landlock"
    assert worker.hello.tools == TOOL_SPECS
    job = h.job(sandbox=True, overlay_pid=worker.hello.pid)
    worker.send(job)
    events = worker.until((Completed, Boundary))

    output = shell_output(events)
    assert "Exit code: 0" not in output
    assert output.count("Permission denied") == 5, output
    # The worker's own scratch dir stays writable, and tool subprocesses are pointed at it.
    scratch = speculation_base_dir() / str(worker.hello.pid) / "tmp"
    assert f"scratch:{scratch}" in output
    assert tree_state(h.project) == before
    assert not new.exists()
    h.cleanup()


def test_the_probe_bypasses_the_gate_when_not_confined(harness: Any, spawn_worker: Any) -> None:
    """The control experiment: the same probe without the backstop does write, so the
    denial above comes from the kernel, not from the gate."""
    probe = "created-by-probe.txt"
    h: Harness = harness(probe_rules(f"touch {probe}"))
    worker = spawn_worker(f"touch {probe}")
    worker.send(h.job(sandbox=False, overlay_pid=worker.hello.pid))
    events = worker.until((Completed, Boundary))
    assert "Exit code: 0" in shell_output(events)
    assert (h.project / probe).exists()
    h.cleanup()


def test_without_the_hook_the_gate_stops_the_same_command(harness: Any, spawn_worker: Any) -> None:
    h: Harness = harness(probe_rules("touch created-by-probe.txt"))
    worker = spawn_worker(None)
    worker.send(h.job(sandbox=True, overlay_pid=worker.hello.pid))
    events = worker.until((Completed, Boundary))
    assert isinstance(events[-1], Boundary)
    assert events[-1].reason == BoundaryReason("shell", "touch created-by-probe.txt")
    assert not (h.project / "created-by-probe.txt").exists()
    h.cleanup()
