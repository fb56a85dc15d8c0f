"""undo: take back the files of the last accept or turn, or rewind to before turn N."""

from __future__ import annotations

import sys
import time

import click

from coordinator.cli.client import FOREVER
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import fail_on_error, friendly
from coordinator.cli.options import json_option
from protocol.text.inert_text import inert
from protocol.wire.control import CheckpointInfo, UndoFile, UndoReply, UndoRequest

VERBS = {
    "restore": "restored",
    "remove": "removed",
    "recreate": "recreated",
    "kept": "kept",
    "already": "already as before",
}
PREVIEW = {
    "restore": "restores",
    "remove": "removes",
    "recreate": "recreates",
    "kept": "keeps",
    "already": "already as before",
}


@click.command()
@click.argument("turn", type=click.IntRange(min=1), required=False, metavar="[N]")
@click.option("--list", "list_only", is_flag=True,
              help="List this session's checkpoints and what undoing each would do now.")
@click.option("--conversation", is_flag=True,
              help="Also rewind the conversation to before that turn (the rest stays on "
                   "disk in the old session).")
@click.option("--force", is_flag=True,
              help="Undo the files that can be, leaving the ones you changed since as "
                   "they are (without it, such a file means nothing is undone).")
@json_option
@click.pass_obj
@friendly
def undo(obj: CommandContext, turn: int | None, list_only: bool, conversation: bool,
         force: bool, as_json: bool) -> None:
    """Take back the files of the last accept or turn that wrote any; with N, of every
    one from turn N on.

    Every accept, and every main-chat turn whose tools wrote files, is a checkpoint:
    the content and mode each file had before, kept outside the project (never in git).
    A file you changed since is never overwritten: undo names it and changes nothing
    (or, with --force, undoes the others). Files written by shell commands you approved
    are not checkpointed.

    \b
    Example:
      specrun undo --list
      specrun undo
      specrun undo 2 --conversation
    """
    run_undo(obj, as_json, turn=turn, list_only=list_only, conversation=conversation,
             force=force)


def run_undo(obj: CommandContext, as_json: bool, *, turn: int | None = None,
             list_only: bool = False, conversation: bool = False, force: bool = False) -> None:
    """One ``UndoRequest``; the reply printed. Exits 1 when nothing was undone because
    a file changed since."""
    with obj.client() as client:
        request = UndoRequest(req_id=client.next_id(), turn=turn, list_only=list_only,
                              conversation=conversation, force=force)
        # As long as the service lives: an undo waits for a running turn to end first.
        reply = client.request(request, timeout_s=FOREVER)
    fail_on_error(reply, as_json)
    assert isinstance(reply, UndoReply), reply
    if as_json:
        from coordinator.cli.render import print_json

        print_json(reply)
    else:
        click.echo(undo_text(reply))
    if not list_only and not reply.undone:
        sys.exit(1)


def undo_text(reply: UndoReply) -> str:
    """The reply for a person (the chat's ``/undo`` prints the same)."""
    if not reply.message:  # a listing
        if not reply.checkpoints:
            return "Nothing to undo: no accept or turn of this session wrote files."
        return _listing(reply)
    lines = [inert(reply.message)]
    lines += [_file_line(f, VERBS if reply.undone else PREVIEW) for f in reply.files]
    return "\n".join(lines)


def _listing(reply: UndoReply) -> str:
    lines = ["turn  kind    when      prompt"]
    for checkpoint in reply.checkpoints:
        lines.append(_checkpoint_line(checkpoint))
        lines += ["      " + _file_line(f, PREVIEW) for f in checkpoint.files]
    lines.append(f"`specrun undo` takes back turn {reply.checkpoints[-1].turn}; "
                 "`specrun undo N` every turn from N on. "
                 f"Earlier contents kept: {_size(reply.store_bytes)}.")
    return "\n".join(lines)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1024 * 1024:
        return f"{count / 1024:,.1f} KiB"
    return f"{count / (1024 * 1024):,.1f} MiB"


def _checkpoint_line(checkpoint: CheckpointInfo) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(checkpoint.created))
    prompt = inert(checkpoint.prompt).replace("\n", " ")
    if len(prompt) > 50:
        prompt = prompt[:49] + "…"
    return f"{checkpoint.turn:>4}  {checkpoint.kind:<6}  {when}  {prompt}"


def _file_line(entry: UndoFile, verbs: dict[str, str]) -> str:
    why = f" ({inert(entry.why)})" if entry.why else ""
    return f"  {verbs[entry.action]:<9} {inert(entry.path)}{why}"
