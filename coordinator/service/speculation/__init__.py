"""The speculation core: suggest, speculate in a worker, accept or abort (design §5).

After a normal main turn the fast model predicts the next prompt; the speculation starts
on a warm worker at once (in parallel with the 300 ms display delay). Accept applies the
overlay (all-or-nothing, conflict-checked), then appends the speculated messages to the
main history; anything else kills the worker's process group and removes its overlay.
With ``speculationBranches`` N > 1 a suggestion holds up to N ranked branches, each with
its own speculation, worker and overlay.

One job per module: ``suggester`` (the prediction), ``scheduler`` (when a branch starts),
``runner`` and ``record`` (one speculation's run and its status), ``acceptor`` (apply, the
pending record, Tab-Tab), ``replies``; ``manager`` wires them for the service. What the
service and its commands use is named here.
"""

from coordinator.service.speculation.acceptor import AcceptCancelled, AcceptFallback, Debounced
from coordinator.service.speculation.manager import SpeculationManager
from coordinator.service.speculation.record import AbortCause, Speculation
from coordinator.service.speculation.suggestion import BranchRun, Suggestion

__all__ = [
    "AbortCause",
    "AcceptCancelled",
    "AcceptFallback",
    "BranchRun",
    "Debounced",
    "Speculation",
    "SpeculationManager",
    "Suggestion",
]
