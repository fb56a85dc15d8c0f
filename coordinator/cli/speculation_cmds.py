"""The predicted next prompt and its speculation: suggestion, accept (Tab), reject, stats."""

from __future__ import annotations

import click

from coordinator.cli import service_requests
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import friendly
from coordinator.cli.options import json_option


@click.command()
@click.option("--wait", is_flag=True, help="Wait until a suggestion is visible (or none comes).")
@click.option("--settled", is_flag=True,
              help="Also wait until its speculation stopped running (up to 60 s), so that "
                   "accept applies it.")
@click.option("--typed", metavar="TEXT",
              help="First say that TEXT is typed so far at the prompt: alternatives it "
                   "still leads to keep their speculation, the others are killed.")
@click.option("--transcript", is_flag=True,
              help="Also show the speculation so far: the model's text, its tool calls "
                   "and their results (of the alternative --index N).")
@click.option("--index", "index", type=click.IntRange(min=0), default=0, metavar="N",
              help="With --transcript: the alternative of this rank (default 0, the top).")
@click.option("--full", is_flag=True,
              help="The transcript (--transcript) with each tool result whole, as the "
                   "model got it (within the command's output limit), not cut to 500 "
                   "characters.")
@json_option
@click.pass_obj
@friendly
def suggestion(obj: CommandContext, wait: bool, settled: bool, typed: str | None,
               transcript: bool, index: int, full: bool, as_json: bool) -> None:
    """Show the predicted next prompt and its speculation's status.

    With `speculationBranches` above 1, the ranked alternatives follow the top one,
    each with its speculation and the `--index` that `specrun accept` takes.

    \b
    Example:
      specrun suggestion --wait --json
    """
    service_requests.suggestion(obj, as_json, wait=wait, settled=settled, typed=typed,
                                transcript=transcript or full, index=index, full=full)


@click.command()
@click.option("--index", "index", type=click.IntRange(min=0), default=None, metavar="N",
              help="The alternative of this rank (see `specrun suggestion`). Default: the "
                   "best-ranked one still live.")
@click.option("--stat", is_flag=True, help="One line per file with its counts, no diff.")
@json_option
@click.pass_obj
@friendly
def diff(obj: CommandContext, index: int | None, stat: bool, as_json: bool) -> None:
    """Show what Tab would do now: each file created, modified, deleted or changed in
    mode, with its diff against the project.

    Computed by the service exactly as accept computes its listing. Files that run later
    without a key press are flagged, files git ignores are summed up, and a file you
    changed since the speculation read it is named (Tab would refuse). A running
    speculation shows what it wrote so far.

    \b
    Example:
      specrun diff
      specrun diff --stat --index 1
    """
    service_requests.diff(obj, as_json, index=index, stat=stat)


@click.command()
@click.option("--index", "index", type=click.IntRange(min=0), default=None,
              metavar="N",
              help="Take the alternative of this rank (see `specrun suggestion`); the "
                   "others' speculations are killed. Default: the best-ranked one still "
                   "live.")
@json_option
@click.pass_obj
@friendly
def accept(obj: CommandContext, index: int | None, as_json: bool) -> None:
    """Accept the current suggestion (Tab): apply its speculation at once.

    A speculation that is still running or stopped at a boundary is aborted and the
    suggestion runs as a normal turn instead.

    \b
    Example:
      specrun accept
      specrun accept --index 1
    """
    service_requests.accept(obj, as_json, index=index)


@click.command()
@json_option
@click.pass_obj
@friendly
def reject(obj: CommandContext, as_json: bool) -> None:
    """Dismiss the current suggestion and kill its speculation.

    \b
    Example:
      specrun reject
    """
    service_requests.reject(obj, as_json)


@click.command()
@json_option
@click.pass_obj
@friendly
def stats(obj: CommandContext, as_json: bool) -> None:
    """Suggestions shown/accepted/ignored/suppressed, speculation outcomes, time saved.

    \b
    Example:
      specrun stats --json
    """
    service_requests.stats(obj, as_json)
