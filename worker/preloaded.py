"""Imported last by the fork server: give back to the system what the preload freed.

Importing the preloaded modules allocates and frees a lot on the C heap (reading and
unmarshalling code, building tables); glibc keeps the freed pages mapped, and every
worker and sandbox helper forked from here would start with them. ``malloc_trim`` returns
them (about 1.5 MB of the idle service's PSS, measured by ``scripts/bench.py --only idle``).
``gc.freeze()`` here was measured too and saved nothing at idle, so it is not done.
"""

import ctypes
import ctypes.util
import gc

gc.collect()
_libc = ctypes.util.find_library("c")
if _libc is not None:
    ctypes.CDLL(_libc).malloc_trim(0)
