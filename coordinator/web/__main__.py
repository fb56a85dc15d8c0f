"""`python -m coordinator.web --project P [--port N] [--background] [--verbose]`: the web
view process (``--verbose``: the page shows internals, as ``specrun --verbose``).

It prints its URL as its first line. ``--background`` (what `specrun start --web` runs):
after that line its output goes to the web log, and it ends with the service."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from coordinator.web.link import NoService
from coordinator.web.run import PortInUse, serve


def main() -> int:
    parser = argparse.ArgumentParser(prog="specrun-web")
    parser.add_argument("--project", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--background", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    def announce(url: str) -> None:
        print(url, flush=True)
        if args.background:  # the starter reads one line and goes; nothing more to say
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.close(devnull)

    try:
        if asyncio.run(serve(args.project.resolve(), args.port, announce, args.verbose)):
            log = logging.getLogger("specrun.web")
            log.info("the service stopped; so did this web view")
    except (NoService, PortInUse) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, NoService) else 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
