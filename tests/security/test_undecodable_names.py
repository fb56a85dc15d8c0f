"""A repository whose file names are not valid UTF-8, against a real service.

Linux names are bytes; Python hands an undecodable byte over as a lone surrogate, which
cannot be encoded as UTF-8 for the coordinator or the model provider. One such name in a
listing or a search used to fail the whole speculation (and the main chat's turn). Every
tool now shows the byte as an escape (``\\xff``) in a quoted name, the speculation goes on,
and the model reads the listing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.coordinator.e2e import (
    Driver,
    rules_scenario,
    shell_call,
    stepped_scenario,
    turn_ended,
)
from tests.support import make_sample_project, running_service

NAME = b"bad\xff\x1b[31mname.txt"
DIRECTORY = b"dir\xfe"
SHOWN = '"bad\\xff\\u001b[31mname.txt"'  # the name as the tools show it, quoted

GIT_STEP = "show the diff"
CALLS: list[dict[str, Any]] = [
    {"name": "list_directory", "arguments": {}},
    {"name": "glob", "arguments": {"pattern": "**/*.txt"}},
    {"name": "grep_search", "arguments": {"pattern": "needle"}},
]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Driver, Path]]:
    tmp = tmp_path_factory.mktemp("undecodable")
    project = make_sample_project(tmp / "project")
    fd = os.open(os.fsencode(project) + b"/" + NAME, os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"needle\n")
    os.close(fd)
    os.mkdir(os.fsencode(project) + b"/" + DIRECTORY)
    Path(os.fsdecode(os.fsencode(project) + b"/" + DIRECTORY + b"/inner.txt")).write_text(
        "needle\n"
    )
    # A filter git would run, named in bytes that are not UTF-8: the boundary names it.
    (project / ".gitattributes").write_bytes(b"*.py filter=ev\xffil\n")
    steps = {"list the files": CALLS, GIT_STEP: [shell_call("git diff")]}
    scenario = stepped_scenario("undecodable", steps, lambda _text: {"text": "Listed."})
    path = rules_scenario(tmp, scenario["rules"])
    log = tmp / "requests.jsonl"
    with running_service(project, "--approval-mode", "default", "--scenario", str(path),
                         extra_env={"SPECRUN_MODEL_LOG": str(log)}):
        driver = Driver(project)
        driver.ask("hello")
        try:
            yield driver, log
        finally:
            driver.close()


def tool_results(log: Path) -> str:
    bodies = [json.loads(line)["body"] for line in log.read_text().splitlines()]
    return "\n".join(
        json.loads(message["content"]).get("output", "")
        for body in bodies
        if isinstance(body, dict)
        for message in body.get("messages") or []
        if message.get("role") == "tool"
    )


def test_a_speculation_lists_and_searches_names_that_are_not_utf8(
    service: tuple[Driver, Path],
) -> None:
    driver, log = service
    driver.ask("go list the files")
    reply = driver.wait_for_speculation("list the files", ("completed", "failed"), timeout=60)
    assert reply.speculation is not None
    assert reply.speculation.status == "completed", driver.log_tail()
    assert reply.speculation.tool_uses == len(CALLS)
    sent = tool_results(log)
    assert sent.count(SHOWN) >= len(CALLS)
    assert '"dir\\xfe/inner.txt"' in sent


def test_a_main_chat_turn_lists_them_too(service: tuple[Driver, Path]) -> None:
    driver, log = service
    ended = turn_ended(driver.ask("list the files now"))  # not the suggestion: a turn
    assert ended.reason == "completed", driver.log_tail()
    assert tool_results(log).count(SHOWN) >= 2 * len(CALLS)


def test_a_boundary_naming_such_bytes_is_a_boundary(service: tuple[Driver, Path]) -> None:
    driver, _log = service
    driver.ask(f"go {GIT_STEP}")
    reply = driver.wait_for_speculation(GIT_STEP, ("boundary", "failed"), timeout=60)
    assert reply.speculation is not None and reply.speculation.boundary is not None
    assert reply.speculation.boundary.code == "git_config", driver.log_tail()
    assert "filter=ev\\xffil" in reply.speculation.boundary.detail
