"""The service side: one process per project (``specrun serve``), owning the control
socket, the worker pool, the main chat and the speculations. Nothing here imports the
client side (``coordinator.cli``)."""

import sys

# ``multiprocess`` pickles with dill when it can import it, and with the standard pickle
# otherwise. The pool hands a worker a module-level function and plain values, which the
# standard pickle carries; dill and the twenty modules it loads (``multiprocessing`` among
# them) would be 1.3 MB of every idle service, shared by none of its other processes'
# needs (``scripts/bench.py --only idle``). Before anything here imports ``multiprocess``.
sys.modules.setdefault("dill", None)  # type: ignore[arg-type]
