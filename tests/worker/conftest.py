"""Fixtures for the speculation, job and backstop tests: a small project, the scripted
model over real HTTP, a cache-safe snapshot and jobs built from them.

Every overlay a test creates lives at the real place
(``<tmp>/specrun-speculation/<pid>/<job id>``); the harness removes it at teardown the way the
coordinator does (``Overlay.cleanup``) and fails the test if a per-pid directory is left.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from coordinator.scripted_model import ScriptedModelServer
from overlay import Overlay, overlay_dir_for, speculation_base_dir
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import CacheSafeSnapshot, Message, ToolCall, ToolResult
from protocol.wire.work import (
    ModelEndpoint,
    ModelUsage,
    RunSpeculation,
    SpeculationLimits,
    WorkerEvent,
)
from tests.support import shared_sandbox_helper
from tests.worker import tool_calls
from worker.tools import TOOL_SPECS
from worker.tools.rg import rg_binary

PROJECT_FILES = {
    "README.md": "# demo\n",
    "src/app.py": "def greet():\n    return 'hello'\n",
    "src/util.py": "def util():\n    return 1\n",
    "tests/test_app.py": "from src.app import greet\n\ndef test_greet():\n    assert greet()\n",
}

SNAPSHOT = CacheSafeSnapshot(
    system="You are a careful coding agent working in a small Python project.",
    tools=TOOL_SPECS,
    history=(
        Message.user("make greet() say hello"),
        Message.assistant(
            "Let me look at it first.",
            (ToolCall("call_main_1", "read_file", '{"file_path": "src/app.py"}'),),
        ),
        Message.tool(
            (ToolResult("call_main_1", "read_file", output="def greet():\n    return 'hello'"),)
        ),
        Message.assistant("greet() already returns 'hello'. Shall I run the tests?"),
    ),
    model="main-model",
    version=3,
)

SUGGESTION = "run the tests"
FAST_MODEL = "fast-model"


def tree_state(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` with its bytes and mtime: equal states mean untouched."""
    out: dict[str, tuple[bytes, int]] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            out[path.relative_to(root).as_posix()] = (path.read_bytes(), path.stat().st_mtime_ns)
    return out


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """A tool call in a scripted reply."""
    return {"name": name, "arguments": arguments}


def rule(
    reply: dict[str, Any],
    *,
    purpose: str = "speculation",
    times: int | None = None,
    **when: str,
) -> dict[str, Any]:
    out: dict[str, Any] = {"when": {"purpose": purpose, **when}, "reply": reply}
    if times is not None:
        out["times"] = times
    return out


def calls(*tool_calls: dict[str, Any]) -> dict[str, Any]:
    """A speculation rule, used once, whose reply is ``tool_calls`` and no text."""
    return rule({"tool_calls": list(tool_calls)}, times=1)


PIPELINED_RULE = rule({"json": {"suggestion": "commit this"}}, purpose="pipelined")


class Collector:
    """Stands in for the worker's ``Outbox``: keeps every event in order (``timeline``),
    and apart from the token reports (``usage``) the speculation's own (``events``)."""

    def __init__(self) -> None:
        self.events: list[WorkerEvent] = []
        self.usage: list[ModelUsage] = []
        self.timeline: list[WorkerEvent] = []

    async def send(self, event: WorkerEvent) -> None:
        self.timeline.append(event)
        if isinstance(event, ModelUsage):
            self.usage.append(event)
        else:
            self.events.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


