"""``python -m coordinator.scripted_model --scenario FILE --port N [--request-log FILE]``"""

from __future__ import annotations

import argparse
import sys

from coordinator.scripted_model.scenario import DEMO_SCENARIO, ScenarioError
from coordinator.scripted_model.server import serve_forever


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coordinator.scripted_model",
        description="Serve a scripted, OpenAI-compatible model on 127.0.0.1 "
        "(prints the base URL first, stops on Ctrl-C or SIGTERM).",
    )
    parser.add_argument(
        "--scenario", default=str(DEMO_SCENARIO), help="scenario file (YAML or JSON)"
    )
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free)")
    parser.add_argument("--request-log", default=None, help="append every request here (JSONL)")
    args = parser.parse_args(argv)
    try:
        serve_forever(args.scenario, args.port, args.request_log)
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"error: cannot listen on 127.0.0.1:{args.port} ({exc.strerror or exc}); "
            "try another --port.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
