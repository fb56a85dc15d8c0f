"""``specrun sandbox``: the containment layers, or proving them live. Needs no service."""

from __future__ import annotations

import subprocess
import sys

import click

from coordinator.cli.options import json_option


@click.command("sandbox")
@click.option("--verify", is_flag=True,
              help="Attempt every escape inside the sandbox and report what held.")
@json_option
def sandbox(verify: bool, as_json: bool) -> None:
    """Show the layers of the sandbox that unapproved shell commands run in and the main
    chat's backstop, or with --verify prove them live: a probe tries each escape (project
    metadata, $HOME read and write, TCP, a specrun socket, a signal, CPU/file/process
    limits, capabilities, a git hook from a main-chat command) and one line per check
    says what was tried and what happened. Needs no service; exits 1
    if a layer is missing or leaks.

    \b
    Examples:
      specrun sandbox
      specrun sandbox --verify
    """
    args = [] if verify else ["--layers"]
    if as_json:
        args.append("--json")
    sys.exit(subprocess.call([sys.executable, "-P", "-m", "worker.contain.verify", *args]))
