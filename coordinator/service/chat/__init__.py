"""The main chat: a person's prompt through the model and tools, its history, compaction
and approvals.

This package's names below are its seam: the rest of the service imports only these
(``tests/test_package_graph.py`` holds it).
"""

from coordinator.service.chat.main_chat import MainChat, TurnResult
from coordinator.service.chat.model_wait import ModelWait

__all__ = ["MainChat", "ModelWait", "TurnResult"]
