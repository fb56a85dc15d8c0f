"""Shell commands in a speculation: read-only classification, explanation and safe running.

``classify`` is imported eagerly; the runner and the explainer load on first use (so that
``python -m worker.shell.explain`` runs cleanly and importing the classifier stays light).
The human explanation is ``explain_text`` here (``worker.shell.explain`` is the module; its
``explain`` function is the same as ``explain_text``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from worker.shell.classifier import ShellVerdict, classify

if TYPE_CHECKING:
    from worker.shell.explain import batch, explain_text
    from worker.shell.runner import (
        ShellNotReadOnlyError,
        ShellResult,
        run_read_only,
        run_shell,
    )

_LAZY = {
    "batch": "worker.shell.explain",
    "explain_text": "worker.shell.explain",
    "ShellNotReadOnlyError": "worker.shell.runner",
    "ShellResult": "worker.shell.runner",
    "run_read_only": "worker.shell.runner",
    "run_shell": "worker.shell.runner",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'worker.shell' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "ShellNotReadOnlyError",
    "ShellResult",
    "ShellVerdict",
    "batch",
    "classify",
    "explain_text",
    "run_read_only",
    "run_shell",
]
