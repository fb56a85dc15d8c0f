#!/usr/bin/env python3
"""What rendering a streaming reply as markdown costs the web view, against rendering the
whole reply again at every chunk (the obvious way, quadratic), in the same run.

A reply of N characters arrives in chunks of ``--chunk`` characters (the service gathers
streamed text for 50 ms; a fast model writes ~20-60 characters in that time). For each
size: the CPU seconds of the web process's work for the whole stream
(``StreamedReply.add`` per chunk and ``finish`` at the end) and the HTML bytes it sends
the page (each a page's own parsing work), beside the same for "render everything so far
at each chunk". Two texts: ordinary markdown (paragraphs, lists, code blocks), and one
code block the whole reply long (the open part never closes: the worst case).
The baseline is only run up to ``--baseline-max`` characters (it is the slow one).

Usage: scripts/bench_stream_markdown.py [--chunk N] [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from coordinator.web.markdown_view import markdown_html  # noqa: E402
from coordinator.web.streamed_reply import StreamedReply  # noqa: E402

SIZES = (8_000, 32_000, 128_000)

PARAGRAPH = (
    "The **fix** changes `add` in src/calc.py so that it returns the sum; the tests in "
    "tests/test_calc.py cover positive numbers and *now* negative ones too.\n\n"
    "- first point, with `code`\n- second point\n\n"
    "```python\ndef add(a, b):\n    return a + b\n```\n\n"
)


def ordinary(size: int) -> str:
    return (PARAGRAPH * (size // len(PARAGRAPH) + 1))[:size]


def one_code_block(size: int) -> str:
    line = "    value = compute(value, 42)  # a line of a long listing\n"
    return "```python\n" + (line * (size // len(line) + 1))[: size - 10]


def chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def streamed(pieces: list[str]) -> tuple[float, int]:
    started = time.process_time()
    reply, sent = StreamedReply(), 0
    for piece in pieces:
        step = reply.add(piece)
        sent += len(step.closed) + len(step.open or "")
    sent += len(reply.finish())
    return time.process_time() - started, sent


def whole_each_time(pieces: list[str]) -> tuple[float, int]:
    started = time.process_time()
    so_far, sent = "", 0
    for piece in pieces:
        so_far += piece
        sent += len(markdown_html(so_far))
    return time.process_time() - started, sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunk", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline-max", type=int, default=32_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for name, make in (("markdown", ordinary), ("one code block", one_code_block)):
        for size in SIZES:
            pieces = chunks(make(size), args.chunk)
            new, old = [], []
            for _ in range(args.rounds):  # alternating, on a shared machine
                new.append(streamed(pieces))
                if size <= args.baseline_max:
                    old.append(whole_each_time(pieces))
            row = {
                "text": name, "chars": size, "chunks": len(pieces),
                "streamed_s": statistics.median(t for t, _ in new),
                "streamed_sent": new[0][1],
                "whole_s": statistics.median(t for t, _ in old) if old else None,
                "whole_sent": old[0][1] if old else None,
            }
            rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"chunks of {args.chunk} chars; median CPU of {args.rounds}; "
          f"load {os.getloadavg()[0]:.1f}")
    head = (f"{'text':<15}{'chars':>8}{'chunks':>8}{'streamed s':>12}{'µs/char':>9}"
            f"{'sent KB':>9}{'whole s':>10}{'sent KB':>10}{'ratio':>8}")
    print(head)
    for r in rows:
        whole = "–" if r["whole_s"] is None else f"{r['whole_s']:.2f}"
        whole_sent = "–" if r["whole_sent"] is None else f"{r['whole_sent'] / 1000:.0f}"
        ratio = "–" if r["whole_s"] is None else f"{r['whole_s'] / r['streamed_s']:.0f}x"
        per_char = r["streamed_s"] / r["chars"] * 1e6
        print(f"{r['text']:<15}{r['chars']:>8}{r['chunks']:>8}{r['streamed_s']:>12.3f}"
              f"{per_char:>9.1f}{r['streamed_sent'] / 1000:>9.0f}{whole:>10}"
              f"{whole_sent:>10}{ratio:>8}")


if __name__ == "__main__":
    main()
