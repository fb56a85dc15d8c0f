"""The sandbox helper: the one process that starts unapproved shell commands.

A worker forks its helper first thing at start, while it is still single-threaded and
unconfined (a Landlock-confined process may not mount, and forking a process that runs
ZeroMQ's threads is not safe). The helper enters a user namespace of its own, prepares
the commands' root once (``worker.contain.mounts``), then serves requests from its
worker over a socketpair, one at a time: each command runs inside the full containment
profile (``worker.contain.spawn``). It holds no state a command could reach, writes
nothing but its own mount point directory, and exits when its worker closes the socket
or dies.

The same loop runs in a fresh interpreter (``python -m worker.contain.helper FD``) for
callers that are not a preloaded single-threaded worker: the test suite and
``specrun sandbox --verify``. A test that needs a helper built differently
(``protocol.wire.seams``) starts its own entry point instead, which calls :func:`serve`
with its seams; nothing here reads them from anywhere else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import msgspec

from overlay.paths import ensure_private_base, ensure_private_dir, make_private_dir
from overlay.sweep import release_pid_dir
from protocol.wire.seams import NO_SEAMS, WorkerSeams
from protocol.wire.work import CommandLimits, LayerStatus
from worker.contain import backstop, cgroup, mounts, probe, spawn
from worker.contain.limits import pid_namespace_cap
from worker.contain.session import HOME as SESSION_HOME
from worker.contain.session import CarryFull, Session, carry_over
from worker.contain.spawn import (
    ALL_LAYERS,
    ContainmentUnavailable,
    Layers,
    Profile,
    run_contained,
)
from worker.lifecycle import die_with_parent
from worker.shell.runner import READ_ONLY_PATH, ShellResult, read_only_environment

HELPER_MODULE = ("-m", "worker.contain.helper")
"""How ``SandboxHelper.start`` runs the helper in a fresh interpreter (its FD follows)."""
SANDBOX_DIR = "sandbox"
"""The helper's directory (its commands' mount point) inside the worker's per-pid dir. A
helper started in a fresh interpreter (``SandboxHelper.start``: tests, ``--verify``) adds
its own pid, since one process may start several."""
_MAX_MESSAGE = 64 << 20
_HEADER = struct.Struct("!I")
# "verify": the hostile probes of `specrun sandbox --verify`, run without asking the classifier;
# "probe": no command, the helper reports its layers (``Reply.layers``)
# "end_session": no command, the helper drops the speculation's session (``Request.session``)
Mode = Literal["read_only", "captured", "verify", "probe", "end_session"]
CAPTURED_ENV = frozenset(
    {
        "PATH",
        "GIT_ALLOW_PROTOCOL",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "PYENV_ROOT",
        "PYENV_VERSION",
        "RUSTUP_HOME",
        "RUSTUP_TOOLCHAIN",
        "CARGO_HOME",
        "VIRTUAL_ENV",
        "PYTHONDONTWRITEBYTECODE",
    }
)
"""What a captured command's environment may get besides the read-only one: where its
toolchains are, the user's git identity, git's local transport, no bytecode. Nothing that makes a
program load code from elsewhere (``LD_PRELOAD``, ``BASH_ENV``, ``PYTHONPATH``...)."""


def shell_program() -> str | None:
    """The bash every contained command runs in (its path is how bash names itself in
    its error messages)."""
    return shutil.which("bash", path=READ_ONLY_PATH)


class Request(msgspec.Struct, frozen=True):
    command: str
    cwd: str
    project: str
    timeout_s: float
    output_cap: int
    mode: Mode = "read_only"
    overlay_dir: str | None = None
    # captured mode: the command's writes land in <capture_dir>/upper, on a file system
    # of its own that holds at most capture_bytes and capture_inodes (the quota left)
    capture_dir: str | None = None
    capture_bytes: int = 256 << 20
    capture_inodes: int = 4000
    limits: CommandLimits = msgspec.field(default_factory=CommandLimits)
    layers: Layers = ALL_LAYERS
    # specrun's state besides <project>/.specrun (memory directories): hidden when inside
    private_paths: tuple[str, ...] = ()
    # captured mode only: host paths shown read-only (``worker.contain.toolchains``) and
    # variables set for the command (only the names in ``CAPTURED_ENV``)
    toolchains: tuple[str, ...] = ()
    env: dict[str, str] = msgspec.field(default_factory=dict)
    # a speculation's commands share one /tmp, HOME and carry layer (``worker.contain.
    # session``), named by this key; None (the main chat's commands): a fresh /tmp each
    session: str | None = None
    # the carry layer's room in inodes (directories, links, whiteouts), set when it is made
    session_inodes: int = 8000


CaptureFull = Literal["overlay_bytes", "overlay_files"]


class Reply(msgspec.Struct, frozen=True):
    result: ShellResult | None = None
    unavailable_layer: str | None = None
    error: str | None = None
    layers: tuple[LayerStatus, ...] = ()
    # captured mode: a descriptor of the capture file system follows the reply (SCM_RIGHTS)
    capture_fd: bool = False
    # ...and it was full when the command ended (the command ran out of quota)
    capture_full: CaptureFull | None = None


# A capture file system counts as full with less than this left (a write that failed
# leaves less than a page; overlayfs gives up a copy-up that does not fit).
_FULL_BYTES = 64 << 10


@dataclass
class Captured:
    """A captured command's result and its writes: ``root`` is the capture file system
    (``upper/`` holds what the command wrote), readable through a descriptor the helper
    passed; it is freed when ``close`` drops the last reference."""

    result: ShellResult
    fd: int
    full: CaptureFull | None = None

    @property
    def root(self) -> Path:
        return Path(f"/proc/self/fd/{self.fd}")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Captured:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class _Server:
    """The helper's state. Nothing is set up until the first request: most workers never
    run a shell command, and a worker's start should not pay for namespaces."""

    def __init__(self, dir_name: str = SANDBOX_DIR, seams: WorkerSeams = NO_SEAMS) -> None:
        self.dir_name = dir_name
        self.seams = seams
        self.ready = False
        self.setup_error: str | None = None
        self.network: int | None = None
        self.parent: Path | None = None
        self.own: Path | None = None
        self.mount_point = ""
        self.prepared: dict[str, tuple[str, ...]] = {}  # project -> its submounts
        self.counter = itertools.count(1)
        self.bash = shell_program()
        self._userxattr: bool | None = None
        # the speculation's control group (``worker.contain.cgroup``), where one can be made
        self.group: cgroup.Group | None = None
        self.group_fds: tuple[int, ...] = ()
        self.group_limits: CommandLimits | None = None
        self.group_error: str | None = None
        self.capture_fd: int | None = None  # passed with the reply, then closed
        self.session: Session | None = None  # the speculation being served, if any
        self.sessions = itertools.count(1)

    def _session_for(self, request: Request) -> Session | None:
        """The request's speculation's session, opened at its first command; another
        speculation's replaces it (a helper serves one at a time)."""
        if request.session is None or not request.layers.filesystem:
            return None
        if self.session is not None and self.session.key == request.session:
            return self.session
        self.end_session()
        assert self.own is not None
        base = self.own / f"session-{next(self.sessions)}"
        try:
            self.session = Session.open(
                request.session, base, request.limits.tmp_bytes, request.session_inodes
            )
        except OSError as exc:
            raise ContainmentUnavailable("filesystem", f"the speculation's /tmp: {exc}") from exc
        return self.session

    def end_session(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    def _make_group(self) -> None:
        """Before the user namespace: the group is made and opened with our own rights."""
        try:
            self.group = cgroup.create(CommandLimits())
            if self.group is not None:
                self.group_fds = tuple(cgroup.open_joiners(self.group))
                self.group_limits = CommandLimits()
        except OSError as exc:
            self.group_error = f"the speculation's control group could not be made: {exc}"

    def _setup(self) -> None:
        self.ready = True
        # The groups of helpers killed since: swept here, before this helper's own group,
        # not when the helper starts. An idle helper's memory is the pages it has touched
        # (the sweep's are about a quarter of a MB); each service's start sweeps once anyway,
        # in the fork server's probe.
        with contextlib.suppress(OSError):
            cgroup.sweep()
        self._make_group()
        try:
            mounts.enter_user_namespace()
            self.network = mounts.empty_network_namespace()
        except Exception as exc:
            self.setup_error = str(exc)
        # Under the worker's per-pid directory, so whoever cleans up after the worker
        # (the worker itself, the pool, the sweep) takes the mount point along.
        self.parent = ensure_private_dir(ensure_private_base() / str(os.getppid()))
        self.own = make_private_dir(self.parent / self.dir_name, replace_stale=True)
        self.mount_point = str(self.own / "root")
        os.mkdir(self.mount_point, 0o700)
        spawn.prepare()

    def userxattr(self) -> bool:
        """Does the writable view's overlayfs take ``userxattr`` here? Tried once."""
        if self._userxattr is None:
            assert self.own is not None
            # on a capture space like the ones the commands' writes land on (a tmpfs)
            trial = self.own / "userxattr-trial"
            trial.mkdir(exist_ok=True)
            try:
                mounts.mount_capture_space(str(trial), 1 << 20, 64)
                try:
                    self._userxattr = mounts.userxattr_supported(str(trial))
                finally:
                    mounts.detach(str(trial))
            except OSError:
                self._userxattr = False
            finally:
                _remove_tree(trial)
        return self._userxattr

    def probe(self) -> tuple[LayerStatus, ...]:
        """Run one command in the full profile and report what held (``worker.contain.probe``)."""
        if not self.ready:
            self._setup()
        assert self.own is not None
        if self.setup_error is not None:
            return probe.report("namespaces", self.setup_error, False)
        project = self.own / "probe"
        project.mkdir(mode=0o700, exist_ok=True)
        request = Request(
            command="read -r n < /proc/sys/kernel/pid_max; echo $n",
            cwd=str(project),
            project=str(project),
            timeout_s=10.0,
            output_cap=1024,
        )
        reply = self.handle(request, check=False)
        if reply.unavailable_layer is not None:
            return probe.report(reply.unavailable_layer, reply.error or "", False)
        if reply.result is None or reply.result.exit_code != 0:
            detail = reply.error or (reply.result.stderr.strip() if reply.result else "")
            return probe.report("exec", detail or "the probe command failed", False)
        pid_cap = reply.result.stdout.strip() == str(pid_namespace_cap(request.limits.processes))
        shutil.rmtree(project, ignore_errors=True)
        return probe.report(
            None, "", pid_cap, group=self.group is not None, userxattr=self.userxattr()
        )

    def close(self) -> None:
        self.end_session()
        for fd in self.group_fds:
            os.close(fd)
        self.group_fds = ()
        if self.group is not None:
            cgroup.remove(self.group)
            self.group = None
        if self.own is None or self.parent is None:
            return
        if self.prepared:
            with contextlib.suppress(OSError):
                mounts.release_root(self.mount_point)
        shutil.rmtree(self.own, ignore_errors=True)
        release_pid_dir(self.parent)

    def handle(self, request: Request, *, check: bool = True) -> Reply:
        if not self.ready:
            self._setup()
        if self.setup_error is not None:
            return Reply(unavailable_layer="namespaces", error=self.setup_error)
        if self.group_error is not None and request.layers.limits:
            return Reply(unavailable_layer="limits", error=self.group_error)
        if check and request.mode == "read_only" and not self.seams.bypass_classifier:
            from worker.shell.classifier import classify

            verdict = classify(request.command)
            if not verdict.read_only:
                return Reply(error=f"not run: the command is not read-only ({verdict.reason})")
        # Only a command without the file system layer (a test) uses a scratch dir on disk;
        # the others get a private tmpfs /tmp.
        assert self.own is not None
        scratch = self.own / f"cmd-{next(self.counter)}"
        try:
            if not request.layers.filesystem:
                scratch.mkdir(mode=0o700)
            return self._run(request, scratch)
        except ContainmentUnavailable as exc:
            return Reply(unavailable_layer=exc.layer, error=exc.detail)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            return Reply(error=f"the command could not be started: {exc}")
        finally:
            if not request.layers.filesystem:
                shutil.rmtree(scratch, ignore_errors=True)

    def _run(self, request: Request, scratch: Path) -> Reply:
        project = os.path.realpath(request.project)
        if request.layers.filesystem and project not in self.prepared:
            try:
                mounts.prepare_root(self.mount_point, project)
                self.prepared[project] = mounts.submounts_below(project)
            except Exception as exc:
                raise ContainmentUnavailable("filesystem", str(exc)) from exc
        upper = work = capture = None
        if request.mode == "captured":
            if request.capture_dir is None:
                return Reply(error="a captured command needs a capture directory")
            capture = Path(request.capture_dir)
            capture.mkdir(parents=True, exist_ok=True)
            try:
                mounts.mount_capture_space(
                    str(capture), request.capture_bytes, request.capture_inodes
                )
            except OSError as exc:
                raise ContainmentUnavailable("filesystem", f"the capture space: {exc}") from exc
            try:
                upper, work = capture / "upper", capture / "work"
                upper.mkdir()
                work.mkdir()
                reply = self._run_in(request, scratch, project, upper, work)
                return self._hand_over(capture, reply, self._carry(request, upper, reply))
            finally:
                with contextlib.suppress(OSError):
                    mounts.detach(str(capture))
        return self._run_in(request, scratch, project, upper, work)

    def _carry(self, request: Request, upper: Path, reply: Reply) -> bool:
        """What the command left besides file contents, kept for the session's next
        commands; False when the carry layer is full."""
        session = self._session_for(request)
        if session is None or reply.result is None:
            return True
        try:
            carry_over(upper, session.carry)
        except CarryFull:
            return False
        return True

    def _hand_over(self, capture: Path, reply: Reply, carried: bool = True) -> Reply:
        """Keep a descriptor of the capture space for the worker (sent after the reply);
        say whether the command filled it (or the session's carry layer)."""
        if reply.result is None:
            return reply
        info = os.statvfs(capture)
        full: CaptureFull | None = None
        if info.f_favail == 0 or not carried:
            full = "overlay_files"
        elif info.f_bavail * info.f_frsize < _FULL_BYTES:
            full = "overlay_bytes"
        self.capture_fd = os.open(capture, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return Reply(result=reply.result, capture_fd=True, capture_full=full)

    def _run_in(
        self, request: Request, scratch: Path, project: str, upper: Path | None, work: Path | None
    ) -> Reply:
        captured = request.mode == "captured"
        session = self._session_for(request)
        view = mounts.View(
            project=project,
            scratch=str(scratch),
            overlay_dir=request.overlay_dir,
            capture_upper=None if upper is None else str(upper),
            capture_work=None if work is None else str(work),
            submounts=self.prepared.get(project, ()),
            hidden=mounts.hidden_in_view(project, request.private_paths),
            toolchains=request.toolchains if captured else (),
            userxattr=(captured or session is not None) and self.userxattr(),
            carry=None if session is None else str(session.carry),
            session_tmp=None if session is None else str(session.tmp),
            session_home=None if session is None else str(session.home),
        )
        group = self.group if request.layers.limits else None
        if group is not None and request.limits != self.group_limits:
            try:
                cgroup.update(group, request.limits)
            except OSError as exc:
                detail = f"setting the group's limits failed: {exc}"
                raise ContainmentUnavailable("limits", detail) from exc
            self.group_limits = request.limits
        profile = Profile(
            view,
            self.mount_point,
            request.limits,
            request.layers,
            self.network,
            group_fds=self.group_fds if group is not None else (),
            pids_by_group=group is not None and cgroup.covers("pids"),
            memory_by_group=group is not None and cgroup.covers("memory"),
            broken_layer=self.seams.broken_layer,
        )
        tmp = "/tmp" if request.layers.filesystem else str(scratch)
        home = SESSION_HOME if session is not None else tmp
        env = {**read_only_environment(), "HOME": home, "TMPDIR": tmp}
        if captured:
            env.update((k, v) for k, v in request.env.items() if k in CAPTURED_ENV)
        if self.bash is None:
            return Reply(error="bash was not found")
        argv = [self.bash, "--noprofile", "--norc", "-c", request.command]
        cwd = os.path.realpath(request.cwd)
        before = cgroup.events(group) if group is not None else {}
        result = run_contained(
            argv, cwd, env, profile, request.timeout_s, request.output_cap
        )
        if group is not None:
            after = cgroup.events(group)
            hits = [k for k in ("memory", "processes") if after.get(k, 0) > before.get(k, 0)]
            if hits:
                result = dataclasses.replace(result, limit=hits[0])
        return Reply(result=result)


def _remove_tree(path: Path) -> None:
    """overlayfs leaves its work directory unreadable (mode 000): open each directory up
    on the way down, then remove."""
    for dirpath, dirnames, _files in os.walk(path):
        for name in dirnames:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, name), 0o700)
    shutil.rmtree(path, ignore_errors=True)


