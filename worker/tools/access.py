"""Where a tool's paths lead: the real tree (main chat) or a speculation's overlay.

Tools never touch a path directly; they ask the access object. Every path argument may be
relative (to the project root) or absolute. Besides the read/write resolution, an access object
knows the *logical* place of a path (an overlay file maps back to its place in the project, so
output never shows overlay locations) and which files a speculation has written, so directory
listings and searches include them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from protocol.wire.boundary import BoundaryReason
from worker.tools.errors import ToolError, ToolStop
from worker.tools.reach import Reach

__all__ = ["DirectAccess", "FileAccess", "OverlayAccess", "OverlayLike"]


@runtime_checkable
class FileAccess(Protocol):
    root: Path
    """The project root (absolute, symlinks resolved)."""
    reach: Reach
    """The read rule (``worker.tools.reach``): every file a read tool opens or lists goes
    through it."""

    def resolve_read(self, path: str) -> Path:
        """The file to read for ``path``."""
        ...

    def resolve_write(self, path: str) -> Path:
        """The file to write for ``path``; raises ``ToolError`` when writing there is refused."""
        ...

    def logical_path(self, path: str) -> Path:
        """``path`` as an absolute path in the project's view of the tree (no symlinks resolved);
        a file inside the overlay maps back to the project path it stands for."""
        ...

    def overlay_files(self) -> Mapping[Path, Path]:
        """Logical path → file holding its speculative content, for every file written in this
        speculation (empty outside a speculation)."""
        ...

    def reserve(self, path: str, size: int) -> None:
        """Called before ``path`` is (re)written with ``size`` bytes; raises ``ToolStop``
        when that would take a speculation over its overlay quota."""
        ...


def _absolute(root: Path, path: str, alias: Path | None = None) -> Path:
    """``path`` made absolute against ``root`` and normalised lexically (``..`` collapsed).

    ``alias`` is the root as the caller spelled it when that differs from the resolved
    ``root`` (a root reached through a symlink): absolute paths under it are moved under
    ``root``, so both spellings name the same place in the project.
    """
    if not path:
        raise ToolError("Path is empty")
    if "\0" in path:
        raise ToolError("Path contains a NUL character")
    target = Path(os.path.normpath(os.path.join(root, path)))
    if alias is not None and target.is_relative_to(alias):
        target = root / target.relative_to(alias)
    return target


def _alias(given: Path | str, resolved: Path) -> Path | None:
    spelled = Path(os.path.abspath(given))
    return None if spelled == resolved else spelled


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


class DirectAccess:
    """The real tree, for the main chat's tool calls.

    Relative paths are taken against ``root``. With ``contained`` (a call the user has not
    approved) a read target outside the project or in specrun's own state (``private``:
    the memory directories besides ``.specrun``) stops the call (``ToolStop``: the user is
    asked); otherwise explicit reads may go anywhere. Searches and listings never follow a
    link out of the project either way. Writes must land inside ``root`` once ``..`` and
    symlinks are resolved, else a ``ToolError`` explains the refusal.
    """

    def __init__(
        self,
        root: Path | str,
        *,
        private: tuple[str, ...] = (),
        contained: bool = False,
    ) -> None:
        self.root = Path(root).resolve()
        self._alias = _alias(root, self.root)
        self.reach = Reach(self.root, private, anywhere=not contained)

    def __repr__(self) -> str:
        return f"DirectAccess({str(self.root)!r})"

    def resolve_read(self, path: str) -> Path:
        return _absolute(self.root, path, self._alias)

    def resolve_write(self, path: str) -> Path:
        target = _absolute(self.root, path, self._alias)
        real = Path(self.root, path).resolve()  # follows symlinks the way the kernel will
        if not _inside(real, self.root):
            via = "" if real == target else f" (it resolves to {real})"
            raise ToolError(
                f"Refusing to write {path}: it is outside the project root {self.root}{via}"
            )
        return real

    def logical_path(self, path: str) -> Path:
        return _absolute(self.root, path, self._alias)

    def overlay_files(self) -> Mapping[Path, Path]:
        return {}

    def reserve(self, path: str, size: int) -> None:
        return None


class OverlayLike(Protocol):
    """What :class:`OverlayAccess` uses of ``overlay.Overlay``."""

    @property
    def root(self) -> Path: ...

    def redirect_write(self, path: str) -> Path: ...

    def resolve_read(self, path: str) -> Path: ...

    def written_files(self) -> Mapping[str, Path]: ...


class OverlayAccess:
    """A speculation's view: reads see files written in this speculation, writes go to the
    overlay, the real tree is never written. Reads stay in the project and out of
    specrun's own state (``private``: the memory directories besides ``.specrun``).

    The tool gate may already have rewritten a path argument into the overlay; such a path
    (one of the overlay's written files) passes through unchanged in both directions. Writes
    outside the project root are refused by the overlay itself (its error message is what the
    model sees).
    """

    def __init__(
        self,
        overlay: OverlayLike,
        *,
        quota_bytes: int | None = None,
        quota_files: int | None = None,
        private: tuple[str, ...] = (),
    ) -> None:
        self.overlay = overlay
        self.root = Path(overlay.root).resolve()
        self._alias = _alias(overlay.root, self.root)
        self.reach = Reach(self.root, private)
        self.quota_bytes = quota_bytes
        self.quota_files = quota_files

    def __repr__(self) -> str:
        return f"OverlayAccess({self.overlay!r})"

    def _written(self) -> dict[Path, Path]:
        """Overlay file → logical path."""
        return {
            Path(os.path.normpath(phys)): Path(os.path.normpath(self.root / rel))
            for rel, phys in self.overlay.written_files().items()
        }

    def resolve_read(self, path: str) -> Path:
        target = _absolute(self.root, path, self._alias)
        if target in self._written():
            return target
        # A link inside the project may lead anywhere: a speculation reads only the project.
        self.reach.check("path", target)
        return Path(self.overlay.resolve_read(str(target)))

    def reserve(self, path: str, size: int) -> None:
        target = _absolute(self.root, path, self._alias)
        written = self._written()
        logical = written.get(target, target)
        others = [phys for phys, log in written.items() if log != logical]
        if self.quota_files is not None and len(others) + 1 > self.quota_files:
            raise ToolStop(
                BoundaryReason("quota", "overlay_files"),
                f"writing {path} would exceed the speculation's quota of {self.quota_files} files",
            )
        if self.quota_bytes is not None:
            used = sum(_size(phys) for phys in others)
            if used + size > self.quota_bytes:
                raise ToolStop(
                    BoundaryReason("quota", "overlay_bytes"),
                    f"writing {size:,} bytes to {path} would exceed the speculation's quota "
                    f"of {self.quota_bytes:,} bytes",
                )

    def resolve_write(self, path: str) -> Path:
        target = _absolute(self.root, path, self._alias)
        if target in self._written():
            return target
        return Path(self.overlay.redirect_write(str(target)))

    def logical_path(self, path: str) -> Path:
        target = _absolute(self.root, path, self._alias)
        return self._written().get(target, target)

    def overlay_files(self) -> Mapping[Path, Path]:
        return {logical: phys for phys, logical in self._written().items()}
