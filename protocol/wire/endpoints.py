"""Where a project's service listens, and how its ZeroMQ sockets are made.

Each project gets a private runtime directory (mode 0700, so other users cannot
connect to its ``ipc://`` sockets) holding the control socket, the worker
socket and the pidfile. ``SPECRUN_RUNTIME_DIR`` overrides the base (tests, and a
person whose temporary directory makes the socket paths too long); a cloned repository's
``.envrc`` can set it too, so it must be an absolute path outside the project, or nothing
starts (a runtime directory in the project would put the sockets and the pidfile among
files the repository chose, and make the project's own directory mode 0700).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import zmq

_S = TypeVar("_S", bound="zmq.Socket[Any]")

# ipc:// paths are limited to ~107 bytes by sockaddr_un; a short key keeps us far below.
_KEY_LEN = 12


class RuntimeDirError(RuntimeError):
    """The runtime directory exists but is not private to this user."""


# sockaddr_un holds 108 bytes with the terminating NUL; the longest socket name is this.
_SUN_PATH_MAX = 107
_LONGEST_NAME = "workers.sock"


def _socket_path_len(base: Path) -> int:
    return len(os.fsencode(base)) + 1 + _KEY_LEN + 1 + len(_LONGEST_NAME)


def runtime_base() -> Path:
    """The directory holding every project's runtime directory: ``SPECRUN_RUNTIME_DIR``
    if set, else ``$XDG_RUNTIME_DIR/specrun``, else ``specrun-UID`` in the temp directory
    (or in /tmp, when a long TMPDIR would make the socket paths too long to bind)."""
    override = os.environ.get("SPECRUN_RUNTIME_DIR")
    if override:
        if not os.path.isabs(override):
            raise RuntimeDirError(
                f"SPECRUN_RUNTIME_DIR must be an absolute path; it is {override!r}."
            )
        return Path(override)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.access(xdg, os.W_OK) and _socket_path_len(Path(xdg) / "specrun") <= _SUN_PATH_MAX:
        return Path(xdg) / "specrun"
    import tempfile  # only here: it costs every CLI call that finds XDG_RUNTIME_DIR ~1 ms

    temp = Path(tempfile.gettempdir()) / f"specrun-{os.getuid()}"
    if _socket_path_len(temp) <= _SUN_PATH_MAX:
        return temp
    return Path("/tmp") / f"specrun-{os.getuid()}"


def _inside(path: Path, project_root: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real.is_relative_to(os.path.realpath(project_root))


def project_key(project_root: Path) -> str:
    return hashlib.sha256(str(project_root.resolve()).encode()).hexdigest()[:_KEY_LEN]


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise RuntimeDirError(f"{path} is not a directory owned by you; remove it and retry.")
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)
    return path


class Endpoints:
    """A project's runtime directory and the sockets and pidfile in it. (A plain class:
    ``@dataclass`` would cost every CLI call the import and the class's generated code.)"""

    __slots__ = ("directory",)

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Endpoints) and other.directory == self.directory

    def __hash__(self) -> int:
        return hash(self.directory)

    def __repr__(self) -> str:
        return f"Endpoints({self.directory!r})"

    @classmethod
    def for_project(cls, project_root: Path, create: bool = True) -> Endpoints:
        base = runtime_base()
        if os.environ.get("SPECRUN_RUNTIME_DIR") and _inside(base, project_root):
            raise RuntimeDirError(
                f"SPECRUN_RUNTIME_DIR ({base}) is inside the project {project_root}, where "
                "specrun keeps no sockets; unset it or name a directory outside the project."
            )
        directory = base / project_key(project_root)
        if _socket_path_len(base) > _SUN_PATH_MAX:
            raise RuntimeDirError(
                f"The runtime directory {base} is too long for a socket path "
                f"({_socket_path_len(base)} bytes, at most {_SUN_PATH_MAX}); "
                "set SPECRUN_RUNTIME_DIR to a shorter directory."
            )
        if create:
            _private_dir(base)
            _private_dir(directory)
        return cls(directory)

    @property
    def control(self) -> str:
        return f"ipc://{self.directory / 'control.sock'}"

    @property
    def workers(self) -> str:
        return f"ipc://{self.directory / 'workers.sock'}"

    @property
    def pidfile(self) -> Path:
        return self.directory / "coordinator.pid"

    def socket_paths(self) -> list[Path]:
        return [self.directory / "control.sock", self.directory / "workers.sock"]


# Larger frames are dropped by ZeroMQ (and the peer disconnected) before they reach
# Python: a confused or hostile client cannot make the service allocate without bound.
# A speculation's outcome (100 messages of capped tool output) stays far below this.
MAX_FRAME_BYTES = 64 * 1024 * 1024


def make_router(ctx: zmq.Context[_S], endpoint: str, max_frame: int = MAX_FRAME_BYTES) -> _S:
    import zmq  # here: the CLI reads the endpoints and never imports pyzmq (``zmtp.py``)

    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, max_frame)
    # An unroutable reply (the peer is gone) raises EHOSTUNREACH instead of vanishing.
    sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
    try:
        sock.bind(endpoint)
    except BaseException:
        # An open socket makes the context's term() wait for it: the failed start's
        # shutdown would hang for as long as the traceback keeps it referenced.
        sock.close(linger=0)
        raise
    return sock


def make_dealer(ctx: zmq.Context[_S], endpoint: str, identity: bytes | None = None) -> _S:
    import zmq

    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if identity is not None:
        sock.setsockopt(zmq.IDENTITY, identity)
    try:
        sock.connect(endpoint)
    except BaseException:
        sock.close(linger=0)
        raise
    return sock
