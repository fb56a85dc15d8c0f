"""``specrun trust``: let what a project ships for specrun apply (or, ``--revoke``, not).

The question ``start`` and ``chat`` ask on a terminal is here too (``ask_trust``): one
place says what trusting a project means."""

from __future__ import annotations

import sys

import click

from coordinator.cli import render
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import friendly
from coordinator.cli.options import json_option
from protocol.text.inert_text import inert


@click.command()
@click.option("--revoke", is_flag=True, help="Stop trusting the project.")
@json_option
@click.pass_obj
@friendly
def trust(obj: CommandContext, revoke: bool, as_json: bool) -> None:
    """Trust this project: its .specrun/settings.json and project memory apply.

    Until then specrun applies nothing a project ships for it (a clone, a tarball, a
    checkout someone else owns): default settings and yours, no project memory. The
    decision is kept outside the project with a hash of those files; when they change,
    the project is untrusted again until you run this again. Non-interactive, for
    scripts.

    \b
    Examples:
      specrun trust
      specrun trust --revoke
    """
    from coordinator.legacy_state import adopt_legacy_state
    from coordinator.settings import project_trust
    from coordinator.trust import record_trust

    before = project_trust(obj.project)
    after = record_trust(obj.project, not revoke, _memory_dir(obj))
    moved = "" if revoke else adopt_legacy_state(obj.project, trusted=True)
    if as_json:
        render.print_json({"project": str(obj.project), "trusted": after.applies,
                           "state": after.state.value, "files": list(after.files),
                           "was": before.state.value})
        return
    if revoke:
        render.console.print(inert(f"{obj.project} is not trusted: specrun applies nothing it "
                                   "ships for specrun."), markup=False)
    else:
        shown = ", ".join(after.files) or "nothing for specrun yet"
        render.console.print(inert(f"{obj.project} is trusted with what it ships for specrun "
                                   f"({shown})."), markup=False)
    if moved:
        render.console.print(inert(moved), markup=False)


def _memory_dir(obj: CommandContext) -> str:
    from coordinator.settings import personal_memory_dir

    return personal_memory_dir(obj.project)


def ask_trust(obj: CommandContext) -> bool:
    """On a terminal, ask once whether to trust the project (the answer is recorded either
    way); True when it is trusted now. Off a terminal nothing is asked."""
    from coordinator.settings import project_trust
    from coordinator.trust import TrustState, record_trust

    trust_now = project_trust(obj.project)
    if trust_now.applies:
        return True
    if trust_now.state is TrustState.REVOKED or not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    shown = ", ".join(trust_now.files[:5]) + (" …" if len(trust_now.files) > 5 else "")
    render.console.print(inert(
        f"{obj.project} ships files for specrun ({shown}). Trusted, its settings apply (which "
        "tool calls run without a yes, where your code is sent) and its project memory goes "
        "to the model as your own notes."), markup=False)
    answer = click.confirm("Trust this project?", default=False)
    return record_trust(obj.project, answer, _memory_dir(obj)).applies
