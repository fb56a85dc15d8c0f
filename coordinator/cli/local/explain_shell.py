"""``specrun explain-shell``: is this shell command read-only? Needs no service."""

from __future__ import annotations

import json
import subprocess
import sys

import click

from coordinator.cli import render
from coordinator.cli.errors import EXIT_ERROR, EXIT_OK
from coordinator.cli.options import json_option


@click.command("explain-shell")
@click.argument("command", required=False)
@click.option("--batch", is_flag=True,
              help="Read one JSON string per line from stdin; write one JSON verdict per line.")
@json_option
def explain_shell(command: str | None, batch: bool, as_json: bool) -> None:
    """Say whether a shell command is read-only (a speculation may run it), and which
    rule decided. Needs no service; exits 0 for either verdict.

    \b
    Examples:
      specrun explain-shell "git log --oneline | head"
      specrun explain-shell --json "sed -i s/a/b/ x.txt"
    """
    explain = [sys.executable, "-P", "-m", "worker.shell.explain"]
    if batch:
        sys.exit(subprocess.call([*explain, "--batch"]))
    if command is None:
        raise click.UsageError("give a COMMAND or --batch")
    if as_json:
        proc = subprocess.run([*explain, "--batch"], input=json.dumps(command) + "\n",
                              capture_output=True, text=True)
        if proc.returncode != 0 or not proc.stdout.strip():
            render.error(f"The shell classifier failed: {proc.stderr.strip()[-300:]}")
            sys.exit(EXIT_ERROR)
        sys.stdout.write(proc.stdout.strip().splitlines()[-1] + "\n")
        return
    code = subprocess.call([*explain, command])
    sys.exit(EXIT_OK if code in (0, 1) else EXIT_ERROR)
