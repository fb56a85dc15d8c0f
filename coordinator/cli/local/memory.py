"""``specrun memory``: the project's and your memories (what recall picks from)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from coordinator.cli import render
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import CliError, friendly
from coordinator.cli.options import json_option
from coordinator.state_dir import state_dir
from protocol.text.inert_text import inert, quote_name


@click.group()
def memory() -> None:
    """The project's and your memories (what recall picks from).

    \b
    Example:
      specrun memory add "pytest style" -d "tests use plain asserts" -t project
    """


def _memory_store(obj: CommandContext) -> Any:
    from coordinator.memory import MemoryStore

    return MemoryStore(obj.project, memory_dir=obj.settings().memory_dir or None)


def _memory_json(doc: Any, body: bool = False) -> dict[str, Any]:
    out = {"name": doc.name, "description": doc.description, "type": doc.type,
           "scope": doc.scope, "path": doc.path, "relative_path": doc.relative_path,
           "mtime": doc.mtime}
    if body:
        out["body"] = doc.body
    return out


@memory.command("list")
@click.option("--scope", type=click.Choice(["project", "user"]), default=None,
              help="Only this memory root.")
@json_option
@click.pass_obj
@friendly
def memory_list(obj: CommandContext, scope: str | None, as_json: bool) -> None:
    """List memories, newest first.

    \b
    Example:
      specrun memory list --json
    """
    store = _memory_store(obj)
    skipped: list[tuple[Path, str]] = []
    docs = store.scan(scope, skipped)
    if as_json:
        render.print_json({"project_dir": str(store.project_dir),
                           "user_dir": str(store.user_dir) if store.user_dir else None,
                           "memories": [_memory_json(d) for d in docs],
                           "skipped": [{"file": str(path), "why": why}
                                       for path, why in skipped]})
        return
    from rich.text import Text

    # Names, descriptions and file names come from memory files anyone may have written
    # (a cloned repository's): shown as text, controls escaped (render.cells).
    if not docs:
        render.console.print(Text(f"no memories (project: {inert(str(store.project_dir))})",
                                  style="bright_black"))
    else:
        from rich.table import Table

        table = Table(box=None, header_style="bold", pad_edge=False)
        for col in ("name", "type", "scope", "description", "file"):
            table.add_column(col, overflow="fold")
        for d in docs:
            table.add_row(*render.cells(d.name, d.type, d.scope, d.description),
                          Text(quote_name(d.relative_path)))
        render.console.print(table)
    for path, why in skipped:  # a file someone wrote, and recall ignores: say why
        render.console.print(Text.assemble(("not a memory", "yellow"),
                                           f" {quote_name(str(path))}: {inert(why)}"))


@memory.command("show")
@click.argument("name")
@json_option
@click.pass_obj
@friendly
def memory_show(obj: CommandContext, name: str, as_json: bool) -> None:
    """Print one memory, found by name, file name or path.

    \b
    Example:
      specrun memory show "pytest style"
    """
    from coordinator.memory import MemoryNotFound

    try:
        doc = _memory_store(obj).show_memory(name)
    except MemoryNotFound as exc:
        raise CliError(f"{str(exc)[:1].upper()}{str(exc)[1:]}.",
                       "`specrun memory list` shows what there is.") from None
    if as_json:
        render.print_json(_memory_json(doc, body=True))
        return
    from rich.text import Text

    render.console.print(Text.assemble(
        (inert(doc.name, multiline=False), "bold"),
        (f"  ({inert(doc.type)}, {doc.scope}; {quote_name(str(doc.path))})", "bright_black")))
    render.console.print(Text(inert(doc.description)))
    render.console.print()
    render.console.print(Text(inert(doc.body.strip())))


@memory.command("add")
@click.argument("name")
@click.option("-d", "--description", required=True, help="One line: when is it useful?")
@click.option("-t", "--type", "kind", type=click.Choice(["user", "feedback", "project",
                                                         "reference"]),
              default="project", show_default=True)
@click.option("--scope", type=click.Choice(["project", "user"]), default="project",
              show_default=True, help="The project's memory or yours (~/.specrun/memories).")
@click.option("-b", "--body", default=None, help="The memory's text (default: read stdin).")
@json_option
@click.pass_obj
@friendly
def memory_add(obj: CommandContext, name: str, description: str, kind: str, scope: str,
               body: str | None, as_json: bool) -> None:
    """Write a new memory file and list it in MEMORY.md.

    \b
    Example:
      echo "Run tests with python -m pytest -q" | \\
        specrun memory add "how to test" -d "the test command of this project" -t project
    """
    if body is None:
        if sys.stdin.isatty():
            raise click.UsageError("give the memory's text with --body or on stdin")
        body = sys.stdin.read()
    from coordinator.settings import personal_memory_dir, project_trust
    from coordinator.trust import after_own_write

    was = project_trust(obj.project)
    if scope == "project":
        state_dir(obj.project)
    try:
        doc = _memory_store(obj).add_memory(name, description, kind, body, scope=scope)
    except ValueError as exc:
        raise CliError(f"{str(exc)[:1].upper()}{str(exc)[1:]}.") from None
    finally:
        if scope == "project":  # your own memory keeps a trusted project trusted
            after_own_write(obj.project, was, personal_memory_dir(obj.project))
    if as_json:
        render.print_json(_memory_json(doc, body=True))
    else:
        from rich.text import Text

        render.console.print(Text.assemble(
            "added memory ", (inert(doc.name, multiline=False), "bold"),
            f": {quote_name(str(doc.path))}"))
