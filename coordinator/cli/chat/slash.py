"""Slash commands in `specrun chat`: a line that starts with ``/`` is a command to the
chat, never a prompt for the model (``//`` sends a line that starts with one ``/``).

Most of them are the `specrun` command of the same job run in this process, so the chat
shows exactly what that command shows (``/diff`` is `specrun diff`, ``/stats`` is
`specrun stats`); ``/mode`` changes the running service's approval mode, ``/web`` starts
the web view in the background and prints its address, ``/quit`` leaves.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import click
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from coordinator.cli import render
from coordinator.cli.client import ServiceClient, ServiceNotRunning, ServiceTimeout
from protocol.text.inert_text import inert
from protocol.wire.approval import ApprovalMode
from protocol.wire.control import (
    ApprovalModeRequest,
    ErrorReply,
    OkReply,
    StatusReply,
    StatusRequest,
)

ESCAPE = "//"  # a line that starts with it is sent, as text starting with one "/"


@dataclass
class SlashContext:
    """What a slash command works with: the project, the chat's client, the `specrun`
    command group (given by the chat command: importing it here would be a cycle), and
    the address of the web view this chat started (one per chat)."""

    project: Path
    client: ServiceClient
    cli: click.Group
    web_url: str | None = None
    verbose: bool = False  # `specrun --verbose chat`: its commands show internals too


@dataclass(frozen=True)
class SlashCommand:
    name: str
    usage: str  # its arguments, as `/help` shows them
    help: str
    run: Callable[[SlashContext, list[str]], bool]  # True: leave the chat
    choices: tuple[str, ...] = field(default=())  # what its argument completes to


def is_command(line: str) -> bool:
    """A line for the chat itself: it starts with ``/`` but not with ``//``."""
    text = line.lstrip()
    return text.startswith("/") and not text.startswith(ESCAPE)


def as_prompt(line: str) -> str:
    """The text a line sends to the model: ``//x`` sends ``/x``."""
    text = line.strip()
    return text[1:] if text.startswith(ESCAPE) else text


def run_cli(ctx: SlashContext, *args: str) -> int:
    """The `specrun` command ``args`` run in this process, printing what it prints; its
    exit code (never raises for a failure of the command: it said why)."""
    try:
        verbose = ["--verbose"] if ctx.verbose else []
        ctx.cli.main(["--project", str(ctx.project), *verbose, *args], prog_name="specrun",
                     standalone_mode=False)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    except click.ClickException as exc:  # a usage error: its own sentence
        render.error(exc.format_message())
        return 2
    return 0


def _delegate(*command: str) -> Callable[[SlashContext, list[str]], bool]:
    def run(ctx: SlashContext, args: list[str]) -> bool:
        run_cli(ctx, *command, *args)
        return False

    return run


def _help(ctx: SlashContext, args: list[str]) -> bool:
    from rich.table import Table

    table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
    for command in COMMANDS.values():
        table.add_row(f"/{command.name} {command.usage}".rstrip(), command.help)
    render.console.print(table)
    render.console.print(
        "[bright_black]Tab completes a command. A line starting with // is sent as text "
        "starting with /. Keys: Tab/→ take the grey suggestion, Ctrl-O previews it, "
        "Ctrl-C aborts a turn, Ctrl-D leaves.[/]"
    )
    return False


def _mode(ctx: SlashContext, args: list[str]) -> bool:
    modes = [m.value for m in ApprovalMode]
    if not args:
        reply = ctx.client.call(StatusRequest)
        now = reply.approval_mode.value if isinstance(reply, StatusReply) else "unknown"
        render.console.print(f"Approval mode: {now} (one of {', '.join(modes)}; "
                             "/mode NAME changes it).", highlight=False)
        return False
    if len(args) != 1 or args[0] not in modes:
        shown = inert(" ".join(args), multiline=False)
        render.error(f"/mode takes one of {', '.join(modes)}, not {shown!r}.")
        return False
    said = set_approval_mode(ctx.client, ApprovalMode(args[0]))
    render.console.print(said, highlight=False)
    return False


