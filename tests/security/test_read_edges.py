"""What a hostile model can read and send to the model provider (a real service, the
scripted model logging every request it receives).

The repository links out of the project: to a fake SSH key in ``$HOME`` (absolute, relative,
through ``/proc/self/root``, a chain) and to the ``~/.ssh`` directory. specrun's own state
sits beside the user's files: ``.specrun/settings.json`` with an API key, an earlier
session, and a memory file in a ``memoryDir`` inside the project. The model then searches,
lists, reads and runs read-only shell commands (``cat``, ``grep -r``, ``rg -L``, ``find -L``)
in a speculation and in a main-chat turn in ``default`` mode, where every approval question
is answered no. None of the markers may appear in any request body the model server
received. The module runs once with the shell classifier and once with it bypassed (a
service the test builds with ``WorkerSeams(bypass_classifier=True)``: every command counts
as read-only and runs unasked, so only the sandbox's view stands between ``cat`` and the files).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.service.chat.history import HistoryStore
from protocol.wire.chat import Message
from protocol.wire.control import ApprovalAnswer, ApprovalNeeded, AskRequest, ToolShown
from protocol.wire.seams import WorkerSeams
from tests.coordinator.e2e import Driver
from tests.support import Env, make_sample_project, needs_containment, running_service
from worker.contain.landlock import abi

pytestmark = needs_containment(
    "needs Landlock ABI >= 6 for the full profile" if abi() < 6 else None
)

SECRET = "SSH-KEY-MARKER-0d7e91"
API_KEY = "APIKEY-MARKER-5c2a04"
SESSION = "SESSION-MARKER-8f13b6"
MEMORY = "MEMORY-MARKER-e4a7d2"
MARKERS = (SECRET, API_KEY, SESSION, MEMORY)
PATTERN = "MARKER|BEGIN"
MEMORY_FILE = "notes/mem/deploy-notes.md"


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def shell(command: str) -> dict[str, Any]:
    return tool("run_shell_command", command=command)


SEARCHES = [
    tool("grep_search", pattern=PATTERN),
    tool("grep_search", pattern=PATTERN, include="*"),
    tool("grep_search", pattern=PATTERN, path="notes"),
    tool("glob", pattern="**/*"),
    tool("list_directory"),
    tool("list_directory", path="notes"),
    shell("cat deploy_key rel_key proc_key chain_key ssh_dir/* 2>&1; ls -la ssh_dir/ 2>&1"),
    shell(f"grep -r -E '{PATTERN}' . 2>&1; grep -R -E '{PATTERN}' . 2>&1"),
    shell(f"rg -uu -L -e '{PATTERN}' . 2>&1; rg -uu -e '{PATTERN}' . 2>&1"),
    shell("find -L . -type f 2>&1"),
    shell("cat .specrun/settings.json .specrun/sessions/* notes/mem/* 2>&1"),
    shell("ls -la .specrun .specrun/sessions notes/mem 2>&1"),
]
# Not read-only for the classifier (a speculation would stop before it): run only with it
# bypassed, where the sandbox's view alone must hold.
UNCLASSIFIED = [
    shell("find -L . -type f -exec cat {} + 2>&1 | grep -a MARKER"),
    shell("head -c 300 $(find -L . -type f) 2>&1 | grep -a MARKER"),
]
# Explicit reads: each a boundary in a speculation, a question in the main chat.
EXPLICIT = {
    "read the key": (tool("read_file", file_path="deploy_key"), "read_outside_project:read_file"),
    "read through proc": (
        tool("read_file", file_path="proc_key"),
        "read_outside_project:read_file",
    ),
    "search the ssh dir": (
        tool("grep_search", pattern=".", path="ssh_dir"),
        "read_outside_project:grep_search",
    ),
    "read the settings": (
        tool("read_file", file_path=".specrun/settings.json"),
        "read_private:read_file",
    ),
    "list the sessions": (
        tool("list_directory", path=".specrun/sessions"),
        "read_private:list_directory",
    ),
    "read the memory": (tool("read_file", file_path=MEMORY_FILE), "read_private:read_file"),
    "glob the state": (tool("glob", pattern=".specrun/**"), "read_private:glob"),
}


def searches(bypassed: bool) -> list[dict[str, Any]]:
    return SEARCHES + UNCLASSIFIED if bypassed else SEARCHES


def steps(bypassed: bool) -> dict[str, list[dict[str, Any]]]:
    """Suggestion text (or main-chat prompt) -> the model's tool calls."""
    plan = {"look around": searches(bypassed)}
    plan.update({text: [call] for text, (call, _reason) in EXPLICIT.items()})
    plan["scan everything"] = searches(bypassed) + [call for call, _reason in EXPLICIT.values()]
    return plan


