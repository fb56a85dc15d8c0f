"""Copy-on-write speculation overlays with an all-or-nothing, conflict-checked apply.

A pure library (stdlib + psutil). Typical use::

    ov = Overlay(project_root, overlay_dir_for(os.getpid(), speculation_id))
    path = ov.redirect_write("src/app.py")   # write the speculative content here
    ...
    ov.apply_to_real(journal_dir=journals)   # on accept: all files or none
    ov.cleanup()                             # always

At coordinator start: ``recover(project_root, journal_dir=journals)`` then ``sweep()``.
``journals`` is a directory of the caller's outside the project (specrun's state
directory): a journal is never written into the project, where a repository could ship one.
"""

from overlay.apply import ApplyResult, RecoveryResult, recover
from overlay.cow import Overlay, RecordEntry
from overlay.errors import (
    ApplyError,
    ConflictError,
    InvalidTargetError,
    OverlayError,
    OverlayEscapeError,
    RecoveryError,
)
from overlay.fingerprint import Fingerprint
from overlay.paths import (
    ForeignDirectoryError,
    check_private_dir,
    ensure_private_base,
    ensure_private_dir,
    make_private_dir,
    overlay_dir_for,
    speculation_base_dir,
)
from overlay.sweep import mark_owner, pid_alive, release_pid_dir, sweep

__all__ = [
    "ApplyError",
    "ApplyResult",
    "ConflictError",
    "Fingerprint",
    "ForeignDirectoryError",
    "InvalidTargetError",
    "Overlay",
    "OverlayError",
    "OverlayEscapeError",
    "RecordEntry",
    "RecoveryError",
    "RecoveryResult",
    "check_private_dir",
    "ensure_private_base",
    "ensure_private_dir",
    "make_private_dir",
    "mark_owner",
    "overlay_dir_for",
    "pid_alive",
    "recover",
    "release_pid_dir",
    "speculation_base_dir",
    "sweep",
]
