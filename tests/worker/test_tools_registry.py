"""The tool registry, execute() and argument checking; DirectAccess path rules."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import msgspec
import pytest

from protocol.rules.tools import READ_TOOLS, SHELL_TOOL, WRITE_TOOLS
from protocol.wire.chat import ToolCall, ToolSpec
from worker.tools import (
    TOOL_SPECS,
    TOOLS,
    DirectAccess,
    FileAccess,
    OverlayAccess,
    ToolContext,
    ToolError,
    execute,
    get_tool,
)
from worker.tools.reach import Reach

EXPECTED_ORDER = [
    "read_file",
    "write_file",
    "edit",
    "grep_search",
    "glob",
    "list_directory",
    "run_shell_command",
]


def test_fixed_order_and_lookup() -> None:
    assert [spec.name for spec in TOOL_SPECS] == EXPECTED_ORDER
    assert [tool.spec for tool in TOOLS] == list(TOOL_SPECS)
    for spec in TOOL_SPECS:
        tool = get_tool(spec.name)
        assert tool is not None and tool.spec is spec
    assert get_tool("nope") is None


def test_specs_are_valid_openai_function_schemas() -> None:
    for spec in TOOL_SPECS:
        assert isinstance(spec, ToolSpec)
        params = spec.parameters
        assert params["type"] == "object"
        assert set(params["required"]) <= set(params["properties"])
        for prop in params["properties"].values():
            assert prop["type"] in ("string", "integer", "boolean")
            assert prop["description"]
        assert spec.to_openai()["function"]["name"] == spec.name


_ENCODE = (
    "import sys, msgspec; from worker.tools import TOOL_SPECS; "
    "sys.stdout.buffer.write(msgspec.json.encode([s.to_openai() for s in TOOL_SPECS]))"
)


def test_tool_specs_encode_byte_identically_across_imports() -> None:
    here = msgspec.json.encode([spec.to_openai() for spec in TOOL_SPECS])
    runs = [
        subprocess.run(
            [sys.executable, "-c", _ENCODE], capture_output=True, check=True, timeout=30
        ).stdout
        for _ in range(2)
    ]
    assert runs[0] == runs[1] == here
    assert msgspec.json.encode(TOOL_SPECS) == msgspec.json.encode(TOOL_SPECS)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / "a.txt").write_text("a\n")
    return ToolContext(access=DirectAccess(tmp_path))


def run(ctx: ToolContext, name: str, arguments: str) -> tuple[str | None, str | None]:
    result = asyncio.run(execute(ToolCall("id-7", name, arguments), ctx))
    assert result.call_id == "id-7"
    assert result.name == name
    assert (result.output is None) != (result.error is None)
    return result.output, result.error


def test_unknown_tool(ctx: ToolContext) -> None:
    assert run(ctx, "web_fetch", "{}") == (None, "Tool 'web_fetch' not found")


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ("{", "Invalid arguments for read_file: not valid JSON"),
        ("[1]", "Invalid arguments for read_file: expected a JSON object"),
        ("{}", "Invalid arguments for read_file: 'file_path' is required"),
        ('{"file_path": null}', "Invalid arguments for read_file: 'file_path' is required"),
        (
            '{"file_path": 3}',
            "Invalid arguments for read_file: 'file_path' must be a string, got 3",
        ),
        (
            '{"file_path": "a.txt", "limit": "ten"}',
            "Invalid arguments for read_file: 'limit' must be an integer",
        ),
        (
            '{"file_path": "a.txt", "limit": true}',
            "Invalid arguments for read_file: 'limit' must be an integer",
        ),
        (
            '{"file_path": "a.txt", "offset": 1.5}',
            "Invalid arguments for read_file: 'offset' must be an integer",
        ),
        ('{"file_path": ""}', "Path is empty"),
        ('{"file_path": "a\\u0000b"}', "Path contains a NUL character"),
    ],
)
def test_argument_errors(ctx: ToolContext, arguments: str, error: str) -> None:
    output, message = run(ctx, "read_file", arguments)
    assert output is None
    assert message is not None and message.startswith(error)


def test_lenient_coercions_and_unknown_keys(ctx: ToolContext) -> None:
    expected = ("     1\ta", None)
    assert run(ctx, "read_file", '{"file_path": "a.txt", "limit": "1"}') == expected
    assert run(ctx, "read_file", '{"file_path": "a.txt", "offset": 1.0}') == expected
    assert run(ctx, "read_file", '{"file_path": "a.txt", "extra": [1]}') == expected
    assert run(ctx, "read_file", '{"file_path": "a.txt", "limit": null}') == expected


def test_output_cap_applies_to_every_tool(ctx: ToolContext) -> None:
    root = ctx.access.root
    for i in range(400):
        (root / f"file_{i:04}_{'x' * 40}.txt").write_text("x")
    small = ToolContext(access=ctx.access, output_cap=1000)
    output, _ = run(small, "list_directory", "{}")
    assert output is not None
    full, _ = run(ctx, "list_directory", "{}")
    assert full is not None and len(full) > 1000
    assert output == full[:1000].rstrip("\n") + (
        f"\n[Output truncated: showing 1,000 of {len(full):,} characters.]"
    )
    assert len(output) < 1100


class _Boom:
    root = Path("/")
    reach = Reach("/", anywhere=True)

    def resolve_read(self, path: str) -> Path:
        raise RuntimeError("disk on fire")

    def resolve_write(self, path: str) -> Path:
        raise OSError(28, "No space left on device", "/x/y")

    def logical_path(self, path: str) -> Path:
        return Path("/", path)

    def overlay_files(self) -> Mapping[Path, Path]:
        return {}

    def reserve(self, path: str, size: int) -> None:
        return None


def test_exceptions_become_error_results() -> None:
    ctx = ToolContext(access=_Boom())
    assert run(ctx, "read_file", '{"file_path": "x"}') == (None, "disk on fire")
    assert run(ctx, "write_file", '{"file_path": "x", "content": ""}') == (
        None,
        "No space left on device: /x/y",
    )


def test_cancellation_propagates(tmp_path: Path) -> None:
    class Slow(DirectAccess):
        def resolve_read(self, path: str) -> Path:
            raise asyncio.CancelledError

    ctx = ToolContext(access=Slow(tmp_path))
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(
            execute(
                ToolCall("c", "edit", '{"file_path":"x","old_string":"a","new_string":"b"}'), ctx
            )
        )


# --- DirectAccess -----------------------------------------------------------------------------


def test_direct_access_paths(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "sub").mkdir(parents=True)
    access = DirectAccess(root)
    assert isinstance(access, FileAccess)
    assert access.resolve_read("sub/x") == root / "sub" / "x"
    assert access.resolve_read("sub/../y") == root / "y"
    assert access.resolve_read("/etc/hostname") == Path("/etc/hostname")
    assert access.resolve_read("../z") == tmp_path / "z"
    assert access.resolve_write("sub/x") == root / "sub" / "x"
    assert access.resolve_write(str(root / "sub" / "x")) == root / "sub" / "x"
    assert access.resolve_write("..foo") == root / "..foo"
    assert access.logical_path("sub/../a") == root / "a"
    assert access.overlay_files() == {}
    for bad in ("../x", "sub/../../x", str(tmp_path / "x"), "/etc/passwd"):
        with pytest.raises(ToolError, match="outside the project root"):
            access.resolve_write(bad)


def test_direct_access_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "real").mkdir()
    (root / "inside_link").symlink_to(root / "real", target_is_directory=True)
    (root / "outside_link").symlink_to(tmp_path, target_is_directory=True)
    (root / "dangling").symlink_to(tmp_path / "missing.txt")
    access = DirectAccess(root)
    assert access.resolve_write("inside_link/f") == root / "real" / "f"
    with pytest.raises(ToolError, match="resolves to"):
        access.resolve_write("outside_link/f")
    with pytest.raises(ToolError, match="outside the project root"):
        access.resolve_write("dangling")


def test_root_given_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real_root").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real_root", target_is_directory=True)
    access = DirectAccess(tmp_path / "alias")
    assert access.root == tmp_path / "real_root"
    assert access.resolve_write("f.txt") == tmp_path / "real_root" / "f.txt"


def test_overlay_access_satisfies_the_protocol(tmp_path: Path) -> None:
    from overlay import Overlay

    (tmp_path / "p").mkdir()
    access = OverlayAccess(Overlay(tmp_path / "p", tmp_path / "o" / "1" / "s"))
    assert isinstance(access, FileAccess)
    assert access.root == tmp_path / "p"


def test_every_registered_tool_is_in_exactly_one_protocol_category() -> None:
    """The categories the gate, the worker's jobs and the service's approval policy share
    (protocol.rules.tools) name the registry's tools: a tool in none would stop every speculation
    as unknown, a category name with no tool would be dead policy."""
    categories = [READ_TOOLS, WRITE_TOOLS, frozenset({SHELL_TOOL})]
    for tool in TOOLS:
        assert sum(tool.name in category for category in categories) == 1, tool.name
    registered = {tool.name for tool in TOOLS}
    assert WRITE_TOOLS | {SHELL_TOOL} <= registered
    assert READ_TOOLS - registered == {"lsp"}  # gated as a read, not implemented
