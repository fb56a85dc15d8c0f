"""``run_tool``: the main chat's tool calls, in the real tree."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Literal

import pytest

import worker.jobs
from protocol.wire.chat import ToolCall, ToolResult
from protocol.wire.work import Failed, RunTool, ToolDone
from tests.support import shared_sandbox_helper
from tests.worker.conftest import Collector
from worker.jobs import run_tool
from worker.tools import TOOL_SPECS


def tool_job(
    project: Path, name: str, shell: Literal["read_only", "full"] = "read_only", **args: Any
) -> RunTool:
    return RunTool(
        job_id="tool-1",
        epoch=3,
        call=ToolCall("call_9", name, json.dumps(args)),
        project_root=str(project),
        shell=shell,
        timeout_s=10.0,
    )


def answer(job: RunTool) -> ToolDone | Failed:
    out = Collector()
    asyncio.run(run_tool(job, out, shared_sandbox_helper()))  # type: ignore[arg-type]
    assert len(out.events) == 1, out.events
    event = out.events[0]
    assert isinstance(event, ToolDone | Failed)
    assert (event.job_id, event.epoch) == ("tool-1", 3)
    return event


def done(job: RunTool) -> ToolDone:
    event = answer(job)
    assert isinstance(event, ToolDone), event
    assert event.result.call_id == "call_9"
    return event


def test_read_only_shell_runs_without_approval(spec_project: Path) -> None:
    event = done(tool_job(spec_project, "run_shell_command", command="ls src | sort"))
    assert event.needs_approval is None
    assert event.result.output is not None
    assert "Exit code: 0" in event.result.output and "app.py" in event.result.output


@pytest.mark.parametrize(
    "command",
    ["touch created.txt", "echo hi > created.txt", "rm -f README.md", "python -c 'print(1)'"],
)
def test_write_shell_asks_for_approval_and_does_not_run(spec_project: Path, command: str) -> None:
    before = sorted(p.name for p in spec_project.iterdir())
    event = done(tool_job(spec_project, "run_shell_command", command=command))
    assert event.needs_approval
    assert event.result.error is not None and event.needs_approval in event.result.error
    assert sorted(p.name for p in spec_project.iterdir()) == before


def test_full_shell_runs_what_the_user_approved(spec_project: Path) -> None:
    event = done(tool_job(spec_project, "run_shell_command", "full", command="touch created.txt"))
    assert event.needs_approval is None
    assert event.result.ok
    assert (spec_project / "created.txt").exists()


def test_empty_shell_command_is_the_tools_own_error(spec_project: Path) -> None:
    event = done(tool_job(spec_project, "run_shell_command", command="  "))
    assert event.needs_approval is None
    assert event.result.error == "command is empty"


EXAMPLE_ARGS: dict[str, dict[str, Any]] = {
    "read_file": {"file_path": "src/app.py"},
    "write_file": {"file_path": "src/new.py", "content": "X = 1\n"},
    "edit": {"file_path": "README.md", "old_string": "demo", "new_string": "Demo"},
    "grep_search": {"pattern": "greet"},
    "glob": {"pattern": "**/*.py"},
    "list_directory": {"path": "src"},
    "run_shell_command": {"command": "pwd"},
}


@pytest.mark.parametrize("name", [spec.name for spec in TOOL_SPECS])
def test_every_tool_is_reachable(spec_project: Path, name: str) -> None:
    event = done(tool_job(spec_project, name, **EXAMPLE_ARGS[name]))
    assert event.result.ok, event.result.error
    assert event.needs_approval is None


def test_main_chat_tools_write_the_real_tree(spec_project: Path) -> None:
    done(tool_job(spec_project, "write_file", **EXAMPLE_ARGS["write_file"]))
    done(tool_job(spec_project, "edit", **EXAMPLE_ARGS["edit"]))
    assert (spec_project / "src/new.py").read_text() == "X = 1\n"
    assert (spec_project / "README.md").read_text() == "# Demo\n"


def test_unknown_tool_is_an_error_result(spec_project: Path) -> None:
    event = done(tool_job(spec_project, "web_fetch", url="https://example.com"))
    assert event.result == ToolResult("call_9", "web_fetch", error="Tool 'web_fetch' not found")


def test_internal_error_answers_failed(spec_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(call: ToolCall, ctx: Any) -> ToolResult:
        raise RuntimeError("registry exploded")

    monkeypatch.setattr(worker.jobs, "execute", broken)
    event = answer(tool_job(spec_project, "read_file", file_path="README.md"))
    assert isinstance(event, Failed)
    assert "registry exploded" in event.error


def test_a_main_chat_read_outside_the_project_asks_first(tmp_path: Path) -> None:
    """design §11: nothing outside the project goes to the model without a yes (yolo aside)."""
    project = tmp_path / "project"
    project.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("do not send\n")
    asked = done(tool_job(project, "read_file", file_path=str(secret)))
    assert asked.needs_approval == "read_outside_project:read_file"
    assert "do not send" not in (asked.result.output or "")
    approved = done(tool_job(project, "read_file", shell="full", file_path=str(secret)))
    assert approved.needs_approval is None
    assert "do not send" in (approved.result.output or "")
    inside = done(tool_job(project, "list_directory", path="."))
    assert inside.needs_approval is None
