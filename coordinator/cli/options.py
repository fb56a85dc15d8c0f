"""Options that several commands share: ``--json``, and the service's flags (``serve``,
``start``, ``chat``) with their settings keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from protocol.wire.approval import ApprovalMode

F = TypeVar("F", bound=Callable[..., Any])

JSON_HELP = "Print JSON for scripts (schema: docs/cli.md)."
json_option = click.option("--json", "as_json", is_flag=True, help=JSON_HELP)

APPROVAL_MODES = click.Choice([m.value for m in ApprovalMode])


def serve_flags(func: F) -> F:
    for option in reversed(
        [
            click.option("--model", default=None, help="Main model name."),
            click.option("--fast", "fast_model", default=None,
                         help="Fast model for suggestions, speculation and recall."),
            click.option("--base-url", default=None,
                         help="OpenAI-compatible endpoint (default: embedded scripted model)."),
            click.option("--approval-mode", type=APPROVAL_MODES, default=None,
                         help="Which tool calls need a yes."),
            click.option("--workers", "worker_pool", type=click.IntRange(0, 64), default=None,
                         help="Warm pool size."),
            click.option("--scenario", default=None,
                         help="Scenario file for the embedded scripted model."),
        ]
    ):
        func = option(func)
    return func


_FLAG_KEYS = {"model": "model", "fast_model": "fastModel", "base_url": "baseUrl",
              "approval_mode": "approvalMode", "worker_pool": "workerPool", "scenario": "scenario"}


def flags_dict(**kw: Any) -> dict[str, Any]:
    """``serve_flags`` values as settings keys (unset flags left out)."""
    return {_FLAG_KEYS[k]: v for k, v in kw.items() if k in _FLAG_KEYS and v is not None}


def flags_argv(flags: dict[str, Any]) -> list[str]:
    """Settings keys back as ``serve`` flags, for the background service's command line."""
    from coordinator.settings import FLAG_NAMES

    argv: list[str] = []
    for key, value in flags.items():
        argv += [FLAG_NAMES[key], str(value)]
    return argv
