"""The light command lines (``coordinator/cli/light.py``): which ones run without click,
and that running them so is the same as running them through click.

The agreement is checked against the click commands themselves, both made from the same
declaration (``coordinator/commands``): the light path knows each command's boolean
flags; any other option of the command (one with a value, say) sends the command line to
click, and a light run gives it the default click would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest

from coordinator.cli import local
from coordinator.cli.app import cli, command_names, local_names
from coordinator.cli.light import LightCall, light_call
from coordinator.commands import all_commands, find

LIGHT = sorted(c.name for c in all_commands()
               if c.cli and c.group is None and c.light_flags is not None)


def _call(argv: list[str]) -> tuple[str, dict[str, Any], Path | None, bool] | None:
    found = light_call(argv)
    return None if found is None else (found.command, found.flags, found.project, found.debug)


def test_plain_light_command_lines_are_parsed(tmp_path: Path) -> None:
    assert _call(["status", "--json"]) == ("status", {"as_json": True}, None, False)
    assert _call(["status"]) == ("status", {"as_json": False}, None, False)
    verbose = light_call(["--verbose", "status", "--json"])  # the group's own flag
    assert verbose is not None and verbose.verbose and verbose.command == "status"
    plain = light_call(["status"])
    assert plain is not None and not plain.verbose
    assert _call(["--debug", "--project", str(tmp_path), "workers", "--json"]) == (
        "workers", {"as_json": True}, tmp_path, True)
    assert _call([f"--project={tmp_path}", "reject"]) == (
        "reject", {"as_json": False}, tmp_path, False)
    assert _call(["suggestion", "--settled", "--json", "--wait", "--wait"]) == (
        "suggestion", {"as_json": True, "wait": True, "settled": True, "typed": None,
                       "transcript": False, "branch": 1, "full": False,
                       "retired_index": None}, None, False)
    assert _call(["--project", str(tmp_path / "not-yet"), "accept"]) == (
        "accept", {"as_json": False, "branch": None, "retired_index": None}, tmp_path / "not-yet",
        False)


@pytest.mark.parametrize("argv", [
    [],
    ["--debug"],
    ["--project"],
    ["--version"],
    ["-h"],
    ["status", "--help"],
    ["status", "-h"],
    ["status", "--bogus"],
    ["status", "extra"],
    ["status", "--json=1"],
    ["status", "--", "--json"],
    ["status", "--project", "."],  # the group's option after the command: click's error
    ["--project", "--debug", "status"],  # click takes "--debug" as the directory
    ["--project=", "status"],
    ["--bogus", "status"],
    ["accept", "--branch", "2"],
    ["accept", "--index", "1"],  # retired: click says what it is now
    ["suggestion", "--typed", "run"],
    ["ask", "hi"],
    ["start"],
    ["logs"],
    ["memory", "list"],
])
def test_anything_else_goes_to_click(argv: list[str]) -> None:
    assert light_call(argv) is None


def test_a_project_click_would_refuse_goes_to_click(tmp_path: Path) -> None:
    afile = tmp_path / "a-file"
    afile.write_text("")
    assert light_call(["--project", str(afile), "status"]) is None
    assert light_call(["--project", str(tmp_path), "status"]) is not None


def test_shell_completion_goes_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_SPECRUN_COMPLETE", "bash_complete")
    assert light_call(["status"]) is None


def _command(name: str) -> click.Command:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    return command


def _parsed(command: click.Command, *args: str) -> dict[str, object]:
    """The values click hands the command's body for ``args``."""
    parent = click.Context(cli)
    return command.make_context(command.name, list(args), parent=parent).params


def test_the_light_commands_are_the_declared_ones_without_an_argument() -> None:
    assert {"status", "workers", "suggestion", "accept", "reject", "stats", "reset", "diff",
            "compact"} <= set(LIGHT)
    assert "ask" not in LIGHT  # TEXT: click parses it
    assert light_call(["cancel"]) is None and light_call(["kill-worker"]) is None


@pytest.mark.parametrize("name", LIGHT)
def test_the_light_path_agrees_with_the_click_command(name: str) -> None:
    declared = find(name)
    assert declared is not None and declared.light_flags is not None
    command = _command(name)
    assert not [p for p in command.params if isinstance(p, click.Argument)]
    light = {"--json": "as_json", **declared.light_flags}
    absent = _parsed(command)
    for flag, param in light.items():
        assert absent[param] is False and _parsed(command, flag)[param] is True, flag
    # What only click parses: a light run leaves it out, so its default must be what
    # click gives when it is absent.
    found = light_call([name])
    assert found is not None and found.flags == absent


def test_every_command_is_found_by_its_name() -> None:
    names = command_names()
    assert {"status", "start", "stop", "logs", "debug", "serve", "explain-shell",
            "memory", "config", "web", "diff"} <= set(names)
    for name in names:
        assert _command(name).name == name
    for name in local_names():
        module = getattr(local, name.replace("-", "_"), None) or __import__(
            f"coordinator.cli.local.{name.replace('-', '_')}", fromlist=["x"])
        assert _command(name) is getattr(module, name.replace("-", "_"))
    assert isinstance(light_call(["status"]), LightCall)


@pytest.mark.parametrize("name", ["__init__", "_private", "declaration", "seam", "a.b", ""])
def test_a_module_that_is_no_command_is_no_command(name: str) -> None:
    assert cli.get_command(click.Context(cli), name) is None
    assert find(name) is None


def test_no_command_line_name_is_both_declared_and_the_cli_s_own() -> None:
    declared = {c.name for c in all_commands() if c.cli and c.group is None}
    assert declared.isdisjoint(local_names())
