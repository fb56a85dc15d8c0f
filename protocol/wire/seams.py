"""What a test may build into a worker that production never does.

Some proofs need a worker that differs from the real one: a speculation whose one probe
command skips the gate (to show that the kernel backstop stops it on its own), a sandbox
helper that takes every shell command for read-only (to show that the containment profile
holds whatever reaches it), a containment layer whose set-up fails (a machine without it).

These are constructor and start arguments, never anything read from the environment,
settings, files or the control socket: a user's shell, a cloned repository's ``.envrc`` or a
model cannot reach them. The pool hands them to a worker as an argument of its start (through
the fork server, beside its endpoint), the worker to its sandbox helper as it forks it. A
service gets them only from code that constructs it (``Service(..., worker_seams=...)``); the
``specrun`` commands never pass any, so production always runs with :data:`NO_SEAMS`.
"""

from __future__ import annotations

from dataclasses import dataclass

LAYER_NAMES = ("filesystem", "limits", "privileges", "landlock", "seccomp")
"""The layers whose set-up ``broken_layer`` can make fail, in the order they are set up."""


@dataclass(frozen=True, slots=True)
class WorkerSeams:
    """``ungated_command``: a speculation's ``run_shell_command`` with exactly this command
    skips the gate and runs with the worker's full shell. ``bypass_classifier``: every shell
    command counts as read-only, in the worker's gate and in its sandbox helper's own check.
    ``broken_layer``: that layer's set-up fails in every contained command, the way a missing
    kernel feature does, so nothing runs with less containment."""

    ungated_command: str | None = None
    bypass_classifier: bool = False
    broken_layer: str | None = None

    def __post_init__(self) -> None:
        if self.broken_layer is not None and self.broken_layer not in LAYER_NAMES:
            raise ValueError(
                f"broken_layer must be one of {', '.join(LAYER_NAMES)}, not {self.broken_layer!r}"
            )

    @property
    def any_set(self) -> bool:
        """Is anything here different from production?"""
        return self != NO_SEAMS

    def describe(self) -> str:
        """One line for a log, naming each seam that is set."""
        parts = []
        if self.ungated_command is not None:
            parts.append(f"ungated command {self.ungated_command!r}")
        if self.bypass_classifier:
            parts.append("classifier bypassed")
        if self.broken_layer is not None:
            parts.append(f"{self.broken_layer} layer broken")
        return ", ".join(parts) or "none"


NO_SEAMS = WorkerSeams()
"""Production's: the real gate, the real classifier, every layer as the machine has it."""
