"""The pool's fork server as a fork of the coordinator, not a fresh interpreter.

``multiprocess`` starts its fork server as a new Python interpreter, which imports again
everything the coordinator already holds (asyncio, ZeroMQ, msgspec, the HTTP client stack,
the protocol): about 20 MB that the coordinator, the fork server and every worker forked
from it each had a copy of. Forked from the coordinator instead, the fork server starts
with the coordinator's pages and shares every one that neither side writes afterwards; the
workers it forks share them in turn (``scripts/bench.py --only idle``: 80 MB -> 64 MB with
the pool warm).

The fork is taken only while this process has a single thread (no ZeroMQ socket yet, so no
ZeroMQ I/O thread; no executor, no embedded model server serving: bound is fine, the child
closes its socket): that is what makes a fork safe. Anything else gets ``multiprocess``'s
own fresh interpreter, as before. The child becomes what that interpreter would be: only
the listener, the liveness pipe and stdio open (the pidfile's lock and the control socket's
descriptors are not its to hold), the interpreter's default signal handlers, no logging
handlers of the coordinator's; then it runs ``multiprocess``'s own fork-server loop with
the pool's preload, runs the exit handlers the preload registered (and none of the
coordinator's), and ends with ``os._exit`` so nothing else of the coordinator (its
finalizers) runs there.

The coordinator's objects stay in the child's memory, unreferenced by anything it runs:
the frames that hold them are never unwound (``os._exit``), so no finalizer of theirs ever
closes a descriptor number the child has reused. Nothing in them is secret from a worker:
the settings a worker could read there are those its jobs carry anyway (the endpoint and
its key).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import os
import signal
import socket
import sys
from typing import NoReturn

import multiprocess.connection
import multiprocess.forkserver


def single_threaded() -> bool:
    """True when this process runs one thread, counting those Python does not know of
    (ZeroMQ's I/O threads)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def start(preload: list[str]) -> None:
    """Start ``multiprocess``'s fork server for this process with ``preload`` imported in
    it: forked from here when that is safe, a fresh interpreter otherwise. Does nothing
    if one is running."""
    server = multiprocess.forkserver._forkserver
    server.set_forkserver_preload(preload)
    if server._forkserver_pid is not None or not single_threaded():
        multiprocess.forkserver.ensure_running()
        return
    # Single-threaded: nobody else can be starting one meanwhile (``ensure_running`` takes
    # the server's lock for that), and a child must not inherit that lock held.
    address = multiprocess.connection.arbitrary_address("AF_UNIX")
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(address)
        os.chmod(address, 0o600)
        listener.listen()
        alive_r, alive_w = os.pipe()
    except BaseException:
        listener.close()
        raise
    # Every object alive now is left out of later collections, here and in the child:
    # a collection writes to each object it visits, and would copy page after shared
    # page. What is garbage now is collected first.
    gc.collect()
    gc.freeze()
    try:
        pid = os.fork()
    except BaseException:
        for fd in (alive_r, alive_w):
            os.close(fd)
        listener.close()
        raise
    if pid == 0:
        _serve(listener.fileno(), alive_r, preload)  # never returns
    os.close(alive_r)  # the parent keeps neither end of what the child serves on
    listener.close()
    server._forkserver_address = address
    server._forkserver_alive_fd = alive_w
    server._forkserver_pid = pid


def _serve(listener_fd: int, alive_r: int, preload: list[str]) -> NoReturn:
    """The child: become a fresh fork server, serve until the last client is gone, exit."""
    code = 1
    try:
        _close_all_but({0, 1, 2, listener_fd, alive_r})
        _default_signals()
        root = logging.getLogger()
        for handler in list(root.handlers):
            root.removeHandler(handler)
        root.setLevel(logging.WARNING)
        atexit._clear()  # the coordinator's; the preload registers its own (the group sweep)
        try:
            multiprocess.forkserver.main(listener_fd, alive_r, preload)
        except SystemExit:  # how the loop ends when the last client is gone
            code = 0
        atexit._run_exitfuncs()
    except BaseException:
        sys.excepthook(*sys.exc_info())
    finally:
        with contextlib.suppress(BaseException):
            sys.stderr.flush()
        os._exit(code)


def _close_all_but(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):  # including listdir's own, already closed
                os.close(fd)


def _default_signals() -> None:
    """The signal dispositions of a new interpreter: the coordinator's handlers (its event
    loop's SIGTERM, SIGINT and SIGUSR1, through a wakeup descriptor) would otherwise be
    inherited by every worker."""
    signal.set_wakeup_fd(-1)
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        with contextlib.suppress(OSError, ValueError):
            handler = signal.getsignal(sig)
            if callable(handler) and handler is not signal.default_int_handler:
                signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for ignored in (signal.SIGPIPE, signal.SIGXFSZ):  # as Python's start-up leaves them
        signal.signal(ignored, signal.SIG_IGN)
