"""Imported last by the fork server: what every worker should start with.

* The project's directory listing for the read-only git hazard check
  (:mod:`worker.shell.git_tree_scan`), when the pool named the project: a worker is forked
  with it, so its first git command lists only the directories changed since the fork server
  started instead of the whole tree (a fifth of a second at 200,000 files, each speculation).
  A tree that cannot be listed is left alone here: the check itself fails closed.
* The C heap's freed pages given back: importing the preloaded modules allocates and frees a
  lot (reading and unmarshalling code, building tables); glibc keeps the freed pages mapped,
  and every worker and sandbox helper forked from here would start with them.
  ``malloc_trim`` returns them (about 1.5 MB of the idle service's PSS, measured by
  ``scripts/bench.py --only idle``). ``gc.freeze()`` here was measured too and saved nothing
  at idle, so it is not done.
* msgspec's description of each message a worker and its sandbox helper decode or encode at
  start (the job union, the events, the helper's request and reply): msgspec builds it on a
  type's first codec and keeps it on the type, so built here it is shared by every worker
  instead of built again in each worker and helper (about 0.2 MB of each helper's memory).
"""

import contextlib
import gc
import os

import msgspec

from overlay.kernel import libc
from protocol.wire import codec
from protocol.wire.work import PROJECT_ROOT_ENV
from worker.contain.helper import Reply, Request
from worker.shell.git_tree_scan import git_entries

_project = os.environ.get(PROJECT_ROOT_ENV)
if _project:
    with contextlib.suppress(OSError):
        git_entries(_project)

codec.coordinator_to_worker()
codec.worker_to_coordinator()
msgspec.msgpack.Decoder(Request)
msgspec.msgpack.Decoder(Reply)

gc.collect()
libc.malloc_trim()
