"""Why a speculation stopped before a step (design §5): a code and its detail.

The gate and the tools make one, the worker sends it in ``Boundary``, the coordinator
counts it by code and people read it in words (``coordinator/boundary_text.py``). It is
text only at the edges: :meth:`BoundaryReason.text` is the ``code:detail`` form that
scripts read in ``--json`` and that logs show.
"""

from __future__ import annotations

from typing import Literal, get_args

import msgspec

from protocol.text.inert_text import encodable

BoundaryCode = Literal[
    "shell",  # a shell command not proven read-only: the command
    "git_config",  # the repository's git configuration names a program git could run
    "write_tool_no_auto",  # a file write while edits need approval: the tool
    "denied_tool",  # a tool that never runs ahead of the user: the tool
    "unknown_tool",  # a tool specrun does not know: the tool
    "read_outside_project",  # a read aimed outside the project: the tool
    "read_private",  # a read of specrun's own state: the tool
    "protected_path",  # a write to a protected path: the path
    "runs_later",  # a write to a file that runs later without a key press: the path
    "bad_path",  # a file name a terminal would obey or hide: the name, quoted
    "path_rewrite_failed",  # the path could not be redirected into the overlay: tool: why
    "gate_error",  # the gate itself failed: tool: why
    "limit",  # a command (or the speculation's clock) hit a limit: which
    "quota",  # the overlay's quota ran out: overlay_bytes or overlay_files
    "toolchain_missing",  # a program outside the speculation's view: the program
    "sandbox_unavailable",  # a containment layer is missing here: the layer
    "refusal",  # the model refused the speculated prompt (no detail)
]
BOUNDARY_CODES: tuple[BoundaryCode, ...] = get_args(BoundaryCode)


class BoundaryReason(msgspec.Struct, frozen=True):
    code: BoundaryCode
    detail: str = ""

    def __post_init__(self) -> None:
        # The detail quotes the repository (a path, a .gitattributes line), whose bytes
        # need not be UTF-8: such a reason could not be sent, and the speculation failed.
        if self.detail:
            msgspec.structs.force_setattr(self, "detail", encodable(self.detail))

    def text(self) -> str:
        """``code:detail`` (the code alone without a detail), the form ``--json`` and the
        logs show."""
        return f"{self.code}:{self.detail}" if self.detail else self.code
