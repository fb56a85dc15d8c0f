"""A service built by a test: ``python -P tests/seamed_service.py SEAMS_JSON --project P serve
[serve flags]``.

The test's stand-in for ``python -m coordinator --project P serve ...`` (see
``tests/seams.py``): the same ``serve``, with the workers' seams and the applies' checkpoint
given as arguments. ``start_daemon(entry=tests.seams.service_entry(...))`` starts it the way
``specrun start`` starts the real one."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # -P: no script dir

import click

from coordinator.cli.context import CommandContext
from coordinator.cli.errors import friendly
from coordinator.cli.local.serve import run_service
from coordinator.cli.options import flags_dict, serve_flags
from overlay.apply import set_process_checkpoint
from tests.seams import checkpoint_hook, decode


def main(seams_json: str, argv: list[str]) -> None:
    seams, checkpoint = decode(seams_json)
    if checkpoint:
        set_process_checkpoint(checkpoint_hook(checkpoint))

    @click.command()
    @click.option("--project", type=click.Path(path_type=Path), required=True)
    @click.argument("command", type=click.Choice(["serve"]))
    @serve_flags
    @friendly
    def seamed_serve(project: Path, command: str, **flags: Any) -> None:
        obj = CommandContext.from_options(project, debug=False)
        run_service(obj, flags_dict(**flags), worker_seams=seams)

    seamed_serve.main(argv, prog_name="seamed_service.py")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -P tests/seamed_service.py SEAMS_JSON --project P serve ...")
    main(sys.argv[1], sys.argv[2:])
