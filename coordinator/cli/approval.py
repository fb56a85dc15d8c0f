"""The approval question: may this tool call run?

``ask`` and ``chat`` put it to the person at the terminal; the demo's scripted person
answers it and the demo prints the question as the prompt would have shown it.
"""

from __future__ import annotations

import click

from protocol.text.inert_text import inert
from protocol.wire.control import ApprovalNeeded
from protocol.wire.display import format_args


def question(reply: ApprovalNeeded) -> str:
    """``Allow run_shell_command(command=...)? (why it needs a yes)``, on one line with
    every control character visible and every argument whole: the model wrote the call,
    and a question whose shown text differs from the call (a command cut after 80
    characters, a second line shown as a space) would get a yes for something else."""
    shown = format_args(reply.call, limit=None)
    return inert(f"Allow {reply.call.name}({shown})? ({reply.reason})", multiline=False)


def ask_person(reply: ApprovalNeeded) -> bool:
    """Ask at the terminal; no unless the person says yes."""
    try:
        return click.confirm(question(reply), default=False)
    except click.Abort:
        # click turns Ctrl-C (and end of input) at a prompt into Abort; the turn must be
        # cancelled like a Ctrl-C anywhere else, or the service waits for the answer.
        raise KeyboardInterrupt from None


def answered(reply: ApprovalNeeded, yes: bool) -> str:
    """The prompt's line once answered, as ``ask_person`` shows it (``default=False``
    makes click offer ``[y/N]``)."""
    return f"{question(reply)} [y/N]: {'y' if yes else 'n'}"