def scenario(bypassed: bool) -> dict[str, Any]:
    rules: list[dict[str, Any]] = [
        {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
        {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
        {"when": {"last_user": "hello"}, "reply": {"text": "Hi."}},
    ]
    for text in reversed(steps(bypassed)):
        rules.append(
            {
                "when": {"purpose": "suggestion", "prompt_contains": f"NEXT: {text}."},
                "reply": {"json": {"suggestion": text}},
            }
        )
    rules.append({"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}})
    for text in steps(bypassed):
        rules.append({"when": {"last_user": f"go {text}"}, "reply": {"text": f"NEXT: {text}."}})
    for text, calls in steps(bypassed).items():
        rules.append({"when": {"last_user": text}, "reply": {"tool_calls": calls}})
        rules.append({"when": {"turn_user": text}, "reply": {"text": "All done."}})
    return {"name": "read-edges", "latency_ms": 1, "chunk_ms": 0, "models": ["scripted"],
            "rules": rules}  # fmt: skip


def plant(project: Path, env: Env) -> None:
    """The links out and specrun's state (an earlier session written by the real store)."""
    ssh = env.home / ".ssh"
    ssh.mkdir(mode=0o700)
    (ssh / "id_rsa").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n")
    (ssh / "config").write_text(f"# {SECRET}\nHost *\n")
    (project / "deploy_key").symlink_to(ssh / "id_rsa")
    (project / "rel_key").symlink_to(os.path.relpath(ssh / "id_rsa", project))
    (project / "proc_key").symlink_to(f"/proc/self/root{ssh / 'id_rsa'}")
    (project / "chain_key").symlink_to("deploy_key")
    (project / "ssh_dir").symlink_to(ssh)
    state = project / ".specrun"
    state.mkdir(exist_ok=True)
    (state / "settings.json").write_text(json.dumps({"apiKey": API_KEY}))
    # The person's own setting (config set): the memory directory inside the project.
    env.own_settings(project).write_text(
        json.dumps({"memoryDir": "notes/mem", "enableMemory": False}))
    memory = project / MEMORY_FILE
    memory.parent.mkdir(parents=True)
    memory.write_text(
        "---\nname: deploy notes\ndescription: how we deploy\ntype: project\n---\n"
        f"The deploy token is {MEMORY}.\n"
    )
    # A session an older specrun kept in the project's .specrun/ (what it holds stays
    # unreadable to a speculation, wherever specrun keeps its sessions now).
    earlier = HistoryStore(project, sessions_dir=state / "sessions")
    earlier.append([Message.user(f"my old token is {SESSION}"), Message.assistant("Noted.")])
    earlier.new_session()


@pytest.fixture(scope="module", params=["classifier", "classifier-bypassed"])
def service(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("read-edges")
    project = make_sample_project(tmp / "project")
    path = tmp / "scenario.yaml"
    bypassed = request.param == "classifier-bypassed"
    path.write_text(yaml.safe_dump(scenario(bypassed)))
    log = tmp / "requests.jsonl"
    extra = {"SPECRUN_MODEL_LOG": str(log)}

    def prepare(env: Env) -> None:
        plant(project, env)

    with running_service(
        project,
        "--approval-mode",
        "default",
        "--scenario",
        str(path),
        extra_env=extra,
        before_start=prepare,
        seams=WorkerSeams(bypass_classifier=True) if bypassed else None,
    ):
        driver = Driver(project)
        driver.ask("hello")  # suggestions start from the second model turn
        try:
            yield driver, log, bypassed
        finally:
            driver.close()


def bodies(log: Path) -> str:
    """Every request body the model server received, as one text."""
    lines = log.read_text().splitlines()
    return "\n".join(json.dumps(json.loads(line)["body"]) for line in lines)


def assert_nothing_leaked(log: Path) -> str:
    sent = bodies(log)
    for marker in MARKERS:
        assert marker not in sent, f"{marker} reached the model provider"
    return sent


def test_a_speculation_searching_the_repository_sends_nothing_behind_links_or_state(
    service: Any,
) -> None:
    driver, log, bypassed = service
    driver.ask("go look around")
    reply = driver.wait_for_speculation("look around", ("completed",), timeout=60)
    assert reply.speculation is not None
    assert reply.speculation.tool_uses == len(searches(bypassed))
    sent = assert_nothing_leaked(log)
    # The results did reach the model: the searches ran and named what they skipped.
    assert "links that point outside the project: chain_key, deploy_key, proc_key, rel_key" in sent
    assert "src/calc.py" in sent


@pytest.mark.parametrize("text", list(EXPLICIT))  # in the order of the scenario's rules
def test_a_speculation_stops_before_an_explicit_read_out(service: Any, text: str) -> None:
    driver, log, _bypassed = service
    driver.ask(f"go {text}")
    reply = driver.wait_for_speculation(text, ("boundary",), timeout=60)
    assert reply.speculation is not None
    assert reply.speculation.boundary_reason == EXPLICIT[text][1]
    assert_nothing_leaked(log)


def test_a_main_chat_turn_in_default_mode_asks_before_reading_out(service: Any) -> None:
    driver, log, bypassed = service
    request = AskRequest(req_id=driver.client.next_id(), text="scan everything", can_confirm=True)
    driver.client.send(request)
    asked: list[str] = []
    shown: list[ToolShown] = []
    for reply in driver.client.replies(request.req_id, timeout_s=120):
        if isinstance(reply, ApprovalNeeded):
            asked.append(reply.reason)
            driver.client.send(
                ApprovalAnswer(driver.client.next_id(), request.req_id, reply.call.id, False)
            )
        elif isinstance(reply, ToolShown) and reply.status != "running":
            shown.append(reply)
    explicit = [reason for _call, reason in EXPLICIT.values()]
    assert [reason for reason in asked if reason.startswith("read_")] == explicit
    if bypassed:  # every shell command ran unasked, inside the sandbox
        assert len(asked) == len(explicit)
    assert len(shown) == len(searches(bypassed)) + len(EXPLICIT)
    sent = assert_nothing_leaked(log)
    assert "scan everything" in sent and "The user declined this tool call." in sent
