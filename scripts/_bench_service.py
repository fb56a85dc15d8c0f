"""Shared by the benchmark scripts that drive a real service: the runtime directory its
sockets and pidfile go to, the scripted model's scenario they share, one timed turn, and
waiting for the current speculation to end.

The runtime directory is a process-wide environment variable, and ``bench.py`` runs the
per-area scripts one after another in one process: each must leave it as it found it, or
the next one's service would look for (and stop) the previous one's.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from coordinator.cli.client import ServiceClient
from protocol.wire.control import SpeculationInfo, SuggestionReply, SuggestionRequest, TurnEnded

RUNTIME_DIR = "SPECRUN_RUNTIME_DIR"


def use_runtime_dir(path: Path) -> Callable[[], None]:
    """Point the services started from here at ``path``; the returned call puts the
    variable back as it was (for an object that starts the service in one method and stops
    it in another)."""
    restore = _saved_runtime_dir()
    os.environ[RUNTIME_DIR] = str(path)
    return restore


@contextlib.contextmanager
def runtime_dir(path: Path | None = None) -> Iterator[None]:
    """Inside: the runtime directory is ``path`` (None: whatever the code inside sets).
    After: as it was before, however the inside ended."""
    restore = use_runtime_dir(path) if path is not None else _saved_runtime_dir()
    try:
        yield
    finally:
        restore()


def _saved_runtime_dir() -> Callable[[], None]:
    saved = os.environ.get(RUNTIME_DIR)

    def restore() -> None:
        if saved is None:
            os.environ.pop(RUNTIME_DIR, None)
        else:
            os.environ[RUNTIME_DIR] = saved

    return restore


LIST = {"name": "list_directory", "arguments": {"path": "."}}


def prepared_scenario(
    name: str,
    prompt: str,
    ready: str,
    rules: list[dict[str, Any]],
    *,
    latency_ms: int = 0,
    chunk_ms: int = 0,
) -> dict[str, Any]:
    """A scripted model for a bench: it suggests ``prompt`` after a "prepare" turn of two
    model turns (a directory listing, then ``ready``: a shorter conversation gets no
    suggestion), recalls no memory, pipelines nothing; ``rules`` say what ``prompt`` does,
    and anything else is answered "ok"."""
    return {
        "name": name,
        "latency_ms": latency_ms,
        "chunk_ms": chunk_ms,
        "rules": [
            {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
            {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": prompt}}},
            {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
            {"when": {"last_user": "prepare"}, "reply": {"tool_calls": [LIST]}},
            {
                "when": {"turn_user": "prepare", "last_tool": "list_directory"},
                "reply": {"text": ready},
            },
            *rules,
            {"default": {"text": "ok"}},
        ],
    }


def timed_turn(
    client: ServiceClient, request: Any, timeout_s: float = 300
) -> tuple[float, TurnEnded]:
    """Seconds from sending ``request`` to its turn's end, and that end."""
    t0 = time.perf_counter()
    client.send(request)
    *_, end = client.replies(request.req_id, timeout_s=timeout_s)
    assert isinstance(end, TurnEnded), end
    return time.perf_counter() - t0, end


def wait_completed(
    client: ServiceClient,
    *,
    timeout_s: float = 120,
    ended: tuple[str, ...] = ("failed", "boundary"),
    poll_s: float = 0.005,
    detail: Callable[[], str] = lambda: "",
) -> SpeculationInfo:
    """The current speculation once it has completed. RuntimeError when it reaches one of
    the ``ended`` states instead or does not complete within ``timeout_s``; ``detail`` adds
    what the caller knows of why (the service log's tail)."""
    spec = None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        reply = client.request(SuggestionRequest(req_id=client.next_id()))
        assert isinstance(reply, SuggestionReply)
        spec = reply.speculation
        if spec is not None and spec.status == "completed":
            return spec
        if spec is not None and spec.status in ended:
            raise RuntimeError(f"the speculation ended {spec}{detail()}")
        time.sleep(poll_s)
    raise RuntimeError(f"the speculation never completed: {spec}{detail()}")
