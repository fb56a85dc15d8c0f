"""``specrun logs``: the service log, its last lines or followed."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import click

from coordinator.cli import render
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import CliError, friendly
from coordinator.cli.options import json_option
from protocol.text.inert_text import inert


@click.command()
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until Ctrl-C.")
@click.option("-n", "--lines", "count", type=click.IntRange(0), default=40, show_default=True,
              help="How many of the last lines to print first.")
@json_option
@click.pass_obj
@friendly
def logs(obj: CommandContext, follow: bool, count: int, as_json: bool) -> None:
    """Print the service log (in specrun's state directory, outside the project).

    \b
    Examples:
      specrun logs -n 100
      specrun logs -f
    """
    from coordinator.cli.daemon import log_path

    path = log_path(obj.project)
    if not path.exists():
        raise CliError(f"There is no service log at {path} yet.",
                       "It is written once the service runs: `specrun start`.")

    def emit(line: str) -> None:
        if as_json:
            render.print_json({"line": line})
        else:  # a log line may quote the model, a command or a file name
            sys.stdout.write(inert(line) + "\n")

    with open(path, "rb") as fh:
        for line in last_lines(fh, count):
            emit(line)
        sys.stdout.flush()
        if not follow:
            return
        pending = b""
        try:
            while True:
                chunk = fh.read()
                if not chunk:
                    if path.exists() and path.stat().st_size < fh.tell():
                        fh.seek(0)  # truncated or replaced: start over
                    time.sleep(0.2)
                    continue
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    emit(raw.decode("utf-8", "replace"))
                sys.stdout.flush()
        except KeyboardInterrupt:
            return


def last_lines(fh: Any, count: int) -> list[str]:
    """The last ``count`` lines; leaves ``fh`` at the end of the file."""
    fh.seek(0, os.SEEK_END)
    end = fh.tell()
    size, data = 0, b""
    while size < end and data.count(b"\n") <= count:
        size = min(end, max(4096, size * 2))
        fh.seek(end - size)
        data = fh.read(size)
    fh.seek(end)
    # Lines end at "\n" only, as --follow splits them: str.splitlines also breaks at
    # "\r", "\x1c"-"\x1e", U+0085 and U+2028, so a quoted model or file text holding one
    # would print as a separate line that looks like the log's own (inert shows it).
    lines = data.decode("utf-8", "replace").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines[-count:] if count else []
