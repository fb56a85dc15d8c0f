"""A sandbox helper built by a test: ``python -P tests/seamed_helper.py SEAMS_JSON FD``.

The test's stand-in for ``python -m worker.contain.helper FD`` (see ``tests/seams.py``): the
same loop, given the seams as an argument."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # -P: no script dir

from tests.seams import decode
from worker.contain.helper import SANDBOX_DIR, serve
from worker.lifecycle import die_with_parent

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -P tests/seamed_helper.py SEAMS_JSON FD")
    seams, _ = decode(sys.argv[1])
    die_with_parent()
    serve(socket.socket(fileno=int(sys.argv[2])), f"{SANDBOX_DIR}-{os.getpid()}", seams)
