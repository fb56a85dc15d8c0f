"""Shared helpers for the recall and prefetch tests (no tests here).

Everything talks to the real scripted model server over real HTTP; ``RecordingModel`` only
wraps the real ``ModelClient`` to note which requests were cancelled on the client side.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from coordinator.memory import AbortLike, MemoryPrefetcher, Recaller
from coordinator.scripted_model import ScriptedModelServer
from protocol.model import ChatRequest, ChatResult, ModelClient
from protocol.wire.chat import Message, ToolResult

T = TypeVar("T")

TOPICS: dict[str, tuple[str, str, str]] = {
    # stem: (name, description, body)
    "deploy": (
        "Deploy process",
        "How the service is deployed to staging and production with make deploy",
        "Run `make deploy ENV=staging` first; production needs the release tag.",
    ),
    "testing": (
        "Running tests",
        "How to run the pytest suite and which markers are slow",
        "Use scripts/test; slow tests need SPECRUN_SLOW=1.",
    ),
    "style": (
        "Code style",
        "Formatting and lint rules: ruff, line length 100",
        "ruff check and ruff format; no black.",
    ),
    "database": (
        "Database migrations",
        "Alembic migrations live in db/migrations; never edit an applied one",
        "Create a new revision with alembic revision --autogenerate.",
    ),
}


@dataclass
class Project:
    root: Path
    home: Path
    paths: dict[str, str]  # stem -> absolute path

    def memory_dir(self) -> Path:
        return self.root / ".specrun" / "memory"


def make_project(tmp_path: Path, topics: dict[str, tuple[str, str, str]] | None = None) -> Project:
    root = tmp_path / "project"
    home = tmp_path / "home"
    mem = root / ".specrun" / "memory"
    mem.mkdir(parents=True)
    home.mkdir()
    paths = {}
    for stem, (name, description, body) in (topics or TOPICS).items():
        f = mem / f"{stem}.md"
        meta = {"name": name, "description": description, "type": "project"}
        f.write_text(f"---\n{yaml.safe_dump(meta, allow_unicode=True)}---\n\n{body}\n")
        paths[stem] = str(f.resolve())
    return Project(root.resolve(), home, paths)


def recall_rule(
    contains: str, *, paths: Sequence[str] = (), latency_ms: int = 0, **extra: Any
) -> dict[str, Any]:
    """A rule answering recall requests whose query starts with ``contains``."""
    reply: dict[str, Any] = {"latency_ms": latency_ms}
    if "text" in extra:
        reply["text"] = extra.pop("text")
    elif "json" in extra:
        reply["json"] = extra.pop("json")
    else:
        reply["json"] = {"selected_memories": list(paths)}
    when = {"purpose": "recall", "prompt_contains": f"Query: {contains}"}
    return {"when": when, "reply": reply, **extra}


@contextmanager
def scripted(*rules: dict[str, Any]) -> Iterator[ScriptedModelServer]:
    scenario = {"name": "memory-tests", "rules": [*rules, {"default": {"text": "ok"}}]}
    with ScriptedModelServer(scenario) as server:
        yield server


def recall_requests(server: ScriptedModelServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["purpose"] == "recall"]


def manifest_of(request: dict[str, Any]) -> str:
    """The user message text of a logged recall request."""
    return str(request["body"]["messages"][-1]["content"])


class RecordingModel:
    """The real client, noting how each request ended (for 'the request was cancelled')."""

    def __init__(self, inner: ModelClient) -> None:
        self.inner = inner
        self.outcomes: list[str] = []  # "ok" | "error" | "cancelled"
        self.started = 0  # requests sent so far (in flight or ended)

    async def complete(self, req: ChatRequest) -> ChatResult:
        self.started += 1
        try:
            result = await self.inner.complete(req)
        except asyncio.CancelledError:
            self.outcomes.append("cancelled")
            raise
        except Exception:
            self.outcomes.append("error")
            raise
        self.outcomes.append("ok")
        return result


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Wait, polling the loop, until ``condition()`` holds (bounded: a hang fails)."""
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.005)


def new_client(server: ScriptedModelServer) -> ModelClient:
    # No retries: a scripted 500 must reach recall as an error, not be retried away.
    return ModelClient(server.base_url, max_retries=0, timeout_s=10.0)


def with_client(
    server: ScriptedModelServer, fn: Callable[[ModelClient], Awaitable[T]], timeout: float = 15.0
) -> T:
    """Run ``fn(client)`` in a fresh event loop with a real client for ``server``."""

    async def main() -> T:
        client = new_client(server)
        try:
            return await fn(client)
        finally:
            await client.aclose()

    return run(main(), timeout)


def make_prefetcher(
    project: Project, model: Any, *, enabled: bool = True, ceiling_s: float = 30.0
) -> MemoryPrefetcher:
    recaller = Recaller(
        project.root, model=model, model_name="fast", home=project.home, ceiling_s=ceiling_s
    )
    return MemoryPrefetcher(recaller, enabled=enabled)


@dataclass
class TurnTrace:
    user_message: Message
    tool_messages: list[Message] = field(default_factory=list)
    consume1_s: float = 0.0  # time spent inside consume point 1
    fire_to_send_s: float = 0.0  # fire → user-query request ready, minus the preparation


async def simulated_turn(
    prefetcher: MemoryPrefetcher,
    query: str,
    *,
    prepare_s: float = 0.02,
    tool_turns: Sequence[float] = (),
    answer_s: float = 0.01,
    turn_abort: AbortLike | None = None,
    other_reminders: tuple[str, ...] = ("<environment details>",),
    prepared: Callable[[], bool] | None = None,
    tool_ready: Callable[[int], bool] | None = None,
) -> TurnTrace:
    """What the main turn loop does around recall, with real asyncio timing.

    ``prepare_s``: building the user-query request; with ``prepared`` it lasts at least
    until that holds too (a test about what is consumed when the recall is ready, on a
    machine too loaded to be ready in ``prepare_s``). ``tool_turns``: for each model turn
    that calls a tool, the time the model + tool take before the tool-result request is
    built; with ``tool_ready`` each such turn also lasts until ``tool_ready(its index)``
    holds. ``answer_s``:
    the final text-only answer.
    """
    started = time.perf_counter()
    prefetcher.fire(query, turn_abort)
    await asyncio.sleep(prepare_s)
    if prepared is not None:
        await until(prepared)
    t0 = time.perf_counter()
    memory = prefetcher.consume_for_user_query()
    t1 = time.perf_counter()
    reminders = (memory, *other_reminders) if memory else other_reminders
    trace = TurnTrace(Message.user(query, reminders), consume1_s=t1 - t0)
    trace.fire_to_send_s = (t1 - started) - prepare_s
    for i, duration in enumerate(tool_turns):
        await asyncio.sleep(duration)
        if tool_ready is not None:
            await until(functools.partial(tool_ready, i))
        results = (ToolResult(f"call_{i}", "read_file", output=f"contents {i}"),)
        memory = prefetcher.consume_for_tool_results()
        trace.tool_messages.append(Message.tool(results, reminders=(memory,) if memory else ()))
    await asyncio.sleep(answer_s)
    return trace


def run(coro: Awaitable[T], timeout: float = 15.0) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


async def settle(prefetcher: MemoryPrefetcher, timeout: float = 5.0) -> None:
    """Wait (test-side only) until the pending recall has finished."""
    handle = prefetcher.pending
    if handle is not None:
        await asyncio.wait_for(asyncio.gather(handle.task, return_exceptions=True), timeout)
        await asyncio.sleep(0)
