"""What the live view (`specrun web`) and `specrun status` read: the event hub and the state.

This package's names below are its seam: the rest of the service imports only these
(``tests/test_package_graph.py`` holds it).
"""

from coordinator.service.live.hub import LiveHub
from coordinator.service.live.state import LiveState

__all__ = ["LiveHub", "LiveState"]
