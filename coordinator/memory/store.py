"""The memory store: topic files with YAML front matter plus a ``MEMORY.md`` index.

Layout (the same one qwen uses, so an existing qwen memory directory can be pointed at)::

    <root>/MEMORY.md            index, always part of the system prompt (cut to a budget)
    <root>/**/<topic>.md        ---
                                name: ...
                                description: ...
                                type: user | feedback | project | reference
                                ---
                                body

Two roots: the project's (``<project>/.specrun/memory/`` unless ``memory_dir`` says otherwise)
and the user's (``<home>/.specrun/memories/``). A file without valid front matter is not a
memory: it is skipped with a debug log line saying why, and scanning never raises.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast, get_args

import frontmatter
import yaml
from frontmatter.default_handlers import YAMLHandler

from coordinator.durable import fsync_dir, write_temp

log = logging.getLogger(__name__)

MemoryType = Literal["user", "feedback", "project", "reference"]
MemoryScope = Literal["project", "user"]
MEMORY_TYPES: frozenset[str] = frozenset(get_args(MemoryType))
MEMORY_SCOPES: frozenset[str] = frozenset(get_args(MemoryScope))

INDEX_FILE = "MEMORY.md"
INDEX_MAX_LINES = 200
INDEX_MAX_CHARS = 25_000
#: Topic files larger than this are not memories (and are not read into RAM).
MAX_TOPIC_BYTES = 1 << 20

_YAML = YAMLHandler()


class MemoryNotFound(LookupError):
    """``show_memory`` found no memory (or more than one) for the given name or path."""


@dataclass(frozen=True, slots=True)
class MemoryDoc:
    """One topic file with valid front matter."""

    path: str  # absolute, resolved
    name: str
    description: str
    type: MemoryType
    mtime: float  # seconds since the epoch
    body: str
    scope: MemoryScope = "project"
    root: str = ""  # the memory root the file was found under (absolute)

    @property
    def relative_path(self) -> str:
        """The path inside its memory root (falls back to the absolute path)."""
        if self.root:
            with contextlib.suppress(ValueError):
                return Path(self.path).relative_to(self.root).as_posix()
        return self.path


@dataclass(frozen=True, slots=True)
class MemoryIndex:
    """``MEMORY.md`` as it goes into the system prompt."""

    path: str
    text: str  # possibly cut, with a warning line appended when it was
    truncated: bool
    total_lines: int
    total_chars: int


# --------------------------------------------------------------------------- roots


def project_memory_dir(
    project_root: str | os.PathLike[str], memory_dir: str | os.PathLike[str] | None = None
) -> Path:
    """The project's memory root: ``memory_dir`` (relative to the project) or the default."""
    root = Path(project_root).resolve()
    if memory_dir is None:
        return root / ".specrun" / "memory"
    return (root / Path(memory_dir).expanduser()).resolve()


def user_memory_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """The user's memory root, ``<home>/.specrun/memories``."""
    base = Path(home) if home is not None else Path.home()
    return base.resolve() / ".specrun" / "memories"


def memory_dirs(
    project_root: str | os.PathLike[str],
    memory_dir: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
) -> tuple[str, ...]:
    """Both memory roots, absolute: specrun's own state, which no tool call reads or lists
    on the model's behalf unasked (besides ``<project>/.specrun``)."""
    return (str(project_memory_dir(project_root, memory_dir)), str(user_memory_dir(home)))


# --------------------------------------------------------------------------- parsing


class NotAMemory(Exception):
    """A ``*.md`` file under a memory root that is not a memory; the message says why."""


def parse_memory_file(
    path: Path, *, scope: MemoryScope = "project", root: Path | None = None
) -> MemoryDoc | None:
    """Read one topic file; ``None`` (with a debug log line saying why) when it is not a memory."""
    try:
        return read_memory_file(path, scope=scope, root=root)
    except NotAMemory as why:
        log.debug("memory skip %s: %s", path, why)
        return None


