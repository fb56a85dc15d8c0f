"""How a service started in the background tells its starter how far its start got.

``specrun start`` (``coordinator.cli.daemon``) opens a pipe, passes its write end's fd
number in the service's environment, and waits for these one-byte notes; the service
(``coordinator.service.service``) writes them. Defined here so that neither side imports
the other.
"""

from __future__ import annotations

READY_FD_ENV = "SPECRUN_READY_FD"
ANSWERING = b"a"  # the control socket answers
POOL_WARM = b"w"  # as many idle workers as the pool keeps warm
