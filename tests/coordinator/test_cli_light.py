"""The light command lines (``coordinator/cli/light.py``): which ones run without click,
and that running them so is the same as running them through click.

The agreement is checked against the click commands themselves: the light path knows
each command's boolean flags; any other option of the command (one with a value, say)
sends the command line to click, and its default must be the body's default, since a
light run leaves it out."""

from __future__ import annotations

import inspect
from pathlib import Path

import click
import pytest

from coordinator.cli import service_requests
from coordinator.cli.app import COMMAND_FAMILIES, cli, import_family
from coordinator.cli.light import LIGHT_COMMANDS, LightCall, light_call


def _call(argv: list[str]) -> tuple[str, dict[str, bool], Path | None, bool] | None:
    found = light_call(argv)
    return None if found is None else (found.command, found.flags, found.project, found.debug)


def test_plain_light_command_lines_are_parsed(tmp_path: Path) -> None:
    assert _call(["status", "--json"]) == ("status", {"as_json": True}, None, False)
    assert _call(["status"]) == ("status", {"as_json": False}, None, False)
    assert _call(["--debug", "--project", str(tmp_path), "workers", "--json"]) == (
        "workers", {"as_json": True}, tmp_path, True)
    assert _call([f"--project={tmp_path}", "reject"]) == (
        "reject", {"as_json": False}, tmp_path, False)
    assert _call(["suggestion", "--settled", "--json", "--wait", "--wait"]) == (
        "suggestion", {"as_json": True, "wait": True, "settled": True}, None, False)
    assert _call(["--project", str(tmp_path / "not-yet"), "accept"]) == (
        "accept", {"as_json": False}, tmp_path / "not-yet", False)


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
    ["accept", "--index", "1"],
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


@pytest.mark.parametrize("name", sorted(LIGHT_COMMANDS))
def test_the_light_path_agrees_with_the_click_command(name: str) -> None:
    command = _command(name)
    assert not [p for p in command.params if isinstance(p, click.Argument)]
    light = {"--json": "as_json", **{flag: flag[2:] for flag in LIGHT_COMMANDS[name]}}
    absent = _parsed(command)
    for flag, param in light.items():
        assert absent[param] is False and _parsed(command, flag)[param] is True, flag
    body = inspect.signature(getattr(service_requests, name))
    assert list(body.parameters)[:2] == ["obj", "as_json"]
    assert set(light.values()) <= set(body.parameters)
    # What only click parses: a light run leaves it out, so the body's default must be
    # what click gives when it is absent.
    for param, value in absent.items():
        if param not in light.values():
            assert body.parameters[param].default == value, (name, param)


def test_every_command_is_found_in_its_family() -> None:
    for name, family in COMMAND_FAMILIES.items():
        module = import_family(family)
        assert _command(name) is getattr(module, name.replace("-", "_"))
    assert isinstance(light_call(["status"]), LightCall)


def test_every_command_module_is_a_family() -> None:
    """A new ``*_cmds.py`` must be listed in COMMAND_FAMILIES, or its commands never run."""
    here = Path(import_family("serve").__file__ or "").parent
    modules = {p.stem for p in here.glob("*_cmd*.py")} | {"serve"}
    assert modules == set(COMMAND_FAMILIES.values())
