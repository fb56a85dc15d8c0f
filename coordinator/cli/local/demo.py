"""``specrun demo``: a whole session to watch (the session itself: ``demo/run.py``)."""

from __future__ import annotations

import sys

import click

from coordinator.cli.context import CommandContext
from coordinator.cli.errors import friendly
from coordinator.cli.options import json_option


@click.command()
@click.option("--model", default=None, help="Model of a real endpoint (with --base-url).")
@click.option("--fast", "fast_model", default=None, help="Fast model of a real endpoint.")
@click.option("--base-url", default=None, help="Play the session against this endpoint.")
@click.option("--pace", type=click.FloatRange(0, 10), default=1.0, show_default=True,
              help="Typing and reading pauses (0: none, 2: twice as slow).")
@json_option
@click.pass_obj
@friendly
def demo(obj: CommandContext, model: str | None, fast_model: str | None, base_url: str | None,
         pace: float, as_json: bool) -> None:
    """Play a whole session in a throw-away copy of a sample project.

    On the embedded scripted model (no key, no network): fix a failing test, Tab
    through the predicted follow-ups, type something else and watch the speculation's
    worker die, then a table of time saved. Everything is removed at the end.

    \b
    Examples:
      specrun demo
      specrun demo --base-url http://127.0.0.1:8000/v1 --model qwen3-coder
    """
    from coordinator.cli.demo.run import DemoOptions, run_demo

    options = DemoOptions(model=model, fast_model=fast_model, base_url=base_url, pace=pace,
                          as_json=as_json, debug=obj.debug, verbose=obj.verbose)
    sys.exit(run_demo(options))
