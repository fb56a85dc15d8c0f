"""Where overlays live, and how a tool's path maps to a file inside the project root."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from overlay.errors import InvalidTargetError, OverlayError, OverlayEscapeError

StrPath = str | os.PathLike[str]

BASE_DIR_NAME = "specrun-speculation"
PRIVATE_MODE = 0o700
#: Relative (posix) path of the apply journal directory inside a project root.
JOURNAL_REL = ".specrun/journal"
#: Longest file name (in bytes) of the common Linux file systems.
NAME_MAX = 255


def speculation_base_dir() -> Path:
    """``<tempfile.gettempdir()>/specrun-speculation-<uid>``: this user's private parent of
    every per-pid directory (see ``ensure_private_base``)."""
    return Path(tempfile.gettempdir()) / f"{BASE_DIR_NAME}-{os.geteuid()}"


class ForeignDirectoryError(OverlayError):
    """A directory specrun would use is not a private directory of this user."""


def check_private_dir(path: StrPath) -> None:
    """Refuse ``path`` unless it is a real directory (not a symlink), owned by this user,
    that no other user may enter or write."""
    try:
        info = os.lstat(path)
    except FileNotFoundError as exc:
        raise ForeignDirectoryError(f"{os.fspath(path)} does not exist.") from exc
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ForeignDirectoryError(
            f"{os.fspath(path)} is not a plain directory: specrun will not use it."
        )
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise ForeignDirectoryError(
            f"{os.fspath(path)} is not private to this user (owner uid {info.st_uid}, mode "
            f"{stat.S_IMODE(info.st_mode):o}): specrun will not use it; remove it or fix its "
            "owner and mode 700."
        )


def ensure_private_base(base: StrPath | None = None) -> Path:
    """Create (mode 700) or check the speculation base. Raises ``ForeignDirectoryError``
    when it exists but is not ours and private: it is then never used, written or
    deleted."""
    path = Path(base) if base is not None else speculation_base_dir()
    try:
        os.mkdir(path, PRIVATE_MODE)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(path.parent, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, PRIVATE_MODE)
    check_private_dir(path)
    return path


def ensure_private_dir(path: StrPath) -> Path:
    """``path`` as a private directory of ours: created (mode 700) if missing, checked if
    present (two processes of one worker may both want its per-pid directory)."""
    target = Path(path)
    check_private_dir(target.parent)
    with contextlib.suppress(FileExistsError):
        os.mkdir(target, PRIVATE_MODE)
    check_private_dir(target)
    return target


def make_private_dir(path: StrPath, *, replace_stale: bool = False) -> Path:
    """Create ``path`` exclusively (mode 700) inside a checked private parent. With
    ``replace_stale``, a leftover of ours under the same name (a per-pid directory of a
    dead process whose pid we now have) is removed first, never followed."""
    target = Path(path)
    check_private_dir(target.parent)
    try:
        os.mkdir(target, PRIVATE_MODE)
    except FileExistsError:
        if not replace_stale:
            raise
        check_private_dir(target)
        shutil.rmtree(target)
        os.mkdir(target, PRIVATE_MODE)
    return target


def overlay_dir_for(pid: int, speculation_id: str, base_dir: StrPath | None = None) -> Path:
    """``<base>/<pid>/<speculation id>/`` (not created here; an Overlay creates it lazily)."""
    if type(pid) is not int or pid <= 0:
        raise OverlayError(f"Invalid worker pid {pid!r}: it must be a positive integer.")
    sid = str(speculation_id)
    if not sid or sid in (".", "..") or "/" in sid or os.sep in sid or "\x00" in sid:
        raise OverlayError(
            f"Invalid speculation id {sid!r}: it must be a single non-empty path component."
        )
    base = Path(base_dir) if base_dir is not None else speculation_base_dir()
    return base / str(pid) / sid


def real_root(root: StrPath) -> str:
    """The fully resolved project root; it must be an existing directory."""
    resolved = os.path.realpath(os.fspath(root))
    if not os.path.isdir(resolved):
        raise OverlayError(f"The project root {os.fspath(root)} is not an existing directory.")
    return resolved


def is_inside(path: str, root: str) -> bool:
    """True if the resolved ``path`` is ``root`` itself or below it (both already resolved)."""
    if path == root:
        return True
    prefix = root if root.endswith(os.sep) else root + os.sep
    return path.startswith(prefix)


def _as_text(path: StrPath) -> str:
    raw = os.fspath(path)
    if isinstance(raw, bytes):  # pragma: no cover - typed callers pass str
        raw = os.fsdecode(raw)
    return raw


def to_relative(real: str, root: str) -> str:
    """Relative posix path of an already resolved ``real`` path strictly inside ``root``."""
    rel = os.path.relpath(real, root)
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


def resolve_target(root: str, path: StrPath) -> tuple[str, str]:
    """Map a write target to ``(absolute real path, relative posix path)`` inside ``root``.

    ``root`` must come from :func:`real_root`. Relative paths are taken against ``root``.
    ``..`` and symlinks are resolved first, so a symlink inside the project that points
    outside is outside. Raises OverlayEscapeError for targets outside the root and
    InvalidTargetError for targets that cannot be a regular file (the root, a directory, a
    path below a file, a special file, the journal directory).
    """
    raw = _as_text(path)
    shown = raw if raw else "''"
    if not raw:
        raise InvalidTargetError(shown, "the path is empty")
    if "\x00" in raw:
        raise InvalidTargetError(repr(raw), "the path contains a NUL character")
    try:
        os.fsencode(raw)
    except UnicodeError:
        raise InvalidTargetError(
            repr(raw), "the path cannot be encoded for the file system"
        ) from None
    real = os.path.realpath(os.path.join(root, raw))
    if not is_inside(real, root):
        raise OverlayEscapeError(shown, root)
    if real == root:
        raise InvalidTargetError(shown, "it is the project root, not a file")
    if raw.endswith(("/", os.sep)):
        raise InvalidTargetError(shown, "it names a directory, not a file")
    rel = to_relative(real, root)
    if any(len(part) > NAME_MAX for part in os.fsencode(rel).split(b"/")):
        raise InvalidTargetError(shown, f"a name in it is longer than {NAME_MAX} bytes")
    if rel == JOURNAL_REL or rel.startswith(JOURNAL_REL + "/"):
        raise InvalidTargetError(shown, "it is inside specrun's apply journal directory")
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        pass
    except NotADirectoryError:
        raise InvalidTargetError(shown, "a parent of it is a file, not a directory") from None
    except OSError as exc:
        raise InvalidTargetError(shown, f"it cannot be inspected ({exc.strerror})") from None
    else:
        if stat.S_ISDIR(st.st_mode):
            raise InvalidTargetError(shown, "it is a directory, not a file")
        if stat.S_ISLNK(st.st_mode):
            raise InvalidTargetError(shown, "it is a symlink that cannot be resolved")
        if not stat.S_ISREG(st.st_mode):
            raise InvalidTargetError(shown, "it is not a regular file")
        return real, rel
    _check_parents(root, real, shown)
    return real, rel


def _check_parents(root: str, real: str, shown: str) -> None:
    """The nearest existing ancestor of a missing target must be a real directory."""
    parent = os.path.dirname(real)
    while parent != root and is_inside(parent, root):
        try:
            st = os.lstat(parent)
        except FileNotFoundError:
            parent = os.path.dirname(parent)
            continue
        except OSError as exc:
            reason = f"its parent cannot be inspected ({exc.strerror})"
            raise InvalidTargetError(shown, reason) from None
        if not stat.S_ISDIR(st.st_mode):
            raise InvalidTargetError(shown, "a parent of it is not a directory")
        return


def resolve_relative(root: str, path: StrPath) -> str | None:
    """Relative posix path of ``path`` if it resolves strictly inside ``root``, else None."""
    try:
        raw = _as_text(path)
        if not raw or "\x00" in raw:
            return None
        real = os.path.realpath(os.path.join(root, raw))
    except (OSError, ValueError):
        return None
    if real == root or not is_inside(real, root):
        return None
    return to_relative(real, root)
