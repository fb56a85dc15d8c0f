"""The main chat's write policy: which file writes run, ask or are refused in each mode."""

from __future__ import annotations

import json

import pytest

from coordinator.service.chat.tool_exec import HIDDEN_NAME_REASON, hidden_name_reason, write_policy
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import ToolCall


def write(path: str, tool: str = "write_file") -> ToolCall:
    return ToolCall(id="c", name=tool, arguments=json.dumps({"file_path": path, "content": "x"}))


@pytest.mark.parametrize(
    ("mode", "policy"),
    [(ApprovalMode.DEFAULT, "ask"), (ApprovalMode.AUTO_EDIT, "run"), (ApprovalMode.YOLO, "run"),
     (ApprovalMode.PLAN, "refuse")],
)
def test_a_plain_write_follows_the_mode(mode: ApprovalMode, policy: str) -> None:
    assert write_policy(write("src/a.py"), mode) == policy
    assert write_policy(write("my notes.md", "edit"), mode) == policy  # odd but legal


@pytest.mark.parametrize("path", ["notes\x1b[1A\x1b[2K.md", "\u202egnp.sh", "a\u200b.py",
                                  "line\nbreak"])
@pytest.mark.parametrize("mode", [ApprovalMode.DEFAULT, ApprovalMode.AUTO_EDIT,
                                  ApprovalMode.YOLO])
def test_a_name_with_hidden_characters_always_asks(path: str, mode: ApprovalMode) -> None:
    assert write_policy(write(path), mode) == "ask"
    assert hidden_name_reason(write(path)) == HIDDEN_NAME_REASON
    assert write_policy(write(path), ApprovalMode.PLAN) == "refuse"


def test_other_tools_run() -> None:
    call = ToolCall(id="c", name="read_file", arguments=json.dumps({"file_path": "\x1b"}))
    assert write_policy(call, ApprovalMode.DEFAULT) == "run"
    assert hidden_name_reason(call) is None


def test_only_the_argument_the_tool_writes_is_its_file_name() -> None:
    # write_file ignores "path": a hidden character there names no file.
    args = {"file_path": "ok.md", "path": "\u202egnp.sh", "content": "x"}
    call = ToolCall(id="c", name="write_file", arguments=json.dumps(args))
    assert hidden_name_reason(call) is None
    assert write_policy(call, ApprovalMode.AUTO_EDIT) == "run"
