"""Bad input through the CLI and a real service: malformed settings, scenario and memory
files, huge tool outputs, binary files, paths with newlines and unicode.

Every case must end in one clear sentence (no traceback) or a normal answer, with nothing
lost: the offending file is left as it was, no process stays behind, the service keeps
answering, the history loads, and files written through a speculation arrive byte for
byte under their exact names.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.cli.client import ServiceClient
from coordinator.service.chat.history import HistoryStore
from protocol.wire.control import (
    AskRequest,
    ErrorReply,
    StatusReply,
    StatusRequest,
    ToolShown,
    Transcript,
    TurnEnded,
)
from tests.coordinator.e2e import Driver
from tests.support import (
    Env,
    Specrun,
    make_sample_project,
    processes_with_env,
    running_service,
    wait_until,
)

# --------------------------------------------------------------------------- CLI only


def _assert_one_clear_error(proc: subprocess.CompletedProcess[str], *mentions: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    assert proc.stderr.lstrip().startswith("error:"), proc.stderr
    for text in mentions:
        assert text in proc.stderr, (text, proc.stderr)


BAD_SETTINGS: dict[str, tuple[bytes, str]] = {
    "not JSON": (b'{"model": "x",', "not valid JSON"),
    "not an object": (b"[1, 2]", "JSON object"),
    "unknown key": (b'{"modle": "x"}', "modle"),
    "wrong type": (b'{"workerPool": "many"}', "workerPool"),
    "bad approval mode": (b'{"approvalMode": "turbo"}', "approvalMode"),
    "not UTF-8": (b'\xff\xfe{"model": "x"}', "UTF-8"),
    "binary junk": (bytes(range(256)) * 40, "settings.json"),
}


@pytest.mark.parametrize("case", sorted(BAD_SETTINGS))
def test_a_malformed_settings_file_is_one_clear_sentence_and_is_left_alone(
    case: str, specrun: Specrun, env: Env
) -> None:
    content, mention = BAD_SETTINGS[case]
    path = specrun.env.own_settings(specrun.project)
    path.write_bytes(content)
    proc = specrun.run("start")
    _assert_one_clear_error(proc, str(path), mention)
    assert path.read_bytes() == content
    assert not processes_with_env(env.runtime)
    # The same file in the user's home is reported with that path.
    path.unlink()
    home = env.home / ".specrun" / "settings.json"
    home.parent.mkdir(parents=True, exist_ok=True)
    home.write_bytes(content)
    _assert_one_clear_error(specrun.run("config", "show"), str(home), mention)
    assert home.read_bytes() == content


BAD_SCENARIOS: dict[str, tuple[bytes, str]] = {
    "wrong type": (
        b"rules:\n  - when: {purpose: main}\n    reply: {text: 5}\n",
        "rules[0].reply.text",
    ),
    "yaml syntax": (b"rules: [\n", "YAML syntax error"),
    "unknown field": (b"rules:\n  - reply: {txt: hi}\n", "txt"),
    "bad regex": (
        b"rules:\n  - when: {last_user: '(('}\n    reply: {text: hi}\n",
        "regular expression",
    ),
    "bad purpose": (b"rules:\n  - when: {purpose: lunch}\n    reply: {text: hi}\n", "purpose"),
    "empty": (b"", "empty"),
    "binary": (bytes(range(256)) * 8, "scenario"),
    "a list": (b"- 1\n- 2\n", "mapping"),
}


@pytest.mark.parametrize("case", sorted(BAD_SCENARIOS))
def test_a_malformed_scenario_is_one_clear_error_naming_file_and_field(
    case: str, specrun: Specrun, env: Env, tmp_path: Path
) -> None:
    content, mention = BAD_SCENARIOS[case]
    bad = tmp_path / f"bad {case}.yaml"
    bad.write_bytes(content)
    proc = specrun.run("start", "--scenario", str(bad))
    _assert_one_clear_error(proc, f"scenario {bad}", mention)
    assert bad.read_bytes() == content
    assert wait_until(lambda: not processes_with_env(env.runtime), timeout=5)
    served = specrun.run("model", "serve", "--scenario", str(bad), "--port", "0", timeout=20)
    _assert_one_clear_error(served, f"scenario {bad}", mention)


def test_a_failed_start_reports_its_own_error_not_an_earlier_one(
    specrun: Specrun, tmp_path: Path
) -> None:
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text("rules:\n  - reply: {text: 5}\n")
    second.write_text("rules: [\n")
    _assert_one_clear_error(specrun.run("start", "--scenario", str(first)), "first.yaml")
    proc = specrun.run("start", "--scenario", str(second))
    _assert_one_clear_error(proc, "second.yaml")
    assert "first.yaml" not in proc.stderr, proc.stderr
    missing = tmp_path / "missing.yaml"
    proc = specrun.run("start", "--scenario", str(missing))
    _assert_one_clear_error(proc, "missing.yaml")
    assert "second.yaml" not in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- a real service

BIG_LINES = 1_000_000  # ~ 12 MB: over read_file's 10 MB whole-file limit
# Odd but legal names. A name with a newline, a tab or another control character is
# never created by a speculation (bad_path: tests/worker/test_gate.py, tests/security/).
ODD_FILES: dict[str, str] = {
    "odd/ünïcødé 文件.md": "# 文件\n\nçà et là 🎉\n",
    "odd/ leading and trailing .txt": "spaces\n",
    "odd/-starts-with-dash.txt": "dash\n",
    "odd/nul.txt": "before\u0000after\n",
    "odd/🎉/deep/ß.txt": "deep\n",
}


def _scenario() -> dict[str, Any]:
    def query(name: str, calls: list[dict[str, Any]], last_tool: str) -> list[dict[str, Any]]:
        return [
            {
                "name": f"{name}: answer",
                "when": {"purpose": "main", "turn_user": f"^{name}$", "last_tool": last_tool},
                "reply": {"text": f"Done: {name}."},
            },
            {
                "name": name,
                "when": {"purpose": "main", "last_user": f"^{name}$"},
                "reply": {"tool_calls": calls},
            },
        ]

    writes = [
        {"name": "write_file", "arguments": {"file_path": rel, "content": text}}
        for rel, text in ODD_FILES.items()
    ]
    rules: list[dict[str, Any]] = [
        {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
        {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
        {
            "when": {"purpose": "suggestion", "prompt_contains": "Done: prepare odd files."},
            "times": 1,
            "reply": {"json": {"suggestion": "write the odd files"}},
        },
        {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}},
        {
            "when": {
                "purpose": "speculation",
                "turn_user": "^write the odd files$",
                "last_tool": "write_file",
            },
            "reply": {"text": "Wrote the odd files."},
        },
        {
            "when": {"purpose": "speculation", "last_user": "^write the odd files$"},
            "reply": {"tool_calls": writes},
        },
        *query(
            "read the big file",
            [
                {"name": "read_file", "arguments": {"file_path": "big.txt"}},
                {
                    "name": "read_file",
                    "arguments": {"file_path": "big.txt", "offset": 500_000, "limit": 3},
                },
                {"name": "grep_search", "arguments": {"pattern": "row 14999[0-9]"}},
            ],
            "read_file",
        ),
        *query(
            "search the big file",
            [{"name": "grep_search", "arguments": {"pattern": "line 99999[0-9]"}}],
            "grep_search",
        ),
        *query(
            "print many numbers",
            [
                {"name": "run_shell_command", "arguments": {"command": "seq 1 3000000"}},
                {"name": "run_shell_command", "arguments": {"command": "cat big.txt big.txt"}},
            ],
            "run_shell_command",
        ),
        *query(
            "read the long line",
            [
                {"name": "read_file", "arguments": {"file_path": "longline.txt"}},
            ],
            "read_file",
        ),
        *query(
            "read the binary file",
            [
                {"name": "read_file", "arguments": {"file_path": "data.bin"}},
                {"name": "grep_search", "arguments": {"pattern": "needle"}},
                {"name": "run_shell_command", "arguments": {"command": "cat data.bin"}},
            ],
            "read_file",
        ),
        *query(
            "read the odd names",
            [
                {"name": "read_file", "arguments": {"file_path": "weird/name\nwith newline.txt"}},
                {"name": "list_directory", "arguments": {"path": "weird"}},
                {"name": "glob", "arguments": {"pattern": "weird/*"}},
            ],
            "read_file",
        ),
        *query(
            "prepare odd files",
            [
                {"name": "read_file", "arguments": {"file_path": "README.md"}},
            ],
            "read_file",
        ),
        {"default": {"text": "Noted."}},
    ]
    return {"name": "bad input", "latency_ms": 0, "chunk_ms": 0, "rules": rules}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Specrun]:
    tmp = tmp_path_factory.mktemp("badinput")
    scenario = tmp / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(_scenario(), allow_unicode=True, sort_keys=False))
    project = make_sample_project(tmp / "proj ü 文件")
    (project / "big.txt").write_text("".join(f"line {i}\n" for i in range(BIG_LINES)))
    (project / "medium.txt").write_text("".join(f"row {i}\n" for i in range(150_000)))
    (project / "longline.txt").write_text("x" * 900_000 + "\n")
    (project / "data.bin").write_bytes(bytes(range(256)) * 64 + b"needle" + os.urandom(4096))
    weird = project / "weird"
    weird.mkdir()
    (weird / "name\nwith newline.txt").write_text("found me\n")
    (weird / "ünï 文件.txt").write_text("unicode\n")
    memory = project / ".specrun" / "memory"
    memory.mkdir(parents=True)
    (memory / "good.md").write_text(
        "---\nname: good\ndescription: pytest tips\ntype: project\n---\nUse pytest -q.\n"
    )
    (memory / "plain.md").write_text("no front matter at all\n")
    (memory / "bad-yaml.md").write_text("---\nname: [unclosed\n---\nbody\n")
    (memory / "alien.md").write_text("---\nname: a\ndescription: b\ntype: alien\n---\n")
    (memory / "binary.md").write_bytes(os.urandom(3000))
    (memory / "latin1.md").write_bytes(b"---\nname: caf\xe9\ndescription: d\ntype: user\n---\n")
    (memory / "dir.md").mkdir()
    (memory / "loop.md").symlink_to("loop.md")
    (memory / "MEMORY.md").write_bytes(b"index \xff\xfe\n" + b"- line\n" * 1000)
    with running_service(
        project, "--approval-mode", "auto-edit", "--scenario", str(scenario),
        before_start=lambda env: Specrun(project, env).trust(),
    ) as runner:
        yield runner


@pytest.fixture(scope="module")
def driver(served: Specrun) -> Iterator[Driver]:
    d = Driver(served.project)
    yield d
    d.close()


def _turn(driver: Driver, text: str) -> tuple[list[ToolShown], TurnEnded]:
    replies = driver.ask(text)
    end = replies[-1]
    assert isinstance(end, TurnEnded) and end.reason == "completed", end
    tools = [r for r in replies if isinstance(r, ToolShown) and r.status != "running"]
    for shown in tools:
        assert len(shown.result) <= 500 and len(shown.args) <= 1000, shown
    return tools, end


def _healthy(served: Specrun) -> None:
    with ServiceClient(served.project, timeout_s=5) as client:
        started = time.monotonic()
        reply = client.request(StatusRequest(req_id=client.next_id()), timeout_s=1.0)
        assert isinstance(reply, StatusReply) and time.monotonic() - started < 1.0
    sessions = served.env.state_dir(served.project, "sessions")
    HistoryStore(served.project, sessions_dir=sessions).load()
    total = sum(p.stat().st_size for p in sessions.glob("*.jsonl"))
    assert total < 4 * 1024 * 1024, f"history grew to {total:,} bytes"


def test_broken_memory_files_are_skipped_and_left_alone(served: Specrun, driver: Driver) -> None:
    memory = served.project / ".specrun" / "memory"
    before = {
        p.name: p.read_bytes() for p in memory.iterdir() if p.is_file() and not p.is_symlink()
    }
    listed = served.json("memory", "list")
    assert [m["name"] for m in listed["memories"]] == ["good"]
    _turn(driver, "what do the memories say")
    after = {p.name: p.read_bytes() for p in memory.iterdir() if p.is_file() and not p.is_symlink()}
    assert after == before
    _healthy(served)


def test_huge_tool_outputs_are_cut_and_the_service_keeps_going(
    served: Specrun, driver: Driver
) -> None:
    big = served.project / "big.txt"
    size = big.stat().st_size
    tools, _ = _turn(driver, "read the big file")
    assert [t.name for t in tools] == ["read_file", "read_file", "grep_search"]
    assert tools[0].status == "error" and "limit" in tools[0].result, tools[0]
    assert tools[1].status == "success" and "line 499999" in tools[1].result, tools[1]
    assert tools[2].status == "success" and "row 149999" in tools[2].result, tools[2]
    tools, _ = _turn(driver, "print many numbers")
    assert tools and all(t.status == "success" for t in tools), tools
    _turn(driver, "read the long line")
    assert big.stat().st_size == size
    _healthy(served)


def test_a_search_that_skips_a_file_too_big_to_search_says_so(
    served: Specrun, driver: Driver
) -> None:
    tools, _ = _turn(driver, "search the big file")
    assert "line 999999" in tools[0].result or "big.txt" in tools[0].result, tools[0]


def test_a_binary_file_gets_a_clear_tool_answer(served: Specrun, driver: Driver) -> None:
    tools, _ = _turn(driver, "read the binary file")
    read = tools[0]
    assert read.status == "error" and "binary" in read.result.lower(), read
    _healthy(served)


def test_paths_with_newlines_and_unicode_are_read_and_listed(
    served: Specrun, driver: Driver
) -> None:
    tools, _ = _turn(driver, "read the odd names")
    assert tools[0].status == "success" and "found me" in tools[0].result, tools[0]
    assert "ünï 文件.txt" in tools[1].result, tools[1]
    _healthy(served)


def test_a_speculation_writes_odd_names_and_accept_lands_them_byte_for_byte(
    served: Specrun, driver: Driver
) -> None:
    _turn(driver, "prepare odd files")
    ready = driver.wait_for_speculation("write the odd files", ("completed", "boundary", "failed"))
    assert ready.speculation is not None and ready.speculation.status == "completed", ready
    reported = served.json("suggestion")
    assert sorted(reported["speculation"]["files_written"]) == sorted(ODD_FILES)
    for rel in ODD_FILES:
        assert not (served.project / rel).exists()
    replies = driver.accept()
    end = replies[-1]
    assert isinstance(end, TurnEnded) and end.reason == "accepted", replies
    transcript = next(r for r in replies if isinstance(r, Transcript))
    assert sorted(transcript.files) == sorted(ODD_FILES)
    for rel, text in ODD_FILES.items():
        assert (served.project / rel).read_bytes() == text.encode(), rel
    leftovers = [p for p in served.project.rglob("*") if ".specrun-" in p.name]
    assert leftovers == []
    _healthy(served)


def test_queries_with_newlines_unicode_and_control_characters_survive_the_round_trip(
    served: Specrun, driver: Driver
) -> None:
    text = "line one\nline two ünïcødé 文件 🎉 \x1b[31mred\x1b[0m \u202e tab\there \x00 nul"
    driver.ask(text)
    with ServiceClient(served.project, timeout_s=10) as client:
        request = AskRequest(req_id=client.next_id(), text="x" * 1_000_000)
        client.send(request)
        end = list(client.replies(request.req_id, timeout_s=60))[-1]
        assert isinstance(end, TurnEnded | ErrorReply), end
    # Every message stays on disk; the million-character query may have compacted the
    # view before it (it alone is far over the default context window).
    history = HistoryStore(served.project).load_report().full_messages
    assert any(m.role == "user" and m.text == text for m in history)
    proc = served.run("ask", "--json", "ünïcødé\nsecond line 文件")
    assert proc.returncode == 0, proc.stderr
    printed = [line for line in proc.stdout.splitlines() if line.strip()]
    assert printed and all(json.loads(line) for line in printed)
    _healthy(served)
