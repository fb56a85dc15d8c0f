#!/usr/bin/env python3
"""Argument decoding per tool call: the typed structs against the hand-written checker they
replaced.

Usage: .venv/bin/python scripts/bench_tool_args.py [--repeat N]

For a set of realistic calls (every tool; stringly numbers and booleans; a 4 KB edit; a
refused call), times ``worker.tools.args.decode_arguments`` (one msgspec decode into the
tool's struct) and the old path (``json.loads``, then a walk of the schema coercing each
value, kept below as the baseline), and prints the median time of each call both ways, the
median over the calls and their ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from worker.tools import TOOLS, ToolError, get_tool
from worker.tools.args import decode_arguments

_EDIT_TEXT = "    return value  # a line of code\n" * 120

CALLS: list[tuple[str, str]] = [
    ("read_file", json.dumps({"file_path": "src/app.py"})),
    ("read_file", json.dumps({"file_path": "src/app.py", "offset": 120, "limit": 80})),
    ("read_file", json.dumps({"file_path": "src/app.py", "offset": "120", "limit": "80"})),
    ("write_file", json.dumps({"file_path": "notes/todo.md", "content": "- [ ] x\n" * 40})),
    (
        "edit",
        json.dumps(
            {"file_path": "src/app.py", "old_string": _EDIT_TEXT, "new_string": _EDIT_TEXT + "#"}
        ),
    ),
    (
        "edit",
        json.dumps(
            {"file_path": "a.py", "old_string": "x", "new_string": "y", "replace_all": "true"}
        ),
    ),
    ("grep_search", json.dumps({"pattern": r"def \w+_handler", "include": "*.py"})),
    ("glob", json.dumps({"pattern": "src/**/*.ts", "path": "frontend"})),
    ("list_directory", "{}"),
    ("run_shell_command", json.dumps({"command": "git status", "timeout": "30"})),
    ("read_file", json.dumps({"file_path": "a", "limit": "ten"})),  # refused
]


# --- the baseline: the checker the typed arguments replaced -----------------------------------


def _coerce(value: Any, kind: str) -> Any:
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "integer" and not isinstance(value, bool):
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value.strip())
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
    raise ValueError


def old_check(name: str, parameters: Mapping[str, Any], text: str) -> dict[str, Any]:
    try:
        args = json.loads(text or "{}")
    except ValueError as exc:
        raise ToolError(f"Invalid arguments for {name}: not valid JSON ({exc})") from None
    if not isinstance(args, dict):
        raise ToolError(f"Invalid arguments for {name}: expected a JSON object")
    out: dict[str, Any] = {}
    for key, schema in parameters["properties"].items():
        value = args.get(key)
        if value is None:
            if key in parameters["required"]:
                raise ToolError(f"Invalid arguments for {name}: '{key}' is required")
            continue
        try:
            value = _coerce(value, schema.get("type", "string"))
        except ValueError:
            raise ToolError(f"Invalid arguments for {name}: '{key}' has the wrong type") from None
        minimum = schema.get("minimum")
        if minimum is not None and value < minimum:
            raise ToolError(f"Invalid arguments for {name}: '{key}' must be at least {minimum}")
        out[key] = value
    return out


# --- timing -----------------------------------------------------------------------------------


def _time(fn: Callable[[], object], repeat: int) -> list[float]:
    """Seconds per call of ``fn``, one sample per batch of 50 calls."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(50):
            with contextlib.suppress(ToolError):
                fn()
        samples.append((time.perf_counter() - start) / 50)
    return samples


def measure(repeat: int) -> list[tuple[str, float, float]]:
    """(call, new µs, old µs): the median per call of each of :data:`CALLS`."""
    rows = []
    for name, text in CALLS:
        tool = get_tool(name)
        assert tool is not None
        args_type, parameters = tool.args, tool.spec.parameters
        new = _time(lambda: decode_arguments(name, text, args_type), repeat)  # noqa: B023
        old = _time(lambda: old_check(name, parameters, text), repeat)  # noqa: B023
        label = f"{name} {text[:48]}" + ("…" if len(text) > 48 else "")
        rows.append((label, statistics.median(new) * 1e6, statistics.median(old) * 1e6))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200, help="batches per call")
    args = parser.parse_args(argv)
    assert {name for name, _ in CALLS} == {tool.name for tool in TOOLS}
    rows = measure(args.repeat)
    print(f"{'call':<66} {'new µs':>8} {'old µs':>8}")
    for label, new, old in rows:
        print(f"{label:<66} {new:8.2f} {old:8.2f}")
    new_all = statistics.median(row[1] for row in rows)
    old_all = statistics.median(row[2] for row in rows)
    print(f"{'median over the calls':<66} {new_all:8.2f} {old_all:8.2f}")
    print(f"ratio new/old {new_all / old_all:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
