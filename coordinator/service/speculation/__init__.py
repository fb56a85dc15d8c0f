"""The speculation core: suggest, speculate in a worker, accept or abort (design §5).

After a normal main turn the fast model predicts the next prompt; the speculation starts
on a warm worker at once (in parallel with the 300 ms display delay). Accept applies the
overlay (all-or-nothing, conflict-checked), then appends the speculated messages to the
main history; anything else kills the worker's process group and removes its overlay.
With ``speculationBranches`` N > 1 a suggestion holds up to N ranked branches, each with
its own speculation, worker and overlay.

One job per module: ``prediction`` (the predicted next prompt), ``suggestion`` (the
suggestion and which one is shown), ``scheduler`` (when a branch starts), ``runner`` and
``record`` (one speculation's run and its status), ``acceptor`` (apply, the pending record,
Tab-Tab), ``replies``, ``stats`` and ``cost`` (what it cost, the budget); ``context`` is
what those parts share, ``manager`` wires them for the service.

This package's names below are its seam: the rest of the service imports only these
(``tests/test_package_graph.py`` holds it).
"""

from coordinator.service.speculation.acceptor import AcceptCancelled, AcceptFallback, Debounced
from coordinator.service.speculation.context import ForkSource
from coordinator.service.speculation.cost import Budget, CostLedger
from coordinator.service.speculation.manager import SpeculationManager
from coordinator.service.speculation.pending_accept import settle_pending
from coordinator.service.speculation.preview import Progress, preview_files
from coordinator.service.speculation.record import AbortCause, Speculation
from coordinator.service.speculation.runner import SpeculationWorkers
from coordinator.service.speculation.suggestion import BranchRun, Suggestion
from coordinator.service.speculation.transcript import render_transcript

__all__ = [
    "AbortCause",
    "AcceptCancelled",
    "AcceptFallback",
    "BranchRun",
    "Budget",
    "CostLedger",
    "Debounced",
    "ForkSource",
    "Progress",
    "Speculation",
    "SpeculationManager",
    "SpeculationWorkers",
    "Suggestion",
    "preview_files",
    "render_transcript",
    "settle_pending",
]
