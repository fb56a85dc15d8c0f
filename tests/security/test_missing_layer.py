"""No silent downgrade (design §11): where a layer cannot be had, status says so, a
speculation stops at ``sandbox_unavailable:<layer>`` and the main chat asks instead of
auto-approving; the command never runs with less containment.

A machine without Landlock is stood in for by a helper and a service a test builds with
``WorkerSeams(broken_layer="landlock")`` (its set-up then fails the way a missing kernel
feature does)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from protocol.wire.seams import WorkerSeams
from tests.coordinator.e2e import Driver
from tests.seams import helper_entry
from tests.support import Env, make_sample_project, needs_containment, running_service
from worker.contain.helper import Request, SandboxHelper
from worker.contain.landlock import abi
from worker.contain.spawn import ContainmentUnavailable

pytestmark = needs_containment("the kernel has no Landlock" if abi() < 1 else None)

MARKER = "ran-without-landlock"
BROKEN = WorkerSeams(broken_layer="landlock")


def test_a_broken_layer_is_reported_and_nothing_runs(tmp_path: Path) -> None:
    helper = SandboxHelper.start(helper_entry(BROKEN))
    try:
        layers = {layer.name: layer for layer in helper.layers}
        assert not layers["landlock"].active
        assert "unavailable" in layers["landlock"].detail
        assert layers["network"].active and layers["filesystem"].active
        planted = tmp_path / "planted"
        with pytest.raises(ContainmentUnavailable) as missing:
            helper.run(
                Request(
                    command=f"echo x > {planted}; true",
                    cwd=str(tmp_path),
                    project=str(tmp_path),
                    timeout_s=10,
                    output_cap=1000,
                    mode="verify",
                )
            )
        assert missing.value.layer == "landlock"
        assert not planted.exists()
    finally:
        helper.close()


def scenario() -> dict[str, Any]:
    listing = {"name": "run_shell_command", "arguments": {"command": f"echo {MARKER}"}}
    return {
        "name": "missing-layer",
        "latency_ms": 1,
        "chunk_ms": 0,
        "models": ["scripted"],
        "rules": [
            {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
            {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
            {
                "when": {"purpose": "suggestion", "prompt_contains": "NEXT."},
                "reply": {"json": {"suggestion": "list the files"}},
            },
            {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}},
            {"when": {"last_user": "hello"}, "reply": {"text": "Hi."}},
            {"when": {"last_user": "go on"}, "reply": {"text": "NEXT."}},
            {"when": {"last_user": "list the files"}, "reply": {"tool_calls": [listing]}},
            {"when": {"last_user": "list them now"}, "reply": {"tool_calls": [listing]}},
            {"when": {"last_tool": "run_shell_command"}, "reply": {"text": "Listed."}},
        ],
    }


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("missing")
    project = make_sample_project(tmp / "project")
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario()))

    def prepare(_env: Env) -> None:
        return None

    with running_service(
        project,
        "--scenario",
        str(path),
        before_start=prepare,
        seams=BROKEN,
    ) as runner:
        driver = Driver(project)
        try:
            yield runner, driver
        finally:
            driver.close()


def test_status_names_the_missing_layer(service: Any) -> None:
    runner, _driver = service
    status = runner.json("status")
    layers = {layer["name"]: layer for layer in status["containment"]}
    assert layers["landlock"]["active"] is False
    assert "unavailable" in layers["landlock"]["detail"]


def test_a_speculation_stops_instead_of_running_with_less(service: Any) -> None:
    _runner, driver = service
    driver.ask("hello")
    driver.ask("go on")
    reply = driver.wait_for_speculation("list the files", ("boundary",), timeout=30)
    assert reply.speculation is not None
    assert reply.speculation.boundary_reason == "sandbox_unavailable:landlock"
    assert reply.speculation.tool_uses == 0


def test_the_main_chat_asks_instead_of_auto_approving(service: Any) -> None:
    runner, _driver = service
    proc = runner.run("ask", "list them now", "--json")
    assert MARKER not in proc.stdout.replace(f"echo {MARKER}", "")  # never ran
    assert '"status":"refused"' in proc.stdout  # asked (no terminal here: refused)
    assert "needs the user's approval (sandbox_unavailable:landlock)" in proc.stdout