def read_memory_file(
    path: Path, *, scope: MemoryScope = "project", root: Path | None = None
) -> MemoryDoc:
    """Read one topic file, or raise ``NotAMemory`` saying why it is not one. A link is
    never followed (a repository's ``deploy.md -> /proc/self/environ`` would put the
    service's environment into the prompt), nor is a FIFO or device opened."""
    try:
        data, st = _read_regular(path, MAX_TOPIC_BYTES)
    except NotAMemory:
        raise
    except OSError as exc:
        raise NotAMemory(f"unreadable ({exc.strerror or exc})") from None
    if b"\x00" in data:
        raise NotAMemory("binary content")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise NotAMemory("not UTF-8 text") from None
    meta, body = _split_front_matter(text)
    name = meta.get("name")
    description = meta.get("description")
    kind = meta.get("type")
    for field, value in (("name", name), ("description", description), ("type", kind)):
        if value is None:
            raise NotAMemory(f"its front matter has no {field!r}")
        if not isinstance(value, str) or not value.strip():
            raise NotAMemory(f"its front matter's {field!r} is not a non-empty string")
    assert isinstance(name, str) and isinstance(description, str) and isinstance(kind, str)
    kind = kind.strip().lower()
    if kind not in MEMORY_TYPES:
        raise NotAMemory(f"type {kind!r} is not one of {', '.join(sorted(MEMORY_TYPES))}")
    return MemoryDoc(
        path=str(path.resolve()),
        name=" ".join(name.split()),
        description=" ".join(description.split()),
        type=cast(MemoryType, kind),  # checked against MEMORY_TYPES above
        mtime=st.st_mtime,
        body=body,
        scope=scope,
        root=str(root.resolve()) if root is not None else "",
    )


