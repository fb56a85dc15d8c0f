"""docs/cli.md's command tables are made from the commands themselves
(``coordinator/cli/command_table.py``): what the docs list is what runs."""

from __future__ import annotations

from coordinator.cli import command_table
from coordinator.commands import all_commands


def test_the_docs_command_tables_are_current() -> None:
    doc = command_table.DOC.read_text(encoding="utf-8")
    assert command_table.with_table(doc) == doc, (
        "docs/cli.md's command tables are stale: python -m coordinator.cli.command_table "
        "--write")


def test_every_command_and_request_is_in_the_tables() -> None:
    table = command_table.command_table()
    for command in all_commands():
        tag = command.request.__struct_config__.tag
        assert f"`{tag}` → " in table, command.name
        if command.cli:
            assert f"{command.name} " in table and command.summary in table, command.name
    for local in ("start", "stop", "logs", "chat", "web", "memory", "explain-shell"):
        assert f"`specrun {local} " in table, local
