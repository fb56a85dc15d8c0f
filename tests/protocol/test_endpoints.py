"""Where a project's sockets live, and sockets that fail to bind or connect."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import zmq

from protocol.wire.endpoints import (
    _SUN_PATH_MAX,
    Endpoints,
    RuntimeDirError,
    make_dealer,
    make_router,
    runtime_base,
)


def _term_returns(ctx: zmq.Context[zmq.Socket[bytes]], timeout: float = 5.0) -> bool:
    """Whether ``ctx.term()`` comes back: it waits for every socket still open."""
    done = threading.Event()
    thread = threading.Thread(target=lambda: (ctx.term(), done.set()), daemon=True)
    thread.start()
    return done.wait(timeout)


def test_a_router_that_cannot_bind_is_closed(tmp_path: Path) -> None:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    missing = tmp_path / "no-such-dir" / "x.sock"
    with pytest.raises(zmq.ZMQError) as failure:
        make_router(ctx, f"ipc://{missing}")
    # The traceback keeps the frame (and once kept the socket) alive: term() must not wait.
    assert failure.value is not None
    assert _term_returns(ctx)


def test_a_dealer_that_cannot_connect_is_closed() -> None:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    with pytest.raises(zmq.ZMQError):
        make_dealer(ctx, "nonsense://endpoint")
    assert _term_returns(ctx)


def test_a_long_temp_dir_falls_back_to_a_short_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_tmp = tmp_path / ("t" * 100)
    long_tmp.mkdir()
    monkeypatch.delenv("SPECRUN_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(long_tmp))
    monkeypatch.setattr("tempfile.tempdir", None)  # gettempdir() reads TMPDIR again
    base = runtime_base()
    assert not str(base).startswith(str(long_tmp))
    endpoints = Endpoints.for_project(tmp_path, create=False)
    assert len(endpoints.workers.removeprefix("ipc://").encode()) <= _SUN_PATH_MAX


def test_a_too_long_runtime_dir_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(tmp_path / ("r" * 120)))
    with pytest.raises(RuntimeDirError, match=r"too long for a socket path.*SPECRUN_RUNTIME_DIR"):
        Endpoints.for_project(tmp_path / "project")  # the runtime directory is outside it
    assert not (tmp_path / ("r" * 120)).exists()