@dataclass
class Harness:
    """One project, one scripted model, jobs against them."""

    project: Path
    server: ScriptedModelServer
    overlay_dirs: list[Path] = field(default_factory=list)
    counter: int = 0

    def job(
        self,
        *,
        mode: ApprovalMode = ApprovalMode.YOLO,
        limits: SpeculationLimits | None = None,
        pipelined: bool = True,
        suggestion: str = SUGGESTION,
        sandbox: bool = False,
        overlay_pid: int | None = None,
        snapshot: CacheSafeSnapshot = SNAPSHOT,
        alternatives: int = 1,
    ) -> RunSpeculation:
        self.counter += 1
        job_id = f"spec-{self.counter}"
        overlay_dir = overlay_dir_for(overlay_pid or os.getpid(), job_id)
        self.overlay_dirs.append(overlay_dir)
        return RunSpeculation(
            job_id=job_id,
            epoch=7,
            suggestion=suggestion,
            snapshot=snapshot,
            approval_mode=mode,
            model=FAST_MODEL,
            project_root=str(self.project),
            overlay_dir=str(overlay_dir),
            endpoint=ModelEndpoint(base_url=self.server.base_url, cache_sharing=True),
            limits=limits or SpeculationLimits(),
            pipelined=pipelined,
            sandbox=sandbox,
            alternatives=alternatives,
        )

    def run(self, job: RunSpeculation) -> Collector:
        """Run a whole speculation job in this process (never with ``sandbox=True``)."""
        from worker.jobs import run_speculation

        assert not job.sandbox, "confining the test process would break the test run"
        out = Collector()
        asyncio.run(run_speculation(job, out, shared_sandbox_helper()))  # type: ignore[arg-type]
        return out

    def bodies(self, purpose: str = "speculation") -> list[dict[str, Any]]:
        return [r["body"] for r in self.server.requests if r["purpose"] == purpose]

    def cleanup(self) -> None:
        for path in self.overlay_dirs:
            Overlay(self.project, path).cleanup()


def make_project(root: Path) -> Path:
    root.mkdir(parents=True)
    for rel, text in PROJECT_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def spec_project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


@pytest.fixture
def harness(spec_project: Path) -> Iterator[Any]:
    """``harness(rules, **scenario)`` starts the scripted model and returns a Harness."""
    made: list[Harness] = []
    own = speculation_base_dir() / str(os.getpid())
    # The shared sandbox helper keeps its mount point in this process's per-pid dir
    # for the whole run; anything else there after the test is a leak.
    shared_sandbox_helper()
    before = set(os.listdir(own)) if own.exists() else set()

    def start(rules: list[dict[str, Any]], **scenario: Any) -> Harness:
        server = ScriptedModelServer({"rules": rules, "chunk_ms": 0, **scenario}).start()
        h = Harness(spec_project, server)
        made.append(h)
        return h

    try:
        yield start
    finally:
        for h in made:
            h.server.stop()
            h.cleanup()
    after = set(os.listdir(own)) if own.exists() else set()
    leftover = after - before - {"owner"}  # the owner mark goes with the last overlay
    for name in leftover:
        shutil.rmtree(own / name, ignore_errors=True)
    assert not leftover, f"{sorted(leftover)} was left behind in {own}"


@pytest.fixture(params=["rg", "python"])
def search_engine(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> str:
    """The file search's engine for a test: ripgrep choosing the files, or the pure-Python
    walk (a module that reads files through the tools runs every test with both; the tools
    are called through ``tool_calls``, which gives the walk ``use_ripgrep=False``)."""
    if request.param == "rg":
        assert rg_binary(tmp_path) is not None, "the ripgrep dependency is not installed"
    monkeypatch.setattr(tool_calls, "SEARCH_ENGINE", str(request.param))
    return str(request.param)


@pytest.fixture(scope="module")
def stop_multiprocess_helpers() -> Iterator[None]:
    """``multiprocess`` starts a fork server on first use and keeps it for the whole
    session. Stop it once a module that started workers is done, so no child process of
    the test run outlives its tests (other tests check for leftover children); the next
    user starts it again on demand. (The pool keeps ``multiprocess`` from starting its
    resource tracker; should one have started anyway, it is stopped too.)"""
    yield
    from multiprocess import forkserver, resource_tracker

    forkserver._forkserver._stop()
    if resource_tracker._resource_tracker._pid is not None:
        resource_tracker._resource_tracker._stop()
