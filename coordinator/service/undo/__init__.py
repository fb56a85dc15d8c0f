"""Undo: checkpoints of the files each accept and main-chat turn writes, kept in specrun's
state directory, and ``specrun undo`` taking them back (docs/cli.md#undo).

Its seam: the hooks the accept and the main chat call (``Checkpoints``, ``Checkpoint``),
the start-up settling (``settle_undo``) and the command (``Rewinder``). It sits below the
speculation core and the chat, which call it; it sees them only through its own protocols
(``rewinder.RewindChat``, ``rewinder.RewindSuggestions``).
"""

from coordinator.service.undo.checkpoints import Checkpoints
from coordinator.service.undo.rewinder import Rewinder, settle_undo
from coordinator.service.undo.store import Checkpoint

__all__ = ["Checkpoint", "Checkpoints", "Rewinder", "settle_undo"]