def send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            return b""
        chunks += chunk
    return bytes(chunks)


def recv_frame(sock: socket.socket) -> bytes:
    """One length-prefixed frame; b"" when the other end is gone."""
    header = _recv_exact(sock, _HEADER.size)
    if not header:
        return b""
    (size,) = _HEADER.unpack(header)
    if size > _MAX_MESSAGE:
        raise OSError(f"frame of {size} bytes is too large")
    return _recv_exact(sock, size)


def serve(
    sock: socket.socket, dir_name: str = SANDBOX_DIR, seams: WorkerSeams = NO_SEAMS
) -> None:
    """Answer requests until the other end closes. Single-threaded."""
    if seams.any_set:
        sys.stderr.write(f"specrun: a sandbox helper built by a test ({seams.describe()})\n")
    decoder = msgspec.msgpack.Decoder(Request)
    encoder = msgspec.msgpack.Encoder()
    server = _Server(dir_name, seams)
    try:
        while True:
            try:
                frame = recv_frame(sock)
            except OSError:
                return
            if not frame:
                return
            try:
                request = decoder.decode(frame)
                if request.mode == "probe":
                    reply = Reply(layers=server.probe())
                elif request.mode == "end_session":
                    server.end_session()
                    reply = Reply()
                else:
                    reply = server.handle(request)
            except msgspec.DecodeError as exc:
                reply = Reply(error=f"bad request: {exc}")
            send_frame(sock, encoder.encode(reply))
            if server.capture_fd is not None:
                try:
                    socket.send_fds(sock, [b"F"], [server.capture_fd])
                finally:
                    os.close(server.capture_fd)
                    server.capture_fd = None
    finally:
        server.close()