def _read_regular(path: Path, limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes of ``path`` if it is a regular file (not a link, FIFO or device) of at most
    ``limit`` bytes; ``NotAMemory`` saying why not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotAMemory("not a regular file (a symbolic link)") from None
        raise NotAMemory(f"unreadable ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotAMemory("not a regular file")
        if st.st_size > limit:
            raise NotAMemory(f"too large ({st.st_size} bytes, at most {limit})")
        return fh.read(limit + 1), st


def _link_on_the_way(base: Path, root: Path) -> Path | None:
    """The first symbolic link (or non-directory) from ``base`` down to ``root``, or None.
    Only the part below ``base`` is checked (the project's own path may hold links)."""
    try:
        rel = root.relative_to(base)
    except ValueError:
        return None
    path = base
    for part in rel.parts:
        path = path / part
        try:
            info = os.lstat(path)
        except OSError:
            return None  # not there (yet): nothing to read through it
        if not stat.S_ISDIR(info.st_mode):
            return path
    return None


def _split_front_matter(text: str) -> tuple[dict[str, object], str]:
    if not text.lstrip().startswith("---"):
        raise NotAMemory("no front matter (a '---' block with name, description and type)")
    try:
        meta, body = frontmatter.parse(text, handler=_YAML)
    except yaml.YAMLError as exc:
        raise NotAMemory(f"bad YAML front matter ({str(exc).splitlines()[0]})") from None
    except Exception as exc:  # the parser is third-party: nothing it raises may escape
        raise NotAMemory(f"front matter unparsable ({exc})") from None
    if not meta:
        raise NotAMemory("front matter empty or not a mapping")
    return dict(meta), body


def iter_topic_files(root: Path) -> Iterator[Path]:
    """Every ``*.md`` under ``root`` except the index; hidden dirs and symlinked dirs skipped."""
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=_walk_error):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        here = Path(dirpath)
        for fname in sorted(filenames):
            if not fname.lower().endswith(".md") or fname.startswith("."):
                continue
            if here == root and fname == INDEX_FILE:
                continue
            yield here / fname


def _walk_error(exc: OSError) -> None:
    log.debug("memory scan: cannot list %s (%s)", exc.filename, exc)


def scan_root(
    root: Path, scope: MemoryScope, skipped: list[tuple[Path, str]] | None = None
) -> list[MemoryDoc]:
    """The memories under ``root``; the ``*.md`` files that are not one go to ``skipped``
    (with why) when it is given, else to the debug log."""
    docs = []
    for path in iter_topic_files(root):
        if skipped is None:
            doc = parse_memory_file(path, scope=scope, root=root)
        else:
            try:
                doc = read_memory_file(path, scope=scope, root=root)
            except NotAMemory as why:
                skipped.append((path, str(why)))
                continue
        if doc is not None:
            docs.append(doc)
    return docs


# --------------------------------------------------------------------------- index


def read_index(
    root: Path, *, max_lines: int = INDEX_MAX_LINES, max_chars: int = INDEX_MAX_CHARS
) -> MemoryIndex | None:
    """``<root>/MEMORY.md`` cut to ``max_lines`` lines and ``max_chars`` characters.

    When cut, a warning line is appended so both the model and a reader see that part of the
    index is missing. ``None`` when there is no readable index.
    """
    path = root / INDEX_FILE
    try:
        raw, _ = _read_regular(path, 1 << 20)
    except NotAMemory as why:
        if os.path.lexists(path):
            log.warning("memory index %s skipped: %s", path, why)
        return None
    text = raw.decode("utf-8-sig", errors="replace").replace("\r\n", "\n")
    lines = text.splitlines()
    total_lines, total_chars = len(lines), len(text)
    kept = "\n".join(lines[:max_lines])
    cut_lines = total_lines > max_lines
    cut_chars = len(kept) > max_chars
    if cut_chars:
        head = kept[:max_chars]
        newline = head.rfind("\n")
        kept = head[:newline] if newline > 0 else head
    truncated = cut_lines or cut_chars
    if truncated:
        kept = kept.rstrip("\n") + (
            f"\n\n> WARNING: {INDEX_FILE} has {total_lines} lines / {total_chars} characters, more "
            f"than the {max_lines}-line / {max_chars}-character budget, so only its beginning "
            "is shown. Keep the index to one short line per memory and put details in topic files."
        )
    return MemoryIndex(str(path), kept.strip("\n"), truncated, total_lines, total_chars)


# --------------------------------------------------------------------------- store


class MemoryStore:
    """Both memory roots of one project; what ``specrun memory list|show|add`` calls."""

    def __init__(
        self,
        project_root: str | os.PathLike[str],
        *,
        memory_dir: str | os.PathLike[str] | None = None,
        home: str | os.PathLike[str] | None = None,
        include_user: bool = True,
        include_project: bool = True,
    ) -> None:
        self.project_root = Path(project_root).resolve()
        self.project_dir = project_memory_dir(self.project_root, memory_dir)
        self.user_dir: Path | None = user_memory_dir(home) if include_user else None
        self.include_project = include_project

    def roots(self) -> list[tuple[MemoryScope, Path]]:
        out: list[tuple[MemoryScope, Path]] = (
            [("project", self.project_dir)] if self.include_project else []
        )
        if self.user_dir is not None and self.user_dir != self.project_dir:
            out.append(("user", self.user_dir))
        return out

    def root_for(self, scope: MemoryScope) -> Path:
        if scope == "project":
            return self.project_dir
        if scope == "user" and self.user_dir is not None:
            return self.user_dir
        raise ValueError(f"unknown or disabled memory scope {scope!r}")

    # -- reading

    def scan(
        self, scope: MemoryScope | None = None, skipped: list[tuple[Path, str]] | None = None
    ) -> list[MemoryDoc]:
        """Every valid memory of both roots (or of ``scope``'s), newest first (ties by path).
        ``skipped`` gets the ``*.md`` files that are not memories, with why: a person who
        wrote one should hear why recall ignores it. Never raises."""
        docs: list[MemoryDoc] = []
        for root_scope, root in self.roots():
            link = _link_on_the_way(self.project_root, root) if root_scope == "project" else None
            if link is not None:
                if skipped is not None:
                    skipped.append((link, "not a directory (a symbolic link?)"))
                log.warning("project memory skipped: %s is a link or not a directory", link)
                continue
            if scope is not None and root_scope != scope:
                continue
            try:
                docs.extend(scan_root(root, root_scope, skipped))
            except Exception:  # defensive: a scan problem means "no memories", never a crash
                log.exception("memory scan of %s failed", root)
        docs.sort(key=lambda d: (-d.mtime, d.path))
        return docs

    def list_memories(self, scope: MemoryScope | None = None) -> list[MemoryDoc]:
        return self.scan(scope)

    def show_memory(self, name_or_path: str) -> MemoryDoc:
        """Find one memory by path (absolute, project-relative or root-relative), name or stem."""
        docs = self.scan()
        key = name_or_path.strip()
        if not key:
            raise MemoryNotFound("no memory name or path given")
        by_path = {d.path: d for d in docs}
        candidates = [Path(key).expanduser()]
        if not candidates[0].is_absolute():
            candidates = [self.project_root / key] + [root / key for _, root in self.roots()]
        for cand in candidates:
            with contextlib.suppress(OSError):
                resolved = str(cand.resolve())
                if resolved in by_path:
                    return by_path[resolved]
        folded = key.casefold()
        for matcher in (
            lambda d: d.name.casefold() == folded,
            lambda d: Path(d.path).stem.casefold() == folded.removesuffix(".md"),
        ):
            hits = [d for d in docs if matcher(d)]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                paths = ", ".join(d.path for d in hits)
                raise MemoryNotFound(f"{name_or_path!r} matches several memories: {paths}")
        raise MemoryNotFound(f"no memory named {name_or_path!r}")

    def index(self, scope: MemoryScope = "project") -> MemoryIndex | None:
        return read_index(self.root_for(scope))

    def index_prompt(self) -> str:
        """The ``MEMORY.md`` indexes for the system prompt (user first, then project)."""
        parts = []
        for scope, root in reversed(self.roots()):
            if scope == "project" and _link_on_the_way(self.project_root, root) is not None:
                log.warning("project memory index skipped: a link on the way to %s", root)
                continue
            idx = read_index(root)
            if idx is not None and idx.text.strip():
                parts.append(f"# {scope.capitalize()} memory index ({idx.path})\n\n{idx.text}")
        return "\n\n".join(parts)

    # -- writing

    def add_memory(
        self,
        name: str,
        description: str,
        type: str,
        body: str,
        scope: str = "project",
    ) -> MemoryDoc:
        """Write a new topic file (atomically, never overwriting) and list it in ``MEMORY.md``."""
        name = " ".join(name.split())
        description = " ".join(description.split())
        kind = type.strip().lower()
        if not name:
            raise ValueError("a memory needs a name")
        if not description:
            raise ValueError("a memory needs a one-line description")
        if kind not in MEMORY_TYPES:
            raise ValueError(
                f"memory type must be one of {', '.join(sorted(MEMORY_TYPES))}, not {type!r}"
            )
        if scope not in MEMORY_SCOPES:
            raise ValueError(f"memory scope must be 'project' or 'user', not {scope!r}")
        scope_t = cast(MemoryScope, scope)
        root = self.root_for(scope_t)
        root.mkdir(parents=True, exist_ok=True)
        with _locked(root):
            for existing in scan_root(root, scope_t):
                if existing.name.casefold() == name.casefold():
                    raise ValueError(
                        f"a {scope} memory named {name!r} already exists: {existing.path}"
                    )
            meta = {"name": name, "description": description, "type": kind}
            header = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=10_000)
            content = f"---\n{header}---\n\n{body.strip()}\n"
            path = _create_new_file(root, _slug(name), content.encode("utf-8"))
            rel = path.relative_to(root).as_posix()
            _append_index_line(root / INDEX_FILE, f"- [{name}]({rel}) — {description}")
        doc = parse_memory_file(path, scope=scope_t, root=root)
        if doc is None:  # cannot happen for what we just wrote; fail loudly if it does
            raise RuntimeError(f"memory written to {path} does not parse back")
        return doc


