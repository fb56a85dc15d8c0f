"""Driving a real service from a test through the real control socket."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from coordinator.cli.client import ServiceClient
from coordinator.user_state import project_state_path
from protocol.wire.control import (
    AcceptRequest,
    AskRequest,
    ControlReply,
    SuggestionReply,
    SuggestionRequest,
    TurnEnded,
)
from tests.support import Env, Specrun, demo_scenario_data, make_sample_project, running_service

FIX = "fix the failing test in tests/test_calc.py"
NEG = "add a test for negative numbers"
DIFF = "show me the diff"
COMMIT = "commit this"
TIDY = "tidy the project"  # creates, modifies, deletes, changes a mode, writes a runs-later file
STALL = "write the notes slowly"  # still running while a test looks at it


def turn_ended(replies: list[Any]) -> TurnEnded:
    """The end of a turn's replies, which must be its TurnEnded."""
    assert isinstance(replies[-1], TurnEnded), replies[-1]
    return replies[-1]


class Driver:
    def __init__(self, project: Path) -> None:
        self.project = project
        self.client = ServiceClient(project, timeout_s=30)

    @property
    def log_path(self) -> Path:
        """The service's log (its state directory is the test run's: see
        ``tests.support.SHARED_STATE_HOME``)."""
        return project_state_path(self.project, "logs", "service.log")

    def log_tail(self, lines: int = 40) -> str:
        """The end of the service's log, for a failure message."""
        path = self.log_path
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no service log: {exc})"

    def close(self) -> None:
        self.client.close()

    def stream(self, request: Any) -> list[ControlReply]:
        self.client.send(request)
        return list(self.client.replies(request.req_id, timeout_s=60))

    def ask(self, text: str) -> list[ControlReply]:
        return self.stream(AskRequest(req_id=self.client.next_id(), text=text))

    def accept(self, method: str = "tab") -> list[ControlReply]:
        return self.stream(AcceptRequest(req_id=self.client.next_id(), method=method))  # type: ignore[arg-type]

    def suggestion(self, wait: bool = False) -> SuggestionReply:
        reply = self.client.request(
            SuggestionRequest(req_id=self.client.next_id(), wait_visible=wait)
        )
        assert isinstance(reply, SuggestionReply), reply
        return reply

    def wait_for_speculation(
        self, text: str, statuses: tuple[str, ...], timeout: float = 20
    ) -> SuggestionReply:
        deadline = time.monotonic() + timeout
        last: SuggestionReply | None = None
        while time.monotonic() < deadline:
            last = self.suggestion()
            if (
                last.text == text
                and last.speculation is not None
                and last.speculation.status in statuses
            ):
                return last
            time.sleep(0.02)
        raise AssertionError(
            f"speculation of {text!r} never reached {statuses}: {last}\n"
            f"service log:\n{self.log_tail()}"
        )


def scenario_variant(tmp: Path, edit: Any) -> Path:
    """The demo scenario (at test pace: ``demo_scenario_data``) with ``edit(rules)``
    applied, written to ``tmp``."""
    data = demo_scenario_data()
    edit(data["rules"])
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def rules_scenario(tmp: Path, rules: list[dict[str, Any]]) -> Path:
    """A scenario of just ``rules`` at 1 ms a reply, written to ``tmp``."""
    path = tmp / "scenario.json"
    path.write_text(json.dumps({"name": "t", "latency_ms": 1, "chunk_ms": 1, "rules": rules}))
    return path


def start_playing(specrun: Specrun, scenario: Path, **settings: Any) -> None:
    """``specrun start`` (edits approved automatically) with the model playing ``scenario``
    and the project's other ``settings``."""
    path = specrun.env.own_settings(specrun.project)
    path.write_text(json.dumps({"scenario": str(scenario), **settings}))
    specrun.run("start", "--approval-mode", "auto-edit", check=True)


# -- scenarios played step by step ----------------------------------------------------------
#
# A "stepped" scenario: `go STEP` makes the model announce `NEXT: STEP.`, the suggestion
# after that turn is STEP, and STEP (speculated or typed) runs its tool calls, then ends
# with the reply ``after(STEP)`` gives. The history keeps every earlier announcement, so
# the newest step's suggestion rule must come first: tests play the steps in order.


def shell_call(command: str) -> dict[str, Any]:
    return {"name": "run_shell_command", "arguments": {"command": command}}


def write_call(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"file_path": path, "content": content}}


def stepped_scenario(
    name: str,
    steps: dict[str, list[dict[str, Any]]],
    after: Callable[[str], dict[str, Any]],
    *,
    anchored: bool = False,
) -> dict[str, Any]:
    """The scenario as a dict (``anchored``: user texts matched whole, ``^…$``)."""

    def whole(text: str) -> str:
        return f"^{text}$" if anchored else text

    rules: list[dict[str, Any]] = [
        {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
        {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
        {"when": {"last_user": whole("hello")}, "reply": {"text": "Hi."}},
    ]
    for text in reversed(steps):
        rules.append(
            {
                "when": {"purpose": "suggestion", "prompt_contains": f"NEXT: {text}."},
                "reply": {"json": {"suggestion": text}},
            }
        )
    rules.append({"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}})
    for text in steps:
        rules.append(
            {"when": {"last_user": whole(f"go {text}")}, "reply": {"text": f"NEXT: {text}."}}
        )
    for text, calls in steps.items():
        rules.append({"when": {"last_user": whole(text)}, "reply": {"tool_calls": calls}})
        rules.append({"when": {"turn_user": whole(text)}, "reply": after(text)})
    return {"name": name, "latency_ms": 1, "chunk_ms": 0, "models": ["scripted"], "rules": rules}


def done_unless_stalled(text: str) -> dict[str, Any]:
    """The model's answer after a step's tool calls; the STALL step's never comes in time."""
    if text == STALL:
        return {"text": "Done.", "latency_ms": 600_000}
    return {"text": "Done."}


def tidy_project(root: Path) -> Path:
    """A git repository of the sample project with what the TIDY step changes beyond its
    files (a script to make executable, a test to delete), shell speculation on."""
    project = make_sample_project(root, git=False)
    (project / "tools").mkdir()
    (project / "tools/run.sh").write_text("#!/bin/sh\necho run\n")
    (project / "tests/old_test.py").write_text("def test_old():\n    pass\n")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    return project


def shell_speculation(project: Path) -> Callable[[Env], None]:
    """``running_service``'s ``before_start``: the person turned shell speculation on."""
    return lambda env: env.own_settings(project).write_text('{"speculateShell": true}\n')


@contextlib.contextmanager
def driven_service(
    project: Path, scenario: Path, before_start: Callable[[Env], None] | None = None
) -> Iterator[tuple[Specrun, Driver, Path]]:
    """A service on ``project`` playing ``scenario`` (auto-edit), a ``Driver`` on it that
    has said "hello" (a one-turn conversation gets no suggestion), and the project."""
    with running_service(project, "--approval-mode", "auto-edit", "--scenario", str(scenario),
                         before_start=before_start) as runner:
        driver = Driver(project)
        try:
            driver.ask("hello")
            yield runner, driver, project
        finally:
            driver.close()