def set_approval_mode(client: ServiceClient, mode: ApprovalMode) -> str:
    """Change the running service's approval mode; the sentence saying what changed."""
    reply = client.request(ApprovalModeRequest(req_id=client.next_id(), mode=mode))
    if isinstance(reply, OkReply):
        return reply.message or f"Approval mode {mode.value}."
    if isinstance(reply, ErrorReply):
        return reply.message
    return "The service did not say whether it changed the approval mode."


def _web(ctx: SlashContext, args: list[str]) -> bool:
    from coordinator.cli.errors import CliError
    from coordinator.cli.web_cmds import start_background_view

    if ctx.web_url is None:
        try:
            ctx.web_url = start_background_view(ctx.project, 0, verbose=ctx.verbose)
        except CliError as exc:
            render.error(str(exc))
            return False
    render.console.print("The web view of this session (it ends with the service):",
                         highlight=False)
    print(ctx.web_url, flush=True)
    return False


def _quit(ctx: SlashContext, args: list[str]) -> bool:
    return True


COMMANDS: dict[str, SlashCommand] = {c.name: c for c in (
    SlashCommand("help", "", "this list", _help),
    SlashCommand("diff", "", "what Tab would change now, file by file, with the diff",
                 _delegate("diff")),
    SlashCommand("undo", "[N]", "take back the last change specrun made (or rewind to "
                 "before turn N)", _delegate("undo")),
    SlashCommand("stats", "", "suggestions taken, time saved, tokens spent",
                 _delegate("stats")),
    SlashCommand("compact", "", "summarize the chat so far into one message",
                 _delegate("compact")),
    SlashCommand("mode", "[MODE]", "show or change the approval mode", _mode,
                 tuple(m.value for m in ApprovalMode)),
    SlashCommand("branches", "", "the ranked guesses for the next prompt and their state",
                 _delegate("suggestion")),
    SlashCommand("web", "", "open the live web view in the background; prints its address",
                 _web),
    SlashCommand("status", "", "the service, its model, workers and containment",
                 _delegate("status")),
    SlashCommand("trust", "", "whether specrun trusts this project's settings",
                 _delegate("trust")),
    SlashCommand("quit", "", "leave the chat (the service keeps running)", _quit),
)}


def run_slash(ctx: SlashContext, line: str) -> bool:
    """Run the slash command on ``line``; True when the chat should end. A line that is
    not a known command says so in one sentence; nothing goes to the model."""
    try:
        words = shlex.split(line.strip()[1:])
    except ValueError as exc:
        render.error(f"Could not read that command: {exc}.")
        return False
    if not words:
        return _help(ctx, [])
    name, args = words[0].lower(), words[1:]
    command = COMMANDS.get(name)
    if command is None:
        shown = inert(name, multiline=False)
        render.error(f"/{shown} is not a chat command; /help lists them (// sends a line "
                     "starting with / to the model).")
        return False
    try:
        return command.run(ctx, args)
    except (ServiceNotRunning, ServiceTimeout) as exc:
        render.error(str(exc))
        return False


class SlashCompleter(Completer):
    """Completes a command's name after ``/``, and its argument where it has choices."""

    def get_completions(self, document: Document,
                        complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not is_command(text) or "\n" in text:
            return
        body = text.lstrip()[1:]
        if " " not in body:
            for command in COMMANDS.values():
                if command.name.startswith(body.lower()):
                    yield Completion(command.name, start_position=-len(body),
                                     display=f"/{command.name}", display_meta=command.help)
            return
        name, _, arg = body.partition(" ")
        named = COMMANDS.get(name.lower())
        if named is None or " " in arg.strip():
            return
        for choice in named.choices:
            if choice.startswith(arg.strip()):
                yield Completion(choice, start_position=-len(arg.lstrip()))
