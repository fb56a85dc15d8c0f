"""The approval question: may this tool call run?

``ask`` and ``chat`` put it to the person at the terminal; the demo's scripted person
answers it and the demo prints the question as the prompt would have shown it.

Four answers: yes once; yes, and keep it for the session (this exact command, or this
file tool: ``ApprovalNeeded.rememberable``); no; no with a reason, which the model reads
with the refusal.
"""

from __future__ import annotations

import shutil

import click

from coordinator.cli.turns import Decision
from protocol.text.inert_text import inert
from protocol.wire.control import ApprovalNeeded
from protocol.wire.display import format_args

__all__ = ["Decision", "answered", "ask_person", "choices", "question"]

def question(reply: ApprovalNeeded) -> str:
    """``Allow run_shell_command(command: ...)? (why it needs a yes)``, on one line with
    every control character visible and every argument whole: the model wrote the call,
    and a question whose shown text differs from the call (a command cut after 80
    characters, a second line shown as a space) would get a yes for something else."""
    shown = format_args(reply.call, limit=None)
    return inert(f"Allow {reply.call.name}({shown})? ({reply.reason})", multiline=False)


def choices(reply: ApprovalNeeded, width: int | None = None) -> str:
    """The answers on offer, in plain words: on one line when it fits the terminal's
    ``width`` (default: the terminal's), else the yeses and the noes on a line each, so
    that an 80-column terminal never breaks a word of them."""
    keep = ""
    if reply.rememberable:
        what = ("this command" if reply.call.name == "run_shell_command"
                else inert(reply.call.name, multiline=False))
        keep = f" · a: yes, and allow {what} for this session"
    yes, no = f"  y: yes, once{keep}", "  n: no · r: no, and tell the model why"
    if width is None:
        width = shutil.get_terminal_size().columns
    one_line = f"{yes} · {no.lstrip()}"
    return one_line if len(one_line) < width else f"{yes}\n{no}"


def _keys(reply: ApprovalNeeded) -> str:
    return "y/a/n/r" if reply.rememberable else "y/n/r"


def prompt_text(reply: ApprovalNeeded) -> str:
    return f"{question(reply)}\n{choices(reply)}\n  [{_keys(reply)}]"


_ANSWERS = {"y": "yes", "yes": "yes", "a": "always", "always": "always", "n": "no",
            "no": "no", "": "no", "r": "reason"}


def ask_person(reply: ApprovalNeeded) -> Decision:
    """Ask at the terminal; no unless the person says yes."""
    try:
        while True:
            typed = click.prompt(prompt_text(reply), default="", show_default=False)
            answer = _ANSWERS.get(str(typed).strip().lower())
            if answer == "always" and not reply.rememberable:
                answer = None
            if answer is not None:
                break
            click.echo(f"  Type one of {_keys(reply)} (Enter alone is no).")
        if answer == "reason":
            why = click.prompt("  Why not? (the model reads this)", default="",
                               show_default=False)
            return Decision(False, reason=str(why).strip())
        return Decision(answer in ("yes", "always"), remember=answer == "always")
    except click.Abort:
        # click turns Ctrl-C (and end of input) at a prompt into Abort; the turn must be
        # cancelled like a Ctrl-C anywhere else, or the service waits for the answer.
        raise KeyboardInterrupt from None


def answered(reply: ApprovalNeeded, yes: bool) -> str:
    """The prompt's lines once answered, as ``ask_person`` shows them."""
    return f"{prompt_text(reply)}: {'y' if yes else 'n'}"
