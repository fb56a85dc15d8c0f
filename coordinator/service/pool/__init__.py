"""The warm pool of worker processes: the fork server, starting, routing and killing workers,
and the CPU a worker's process tree uses.

This package's names below are its seam: the rest of the service imports only these
(``tests/test_package_graph.py`` holds it).
"""

from coordinator.service.pool.cpu import lower_priority, tree_cpu_seconds, usable_cpus
from coordinator.service.pool.workers import (
    WORKER_MODULES,
    DeathHandler,
    EventHandler,
    WorkerHandle,
    WorkerPool,
    WorkerStartError,
)

__all__ = [
    "WORKER_MODULES",
    "DeathHandler",
    "EventHandler",
    "WorkerHandle",
    "WorkerPool",
    "WorkerStartError",
    "lower_priority",
    "tree_cpu_seconds",
    "usable_cpus",
]
