"""Importing this before httpx keeps httpx's command-line client from loading.

``httpx._main`` imports click, rich and pygments when they are installed: about 30 ms of
every process that loads httpx (the service, the fork server). specrun never runs it. A
``None`` entry in ``sys.modules`` makes its import fail, and httpx then defines a stand-in
``main`` itself (its own ``except ImportError`` path).
"""

import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