@dataclass
class SandboxHelper:
    """The worker's handle on its helper process."""

    sock: socket.socket
    pid: int
    layers: tuple[LayerStatus, ...] = ()
    _popen: subprocess.Popen[bytes] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def fork(cls, seams: WorkerSeams = NO_SEAMS) -> SandboxHelper:
        """Fork the helper from this process. Call while single-threaded."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                ours.close()
                die_with_parent()
                serve(theirs, seams=seams)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        theirs.close()
        return cls(ours, pid)

    @classmethod
    def start(cls, entry: Sequence[str] = HELPER_MODULE) -> SandboxHelper:
        """Start the helper in a fresh interpreter (safe from any process). ``entry``: what
        the interpreter runs, given the socket's FD as its last argument; a test passes its
        own entry point to build a helper differently."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        proc = subprocess.Popen(
            # -P and cwd "/": the project must never shadow our own packages.
            [sys.executable, "-P", *entry, str(theirs.fileno())],
            cwd="/",
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        helper = cls(ours, proc.pid, _popen=proc)
        helper.probe()
        return helper

    def probe(self) -> tuple[LayerStatus, ...]:
        """Ask the helper to run one command in the full profile and report the layers
        (``worker.contain.probe``); kept in ``layers``."""
        request = Request(command="", cwd="/", project="/", timeout_s=1, output_cap=0, mode="probe")
        frame = b""
        with self._lock, contextlib.suppress(OSError):
            send_frame(self.sock, msgspec.msgpack.encode(request))
            frame = recv_frame(self.sock)
        if frame:
            self.layers = msgspec.msgpack.decode(frame, type=Reply).layers
        else:
            self.layers = probe.report("namespaces", "the sandbox helper did not start", False)
        # The main chat's commands run from this process, not the helper: its backstop is
        # probed here (once per process), and reported whether the helper started or not.
        self.layers = (*self.layers, backstop.layer())
        return self.layers

    def end_session(self) -> None:
        """Drop the speculation's /tmp, HOME and carry layer now (they also go with the
        helper). Never raises: a gone helper holds nothing."""
        request = Request(
            command="", cwd="/", project="/", timeout_s=1, output_cap=0, mode="end_session"
        )
        with contextlib.suppress(RuntimeError):
            self._exchange(request)

    def _exchange(self, request: Request) -> tuple[Reply, list[int]]:
        """Send one request, read its reply and the descriptor that may follow it."""
        encoded = msgspec.msgpack.encode(request)
        fds: list[int] = []
        reply: Reply | None = None
        with self._lock:
            try:
                send_frame(self.sock, encoded)
                frame = recv_frame(self.sock)
                if frame:
                    reply = msgspec.msgpack.decode(frame, type=Reply)
                if reply is not None and reply.capture_fd:
                    _msg, fds, _flags, _addr = socket.recv_fds(self.sock, 1, 1)
            except OSError:
                reply = None
        if reply is None:
            for fd in fds:
                os.close(fd)
            raise RuntimeError("the sandbox helper is gone")
        return reply, fds

    def run(self, request: Request) -> ShellResult:
        """Run one command. Raises ``ContainmentUnavailable`` (nothing ran) or
        ``RuntimeError`` (refused, or the helper is gone)."""
        reply, fds = self._exchange(request)
        for fd in fds:  # a captured command's writes: only run_captured keeps them
            os.close(fd)
        return self._result(reply)

    def run_captured(self, request: Request) -> Captured:
        """Run one command in captured mode; the caller closes what it returns. Raises like
        ``run``."""
        reply, fds = self._exchange(request)
        try:
            result = self._result(reply)
            if len(fds) != 1:
                raise RuntimeError("the sandbox helper did not pass the capture space")
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return Captured(result, fds[0], reply.capture_full)

    @staticmethod
    def _result(reply: Reply) -> ShellResult:
        if reply.unavailable_layer is not None:
            raise ContainmentUnavailable(reply.unavailable_layer, reply.error or "")
        if reply.result is None:
            raise RuntimeError(reply.error or "the sandbox helper failed")
        return reply.result

    def close(self) -> None:
        """Close the socket; the helper then removes its directory and exits. A forked
        helper is our child: reap it without waiting long (it dies with us anyway)."""
        with contextlib.suppress(OSError):
            self.sock.close()
        if self._popen is not None:
            try:
                self._popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait()
            return
        # Give it a moment to remove its directory before our exit kills it.
        try:
            pidfd = os.pidfd_open(self.pid)
        except OSError:
            pidfd = None
        if pidfd is not None:
            with contextlib.suppress(OSError):
                select.select([pidfd], [], [], 1.0)
            os.close(pidfd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, os.WNOHANG)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m worker.contain.helper FD")
    die_with_parent()
    serve(socket.socket(fileno=int(sys.argv[1])), f"{SANDBOX_DIR}-{os.getpid()}")
