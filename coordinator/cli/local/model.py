"""``specrun model serve``: the embedded scripted model as an endpoint of its own."""

from __future__ import annotations

from pathlib import Path

import click

from coordinator.cli.errors import friendly


@click.group()
def model() -> None:
    """The embedded scripted model."""


@model.command("serve")
@click.option("--scenario", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Scenario file (YAML or JSON).")
@click.option("--port", type=int, default=0, show_default=True, help="0: any free port.")
@click.option("--request-log", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Append every request as a JSON line to this file.")
@friendly
def model_serve(scenario: Path, port: int, request_log: Path | None) -> None:
    """Serve a scenario as an OpenAI-compatible endpoint until Ctrl-C.

    \b
    Example:
      specrun model serve --scenario coordinator/scenarios/demo.yaml --port 8000
    """
    from coordinator.scripted_model import serve_forever

    try:
        serve_forever(scenario, port, request_log)
    except KeyboardInterrupt:
        return