def _slug(name: str) -> str:
    slug = re.sub(r"[^\w]+", "-", name.casefold()).strip("-_")[:60].strip("-_")
    return slug or "memory"


def _create_new_file(root: Path, stem: str, data: bytes) -> Path:
    """Publish ``data`` as ``<stem>.md`` (or ``<stem>-N.md``) without ever replacing a file.

    The content is fully written to a temp file first and then hard-linked into place, so a
    reader sees either no file or the whole file, and ``link`` refuses an existing name.
    """
    tmp = write_temp(root, data)
    try:
        for n in range(1, 10_000):
            target = root / (f"{stem}.md" if n == 1 else f"{stem}-{n}.md")
            try:
                os.link(tmp, target)
            except FileExistsError:
                continue
            fsync_dir(root)
            return target
        raise FileExistsError(f"no free file name for memory {stem!r} in {root}")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _append_index_line(index: Path, line: str) -> None:
    """Add a line to ``MEMORY.md`` by atomically replacing it (temp file + rename)."""
    try:
        old = index.read_bytes().decode("utf-8-sig", errors="replace")
    except FileNotFoundError:
        old = ""
    if old and not old.endswith("\n"):
        old += "\n"
    tmp = write_temp(index.parent, (old + line + "\n").encode("utf-8"))
    try:
        os.replace(tmp, index)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(index.parent)


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Serialise writers of one memory root (two ``specrun memory add`` at once)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
