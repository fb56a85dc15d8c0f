"""Approval modes shared by the main chat, the tool gate and the wire."""

from __future__ import annotations

import enum


class ApprovalMode(enum.StrEnum):
    """How much the agent may do without asking the user first.

    ``default``: writes and non-read-only shell commands need the user's yes.
    ``plan``: no writes at all.
    ``auto-edit``: file edits run without asking; other shell commands still ask.
    ``yolo``: everything runs without asking.
    """

    DEFAULT = "default"
    PLAN = "plan"
    AUTO_EDIT = "auto-edit"
    YOLO = "yolo"

    @property
    def allows_unconfirmed_edits(self) -> bool:
        return self in (ApprovalMode.AUTO_EDIT, ApprovalMode.YOLO)
