"""How an overlayfs upper layer marks what a command removed.

A deleted name is a whiteout: a 0/0 character device, or (for an unprivileged mount with
``userxattr``) an empty regular file carrying the whiteout extended attribute. A directory
removed and made again is opaque: it carries the opaque attribute set to ``y``. The
sandbox session reads these to carry an upper layer into the next command's layer, and
capture reads them to turn an upper layer into a speculation's changes.
"""

from __future__ import annotations

import os
import stat

WHITEOUT_XATTRS = ("user.overlay.whiteout", "trusted.overlay.whiteout")
OPAQUE_XATTRS = ("user.overlay.opaque", "trusted.overlay.opaque")


def xattr(path: str, names: tuple[str, ...]) -> bytes | None:
    """The value of the first of ``names`` set on ``path`` (not followed if a link)."""
    for name in names:
        try:
            return os.getxattr(path, name, follow_symlinks=False)
        except OSError:
            continue
    return None


def is_opaque(path: str) -> bool:
    return xattr(path, OPAQUE_XATTRS) == b"y"


def is_whiteout(path: str, info: os.stat_result) -> bool:
    if stat.S_ISCHR(info.st_mode):
        return info.st_rdev == 0
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_size == 0
        and xattr(path, WHITEOUT_XATTRS) is not None
    )
