"""Typed tool arguments (``worker.tools.args``, ``worker.tools.schema``): the schema the
model sees, generated from each tool's struct, stays what it was; it has the shape providers
accept; lax decoding takes what models send and refuses the rest with a ``ToolError``; the
path declarations agree with the tool categories and with the approval policy's table."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Annotated, Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.rules.tools import READ_TOOLS, WRITE_PATH_ARGUMENTS, WRITE_TOOLS
from protocol.wire.chat import ToolCall
from worker.tools import TOOLS, ToolError
from worker.tools.args import PathArg, ToolArgs, decode_arguments, path_fields
from worker.tools.edit import EditArgs
from worker.tools.read_file import ReadFileArgs
from worker.tools.run_shell_command import RunShellCommandArgs
from worker.tools.schema import parameters_schema
from worker.tools.write_file import WriteFileArgs

RECORDED = Path(__file__).with_name("tool_schemas.json")

FUZZ = settings(
    derandomize=True,
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# --- the schema the model sees ------------------------------------------------------------


def test_generated_schemas_are_what_the_model_saw_before() -> None:
    """The hand-written schemas the structs replaced, recorded byte for byte: a change to a
    field's name, type, constraint or description shows here first (update the recording
    when the change is meant)."""
    recorded = json.loads(RECORDED.read_text())
    generated = {tool.name: tool.spec.parameters for tool in TOOLS}
    assert generated == recorded
    # Same key order too: the tools array is part of every request's cached prefix.
    assert json.dumps(generated) == json.dumps(recorded)


def _walk(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        return [node, *[d for value in node.values() for d in _walk(value)]]
    if isinstance(node, list):
        return [d for value in node for d in _walk(value)]
    return []


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_every_schema_is_provider_valid(tool: Any) -> None:
    params = tool.spec.parameters
    assert params["type"] == "object"
    assert set(params) == {"type", "properties", "required"}
    assert isinstance(params["required"], list)
    assert set(params["required"]) <= set(params["properties"])
    for node in _walk(params):
        assert not {"$ref", "$defs", "anyOf", "title", "default"} & set(node), node
    for name, prop in params["properties"].items():
        assert prop["type"] in ("string", "integer", "boolean"), name
        assert prop["description"], name
    # Required exactly when the struct has no default for it.
    fields = msgspec.structs.fields(tool.args)
    assert params["required"] == [f.name for f in fields if f.required]


class _Speed(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


class _Window(msgspec.Struct):
    start: Annotated[int, msgspec.Meta(ge=1, description="First line.")]


class _Nested(ToolArgs, frozen=True):
    speed: Annotated[_Speed, msgspec.Meta(description="How fast.")]
    window: _Window | None = None


def test_referenced_types_are_inlined() -> None:
    """Types msgspec puts in ``$defs`` (an enum, a struct) come inline, with the
    description given beside the reference."""
    assert parameters_schema(_Nested) == {
        "type": "object",
        "properties": {
            "speed": {"enum": ["fast", "slow"], "description": "How fast."},
            "window": {
                "type": "object",
                "properties": {
                    "start": {"type": "integer", "minimum": 1, "description": "First line."}
                },
                "required": ["start"],
            },
        },
        "required": ["speed"],
    }


# --- path declarations ---------------------------------------------------------------------


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_path_declarations_match_the_tool_categories(tool: Any) -> None:
    uses = {mark.use for mark in tool.paths.values()}
    fields = {f.name: f for f in msgspec.structs.fields(tool.args)}
    if tool.name in READ_TOOLS:
        assert uses == {"read"}
    elif tool.name in WRITE_TOOLS:
        writes = [key for key, mark in tool.paths.items() if mark.use == "write"]
        assert writes and all(fields[key].required for key in writes)
    else:
        assert not tool.paths


def test_a_path_declared_on_a_field_that_is_not_a_string_is_refused() -> None:
    class Odd(ToolArgs, frozen=True):
        line: Annotated[int, PathArg("read")] | None = None

    with pytest.raises(TypeError, match=r"Odd\.line: a path argument is a string"):
        path_fields(Odd)


def test_the_approval_policys_table_is_the_declared_write_paths() -> None:
    declared = {
        tool.name: tuple(key for key, mark in tool.paths.items() if mark.use == "write")
        for tool in TOOLS
        if tool.name in WRITE_TOOLS
    }
    assert dict(WRITE_PATH_ARGUMENTS) == declared


def test_a_repeated_key_decodes_as_the_gate_saw_it() -> None:
    """The gate reads ``ToolCall.args()``; the tool decodes the same text into its struct.
    With a key given twice both must take the same one, or a checked path could differ from
    the written one."""
    text = '{"file_path": ".git/config", "content": "", "file_path": "ok.txt"}'
    args = decode_arguments("write_file", text, WriteFileArgs)
    assert args.file_path == ToolCall("c", "write_file", text).args()["file_path"] == "ok.txt"


# --- lax decoding --------------------------------------------------------------------------


@FUZZ
@given(
    n=st.integers(min_value=1, max_value=2**53),
    spelling=st.sampled_from(["{}", '"{}"', "{}.0", '" {}"']),
)
def test_numbers_given_as_strings_are_numbers(n: int, spelling: str) -> None:
    value = spelling.format(n)
    text = f'{{"file_path": "a.txt", "offset": {value}, "limit": {value}}}'
    args = decode_arguments("read_file", text, ReadFileArgs)
    assert (args.offset, args.limit) == (n, n)


@FUZZ
@given(n=st.integers(max_value=0), quoted=st.booleans())
def test_a_number_below_the_minimum_is_refused(n: int, quoted: bool) -> None:
    value = f'"{n}"' if quoted else str(n)
    with pytest.raises(ToolError) as refused:
        decode_arguments("run_shell_command", f'{{"command": "ls", "timeout": {value}}}',
                         RunShellCommandArgs)
    assert str(refused.value) == (
        "Invalid arguments for run_shell_command: 'timeout' must be at least 1"
    )


@pytest.mark.parametrize(("given", "expected"), [("true", True), ('"true"', True),
                                                  ('"false"', False), ("false", False),
                                                  ("null", None)])
def test_booleans_given_as_strings_are_booleans(given: str, expected: bool | None) -> None:
    text = f'{{"file_path": "a", "old_string": "", "new_string": "", "replace_all": {given}}}'
    args = decode_arguments("edit", text, EditArgs)
    assert args.replace_all is expected


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
_KEYS = st.sampled_from(
    ["file_path", "path", "pattern", "offset", "limit", "content", "old_string", "new_string",
     "replace_all", "command", "timeout", "include", "description"]
) | st.text(max_size=8)


@FUZZ
@given(
    tool=st.sampled_from(TOOLS),
    args=st.dictionaries(_KEYS, _JSON, max_size=5) | _JSON,
)
def test_any_json_decodes_or_is_a_tool_error(tool: Any, args: Any) -> None:
    text = json.dumps(args)
    try:
        decoded = decode_arguments(tool.name, text, tool.args)
    except ToolError as exc:
        assert str(exc).startswith(f"Invalid arguments for {tool.name}: ")
        assert "\n" not in str(exc)
    else:
        assert isinstance(decoded, tool.args)


@FUZZ
@given(tool=st.sampled_from(TOOLS), text=st.text(max_size=40) | st.binary(max_size=40).map(
    lambda raw: raw.decode("latin-1")))
def test_garbage_text_is_a_tool_error(tool: Any, text: str) -> None:
    try:
        decode_arguments(tool.name, text, tool.args)
    except ToolError as exc:
        assert str(exc).startswith(f"Invalid arguments for {tool.name}: ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"file_path": "a", "limit": "ten"}', "'limit' must be an integer, got \"ten\""),
        ('{"file_path": "a", "limit": 2.5}', "'limit' must be an integer, got 2.5"),
        ('{"file_path": ["a"]}', "'file_path' must be a string, got [\"a\"]"),
        ('{"file_path": "a", "offset": 0}', "'offset' must be at least 1"),
        ('{"offset": 3}', "'file_path' is required"),
        ('{"file_path": null}', "'file_path' is required"),
        ('"a.txt"', "expected a JSON object"),
        ('{"file_path": "a"', "not valid JSON ("),
    ],
)
def test_messages_the_model_reads(text: str, message: str) -> None:
    with pytest.raises(ToolError) as refused:
        decode_arguments("read_file", text, ReadFileArgs)
    assert str(refused.value).startswith(f"Invalid arguments for read_file: {message}")
