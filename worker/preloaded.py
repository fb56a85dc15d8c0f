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
"""

import contextlib
import gc
import os

from protocol.work import PROJECT_ROOT_ENV
from syscalls import libc
from worker.shell.git_tree_scan import git_entries

_project = os.environ.get(PROJECT_ROOT_ENV)
if _project:
    with contextlib.suppress(OSError):
        git_entries(_project)

gc.collect()
libc.malloc_trim()
