"""Tool gate (design §4): every row of the decision table, with the real overlay."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import pytest

from overlay import Overlay
from protocol.wire.approval import ApprovalMode
from protocol.wire.boundary import BoundaryReason
from worker.gate import (
    DENIED_TOOLS,
    READ_TOOLS,
    GateDecision,
    OverlayLike,
    evaluate,
)
from worker.tools import PathArg, ToolArgs
from worker.tools.args import path_fields


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


@pytest.fixture()
def overlay(tmp_path: Path, project: Path) -> Overlay:
    return Overlay(project, tmp_path / "overlay" / "spec-1")


ALL_MODES = list(ApprovalMode)
AUTO_MODES = [ApprovalMode.AUTO_EDIT, ApprovalMode.YOLO]
ASKING_MODES = [ApprovalMode.DEFAULT, ApprovalMode.PLAN]


# -- read tools --------------------------------------------------------------------------------


READ_PATHS = [
    ("read_file", "file_path"),
    ("grep_search", "path"),
    ("glob", "path"),
    ("list_directory", "path"),
]


@pytest.mark.parametrize(("tool", "key"), READ_PATHS)
@pytest.mark.parametrize("mode", ALL_MODES)
def test_read_tools_allowed_with_paths_resolved(
    tool: str, key: str, mode: ApprovalMode, overlay: Overlay, project: Path
) -> None:
    decision = evaluate(tool, {key: "src/app.py", "pattern": "x"}, mode, overlay)
    assert decision.action == "allow"
    assert decision.reason == f"read_tool:{tool}"
    # not written in this speculation: the real file
    assert Path(decision.args[key]) == project / "src" / "app.py"
    assert decision.args["pattern"] == "x"  # not a path (glob's: a pattern, kept relative)


def test_every_read_tool_is_covered() -> None:
    assert {tool for tool, _ in READ_PATHS} | {"lsp"} == READ_TOOLS


def test_a_read_tool_without_an_implementation_has_no_path(overlay: Overlay) -> None:
    # lsp is gated as a read but nothing runs it: no argument is taken for a path.
    decision = evaluate("lsp", {"path": "/etc/passwd"}, "default", overlay)
    assert decision == GateDecision("allow", "read_tool:lsp", {"path": "/etc/passwd"})


def test_read_sees_the_overlay_copy_after_a_write(overlay: Overlay, project: Path) -> None:
    written = overlay.redirect_write(str(project / "src" / "app.py"))
    decision = evaluate(
        "read_file", {"file_path": str(project / "src" / "app.py")}, "yolo", overlay
    )
    assert decision.action == "allow"
    assert Path(decision.args["file_path"]) == written


def test_read_tool_without_path_is_allowed_unchanged(overlay: Overlay) -> None:
    args = {"pattern": "TODO"}
    decision = evaluate("grep_search", args, ApprovalMode.DEFAULT, overlay)
    assert decision == GateDecision("allow", "read_tool:grep_search", {"pattern": "TODO"})
    assert decision.args is not args


# -- write tools -------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["edit", "write_file"])
@pytest.mark.parametrize("mode", AUTO_MODES)
def test_write_tools_redirected_in_auto_modes(
    tool: str, mode: ApprovalMode, overlay: Overlay, project: Path, tmp_path: Path
) -> None:
    args = {"file_path": str(project / "src" / "app.py"), "content": "x"}
    decision = evaluate(tool, args, mode, overlay)
    assert decision.action == "redirect"
    assert decision.reason == f"write_tool:{tool}"
    new_path = Path(decision.args["file_path"])
    assert new_path.is_relative_to(tmp_path / "overlay")
    assert new_path.read_text() == "print('hi')\n"  # copied up on first write
    assert decision.args["content"] == "x"
    # the caller's dict is untouched
    assert args["file_path"] == str(project / "src" / "app.py")


@pytest.mark.parametrize("tool", ["edit", "write_file"])
@pytest.mark.parametrize("mode", ASKING_MODES)
def test_write_tools_are_a_boundary_without_auto_edit(
    tool: str, mode: ApprovalMode, overlay: Overlay, project: Path
) -> None:
    args = {"file_path": str(project / "src" / "app.py")}
    decision = evaluate(tool, args, mode, overlay)
    assert decision.action == "boundary"
    assert decision.reason == BoundaryReason("write_tool_no_auto", tool)
    assert overlay.written_files() == {}


def test_approval_mode_given_as_string(overlay: Overlay, project: Path) -> None:
    args = {"file_path": str(project / "new.txt")}
    assert evaluate("write_file", args, "auto-edit", overlay).action == "redirect"
    assert evaluate("write_file", args, "plan", overlay).action == "boundary"
    bogus = evaluate("write_file", args, "whatever", overlay)
    assert bogus.action == "boundary"
    assert bogus.reason == BoundaryReason("write_tool_no_auto", "write_file")


def test_write_outside_root_is_a_boundary(overlay: Overlay, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.txt"
    decision = evaluate("write_file", {"file_path": str(outside)}, "yolo", overlay)
    assert decision.action == "boundary"
    assert decision.reason.text().startswith("path_rewrite_failed:write_file: ")
    assert not outside.exists()


def test_write_with_dotdot_escape_is_a_boundary(overlay: Overlay, project: Path) -> None:
    decision = evaluate("edit", {"file_path": "src/../../x.txt"}, "yolo", overlay)
    assert decision.action == "boundary"
    assert decision.reason.text().startswith("path_rewrite_failed:edit: ")


def test_write_without_path_is_a_boundary(overlay: Overlay) -> None:
    decision = evaluate("write_file", {"content": "x"}, "yolo", overlay)
    assert decision.action == "boundary"
    assert decision.reason == BoundaryReason("path_rewrite_failed", "write_file: no path argument")


def test_read_rewrite_failure_is_a_boundary(project: Path) -> None:
    class Broken:
        root = project

        def redirect_write(self, path: str) -> Path:
            raise AssertionError("not called")

        def resolve_read(self, path: str) -> Path:
            raise OSError("disk on fire")

    decision = evaluate("read_file", {"file_path": "a"}, "default", Broken())
    assert decision.action == "boundary"
    assert decision.reason == BoundaryReason("path_rewrite_failed", "read_file: disk on fire")


# -- declared path arguments -------------------------------------------------------------


class OddWriteArgs(ToolArgs, frozen=True):
    """A write tool whose path argument has a name no guess would take for a path."""

    destination: Annotated[str, PathArg("write")]
    body: str = ""


class OddReadArgs(ToolArgs, frozen=True):
    where: Annotated[str, PathArg("read")]


def _declared(args_type: type[ToolArgs]) -> Any:
    def paths(name: str) -> Mapping[str, PathArg]:
        return path_fields(args_type)

    return paths


def test_an_unusually_named_write_path_is_gated(overlay: Overlay, project: Path) -> None:
    odd = _declared(OddWriteArgs)
    decision = evaluate("write_file", {"destination": ".git/config"}, "yolo", overlay, paths=odd)
    assert (decision.action, decision.reason) == (
        "boundary", BoundaryReason("protected_path", ".git/config")
    )
    decision = evaluate("write_file", {"destination": "notes.md"}, "yolo", overlay, paths=odd)
    assert decision.action == "redirect"
    assert Path(decision.args["destination"]) == overlay.written_files()["notes.md"]
    decision = evaluate("write_file", {"file_path": "notes.md"}, "yolo", overlay, paths=odd)
    assert decision.reason == BoundaryReason("path_rewrite_failed", "write_file: no path argument")


def test_an_unusually_named_read_path_is_gated(overlay: Overlay, project: Path) -> None:
    odd = _declared(OddReadArgs)
    decision = evaluate("read_file", {"where": "/etc/passwd"}, "default", overlay, paths=odd)
    assert decision.reason == BoundaryReason("read_outside_project", "read_file")
    decision = evaluate("read_file", {"where": "src/app.py"}, "default", overlay, paths=odd)
    assert Path(decision.args["where"]) == project / "src" / "app.py"


class CopyArgs(ToolArgs, frozen=True):
    source: Annotated[str, PathArg("read")]
    destination: Annotated[str, PathArg("write")]


def test_a_write_tools_read_path_is_held_to_the_read_rule(
    overlay: Overlay, project: Path
) -> None:
    copy = _declared(CopyArgs)
    args = {"source": "/etc/passwd", "destination": "copy.txt"}
    decision = evaluate("write_file", args, "yolo", overlay, paths=copy)
    assert decision.reason == BoundaryReason("read_outside_project", "write_file")
    args = {"source": "src/app.py", "destination": "copy.txt"}
    decision = evaluate("write_file", args, "yolo", overlay, paths=copy)
    assert decision.action == "redirect"
    assert Path(decision.args["source"]) == project / "src" / "app.py"
    assert Path(decision.args["destination"]) == overlay.written_files()["copy.txt"]


def test_a_write_path_declared_by_a_read_tool_fails_closed(overlay: Overlay) -> None:
    odd = _declared(OddWriteArgs)
    decision = evaluate("read_file", {"destination": "a.txt"}, "yolo", overlay, paths=odd)
    assert decision.action == "boundary"
    assert isinstance(decision.reason, BoundaryReason) and decision.reason.code == "gate_error"
    assert decision.reason.detail.startswith("read_file:")
    assert overlay.written_files() == {}


@pytest.mark.parametrize("key", ["path", "filePath", "notebook_path", "target"])
def test_only_the_declared_path_is_a_path(key: str, overlay: Overlay, project: Path) -> None:
    args = {"file_path": str(project / "a.txt"), key: ".git/config", "content": "x"}
    decision = evaluate("write_file", args, "yolo", overlay)
    assert decision.action == "redirect"
    assert list(overlay.written_files()) == ["a.txt"]
    assert decision.args[key] == ".git/config"  # an argument write_file ignores, untouched


@pytest.mark.parametrize("value", [None, 7, ["a.txt"]])
def test_a_write_whose_path_is_not_a_string_is_a_boundary(
    value: Any, overlay: Overlay, project: Path
) -> None:
    args: dict[str, Any] = {"file_path": value, "path": str(project / "c.txt")}
    decision = evaluate("write_file", args, "yolo", overlay)
    assert decision.reason == BoundaryReason("path_rewrite_failed", "write_file: no path argument")
    assert overlay.written_files() == {}


# -- shell -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("command", ["git status", "ls -la | head", "cat < README.md"])
def test_read_only_shell_is_allowed(command: str, mode: ApprovalMode, overlay: Overlay) -> None:
    decision = evaluate("run_shell_command", {"command": command}, mode, overlay)
    assert decision == GateDecision("allow", "shell_read_only", {"command": command})


@pytest.mark.parametrize("mode", ALL_MODES)
def test_other_shell_is_a_boundary(mode: ApprovalMode, overlay: Overlay) -> None:
    command = "pytest -q tests/test_io.py && echo done > result.txt  # a long comment here"
    decision = evaluate("run_shell_command", {"command": command}, mode, overlay)
    assert decision.action == "boundary"
    assert decision.reason == BoundaryReason("shell", " ".join(command.split()))


def test_a_long_shell_reason_is_cut_between_words(overlay: Overlay) -> None:
    command = "git add " + " ".join(f"src/module_{i}.py" for i in range(40))
    decision = evaluate("run_shell_command", {"command": command}, "default", overlay)
    assert isinstance(decision.reason, BoundaryReason) and decision.reason.code == "shell"
    detail = decision.reason.detail
    assert detail.endswith(" …") and len(detail) <= 202
    kept = detail.removesuffix(" …").split(" ")
    assert kept == command.split(" ")[: len(kept)]  # whole words only


@pytest.mark.parametrize("args", [{}, {"command": ""}, {"command": "   \n"}, {"command": 3}])
def test_empty_shell_is_a_boundary(args: dict[str, Any], overlay: Overlay) -> None:
    decision = evaluate("run_shell_command", args, "yolo", overlay)
    assert decision.action == "boundary"
    assert decision.reason == BoundaryReason("shell", "empty")


def test_short_shell_reason_is_the_whole_command(overlay: Overlay) -> None:
    decision = evaluate("run_shell_command", {"command": "rm -rf x"}, "yolo", overlay)
    assert decision.reason == BoundaryReason("shell", "rm -rf x")


# -- denied and unknown ------------------------------------------------------------------------


@pytest.mark.parametrize("tool", sorted(DENIED_TOOLS))
@pytest.mark.parametrize("mode", ALL_MODES)
def test_denied_tools(tool: str, mode: ApprovalMode, overlay: Overlay) -> None:
    decision = evaluate(tool, {"x": 1}, mode, overlay)
    assert decision == GateDecision("boundary", BoundaryReason("denied_tool", tool), {"x": 1})


@pytest.mark.parametrize("tool", ["mcp__github__create_issue", "frobnicate", "", "READ_FILE"])
def test_unknown_tools(tool: str, overlay: Overlay) -> None:
    decision = evaluate(tool, {}, ApprovalMode.YOLO, overlay)
    assert decision.action == "boundary"
    assert decision.reason == BoundaryReason("unknown_tool", tool)


def test_gate_never_raises_on_odd_args(overlay: Overlay) -> None:
    decision = evaluate("read_file", None, "default", overlay)  # type: ignore[arg-type]
    assert decision.action == "allow"
    assert decision.args == {}


def test_real_overlay_satisfies_the_protocol(overlay: Overlay) -> None:
    typed: OverlayLike = overlay
    assert os.fspath(typed.resolve_read("src/app.py")).endswith("app.py")


# -- git reads with a hostile repository configuration (issue 13) -----------------------------


def _git_repo(project: Path) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(project)], check=True)


def test_read_only_git_is_a_boundary_when_the_repo_config_names_a_program(
    overlay: Overlay, project: Path
) -> None:
    _git_repo(project)
    assert evaluate("run_shell_command", {"command": "git status"}, "default", overlay).action == (
        "allow"
    )
    with (project / ".git" / "config").open("a") as config:
        config.write("[core]\n\tfsmonitor = touch /tmp/owned\n")
    decision = evaluate("run_shell_command", {"command": "git status"}, "default", overlay)
    assert decision.action == "boundary"
    assert isinstance(decision.reason, BoundaryReason) and decision.reason.code == "git_config"


def test_a_filter_in_the_speculations_own_gitattributes_is_seen(
    overlay: Overlay, project: Path
) -> None:
    _git_repo(project)
    # Written into the overlay directly (the gate itself refuses such a write).
    attributes = Path(overlay.overlay_dir) / ".gitattributes"
    attributes.parent.mkdir(parents=True, exist_ok=True)
    attributes.write_text("*.py filter=evil\n")
    decision = evaluate("run_shell_command", {"command": "git diff"}, "default", overlay)
    assert decision.action == "boundary"
    assert isinstance(decision.reason, BoundaryReason) and decision.reason.code == "git_config"


@pytest.mark.parametrize(
    "path",
    [".git/config", ".git/hooks/pre-commit", ".gitattributes", "sub/.gitattributes",
     ".gitmodules", ".specrun/settings.json", "vendor/lib/.git/config",
     # as a case-insensitive file system (WSL's Windows drives, SMB, FAT) opens them, and
     # Windows' trailing-dot and short-name spellings of the same entries
     ".GIT/hooks/pre-commit", ".Git/config", "sub/.GITATTRIBUTES", ".git./config",
     ".git /config", "GIT~1/config", ".SpecRun/settings.json", "SPECRU~1/settings.json"],
)
def test_protected_paths_are_boundaries(overlay: Overlay, path: str) -> None:
    decision = evaluate("write_file", {"file_path": path, "content": "x"}, "yolo", overlay)
    assert decision.action == "boundary"
    assert decision.reason == BoundaryReason("protected_path", path)


@pytest.mark.parametrize(
    ("path", "shown"),
    [("notes\x1b[2K\x1b[1A.md", "$'notes\\x1b[2K\\x1b[1A.md'"),  # control characters
     ("src/\u202etxt.py", "$'src/\\u202etxt.py'"),  # a bidi override
     ("a\u200b.py", "$'a\\u200b.py'"),  # zero width
     ("line\nbreak.py", "$'line\\nbreak.py'"),
     ("bad\x9b.py", "$'bad\\x9b.py'"),  # a C1 CSI
     ("odd\udcff.py", "$'odd\\udcff.py'")],  # an undecodable byte (surrogate escape)
)
@pytest.mark.parametrize("tool", ["write_file", "edit"])
def test_a_write_to_a_name_with_hidden_characters_is_bad_path(
    overlay: Overlay, tool: str, path: str, shown: str
) -> None:
    args = {"file_path": path, "content": "x", "old_string": "", "new_string": "x"}
    decision = evaluate(tool, args, "yolo", overlay)
    assert decision.action == "boundary"
    assert decision.reason == BoundaryReason("bad_path", shown)
    assert overlay.written_files() == {}


@pytest.mark.parametrize("path", ["my notes.md", "-rf.txt", "café.py", "it's.md", "ünï/ok.py"])
def test_odd_but_legal_names_may_be_written(overlay: Overlay, path: str) -> None:
    decision = evaluate("write_file", {"file_path": path, "content": "x"}, "yolo", overlay)
    assert decision.action == "redirect", decision.reason


def test_protected_paths_setting_and_links_into_git(overlay: Overlay, project: Path) -> None:
    (project / ".git").mkdir()
    (project / "cfg").symlink_to(project / ".git")
    decision = evaluate("edit", {"file_path": "cfg/config", "old_string": "", "new_string": "x"},
                        "yolo", overlay)
    assert decision.reason == BoundaryReason("protected_path", ".git/config")
    decision = evaluate("write_file", {"file_path": "deploy/prod.env", "content": "x"}, "yolo",
                        overlay, protected_paths=["deploy/*.env"])
    assert decision.reason == BoundaryReason("protected_path", "deploy/prod.env")


@pytest.mark.parametrize(
    ("path", "boundary"),
    [(".envrc", True), ("pkg/conftest.py", True), (".github/workflows/ci.yml", True),
     ("tools/gen.cfg", True), ("src/app.py", False)],
)
def test_with_runs_later_boundary_a_file_that_runs_later_stops_the_speculation(
    overlay: Overlay, path: str, boundary: bool
) -> None:
    args = {"file_path": path, "content": "x"}
    off = evaluate("write_file", args, "yolo", overlay)
    on = evaluate("write_file", args, "yolo", overlay, runs_later_paths=["tools/*.cfg"])
    assert off.action == "redirect"
    if boundary:
        assert (on.action, on.reason) == ("boundary", BoundaryReason("runs_later", path))
    else:
        assert on.action == "redirect"


@pytest.mark.parametrize(
    "args",
    [{"file_path": "/etc/passwd"}, {"path": "../.."}, {"file_path": "~/.ssh/id_rsa"}],
)
def test_reads_outside_the_project_are_boundaries(
    overlay: Overlay, args: dict[str, Any]
) -> None:
    name = "list_directory" if "path" in args else "read_file"
    decision = evaluate(name, args, "yolo", overlay)
    if args.get("file_path", "").startswith("~"):
        assert decision.action == "allow"  # a literal '~' directory inside the project
    else:
        assert decision.reason == BoundaryReason("read_outside_project", name)


def test_glob_patterns_may_not_climb_out(overlay: Overlay) -> None:
    decision = evaluate("glob", {"pattern": "../../**/*.pem"}, "yolo", overlay)
    assert decision.reason == BoundaryReason("read_outside_project", "glob")
