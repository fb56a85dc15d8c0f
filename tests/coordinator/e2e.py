"""Driving a real service from a test through the real control socket."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from coordinator.cli.client import ServiceClient
from protocol.control import (
    AcceptRequest,
    AskRequest,
    ControlReply,
    SuggestionReply,
    SuggestionRequest,
)
from tests.support import REPO

FIX = "fix the failing test in tests/test_calc.py"
NEG = "add a test for negative numbers"
DIFF = "show me the diff"
COMMIT = "commit this"


class Driver:
    def __init__(self, project: Path) -> None:
        self.project = project
        self.client = ServiceClient(project, timeout_s=30)

    def log_tail(self, lines: int = 40) -> str:
        """The end of the service's log, for a failure message."""
        path = self.project / ".specrun" / "logs" / "service.log"
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
    """The demo scenario with ``edit(rules)`` applied, written to ``tmp``."""
    data = yaml.safe_load((REPO / "coordinator" / "scenarios" / "demo.yaml").read_text())
    edit(data["rules"])
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
