"""Every `specrun` command through a real subprocess: `--json` parsed and checked, exit codes,
and help texts with an example."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import httpx
import psutil
import pytest
from click.testing import CliRunner

from coordinator.cli.app import cli
from protocol.wire.control import StatusRequest, SuggestionRequest, WorkersRequest
from tests.support import Env, Specrun, make_sample_project, running_service, wait_until
from worker.contain.backstop import unavailable as backstop_unavailable

FIX = "fix the failing test in tests/test_calc.py"
NEG = "add a test for negative numbers"


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's path; through list/get_command, as click's help and dispatch see a
    group whose commands are imported on first use."""
    out: list[tuple[str, ...]] = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        path = (*prefix, name)
        if isinstance(command, click.Group):
            out += _commands(command, path)
        else:
            out.append(path)
    return out


ALL_COMMANDS = _commands(cli)


def test_the_command_set_is_complete() -> None:
    names = {" ".join(c) for c in ALL_COMMANDS}
    for expected in ("start", "serve", "stop", "status", "ask", "suggestion", "accept", "reject",
                     "reset", "workers", "stats", "logs", "memory list", "memory show",
                     "memory add", "explain-shell", "config show", "config set", "model serve",
                     "chat", "demo", "debug kill-worker", "web"):
        assert expected in names


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=" ".join)
def test_every_command_has_help_with_an_example(command: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output


def test_every_reporting_command_takes_json() -> None:
    reporting = {"start", "stop", "status", "ask", "suggestion", "accept", "reject", "reset",
                 "workers", "stats", "logs", "memory list", "memory show", "memory add",
                 "explain-shell", "config show", "config set", "demo", "debug kill-worker"}
    for command in ALL_COMMANDS:
        if " ".join(command) in reporting:
            result = CliRunner().invoke(cli, [*command, "--help"])
            assert "--json" in result.output, command


def test_usage_errors_exit_2(specrun: Specrun) -> None:
    for args in (("ask",), ("no-such-command",), ("debug", "kill-worker"), ("explain-shell",),
                 ("status", "--bogus")):
        proc = specrun.run(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_no_service_exits_2_with_a_sentence(specrun: Specrun) -> None:
    for args in (("status",), ("workers",), ("suggestion",), ("accept",), ("ask", "hi"),
                 ("stats", "--json"), ("stop",)):
        proc = specrun.run(*args)
        assert proc.returncode == 2, args
        assert "specrun start" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stdout == ""


def _lines(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def _wait_completed(service: Specrun, text: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def completed() -> bool:
        found.update(service.query(SuggestionRequest))
        spec = found.get("speculation") or {}
        return bool(found.get("text") == text and spec.get("status") == "completed")

    assert wait_until(completed, timeout=20), found
    return found


def test_a_whole_session_with_json(service: Specrun) -> None:
    started = service.json("start")
    assert started["started"] is False and started["already_running"] is True
    assert started["log"].endswith("service.log")

    status = service.json("status")
    assert status["type"] == "status"
    assert status["approval_mode"] == "auto-edit" and status["scripted_model"] is True

    workers = service.json("workers")
    assert workers["type"] == "workers" and workers["workers"]
    # the main chat's kernel backstop is a reported layer, active where it can run here,
    # else inactive with its reason (no silent downgrade)
    why = backstop_unavailable()
    for layers in (status["containment"], workers["workers"][0]["containment"]):
        backstop = next(layer for layer in layers if layer["name"] == "chat_backstop")
        assert backstop["active"] is (why is None), backstop
        assert (why or "read-only") in backstop["detail"]
    assert {"pid", "state", "job_id", "overlay_dir", "age_s", "rss_bytes", "sandbox"} <= set(
        workers["workers"][0])

    asked = service.run("ask", FIX, "--json")
    assert asked.returncode == 0, asked.stderr
    events = _lines(asked)
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "turn_ended" and events[-1]["reason"] == "completed"
    assert "text" in kinds and "tool" in kinds
    tools = [e for e in events if e["type"] == "tool"]
    assert {t["status"] for t in tools} == {"running", "success"}
    assert {t["name"] for t in tools} == {"read_file", "edit"}
    assert all(e["req_id"] == events[0]["req_id"] for e in events)

    waited = service.json("suggestion", "--wait")
    assert waited["type"] == "suggestion" and waited["text"] == NEG and waited["visible"]
    spec = _wait_completed(service, NEG)["speculation"]
    assert spec["files_written"] == ["tests/test_calc_negative.py"]
    assert not (service.project / "tests/test_calc_negative.py").exists()

    accepted = service.run("accept", "--json")
    assert accepted.returncode == 0, accepted.stderr
    events = _lines(accepted)
    transcript = next(e for e in events if e["type"] == "transcript")
    assert transcript["files"] == ["tests/test_calc_negative.py"]
    assert transcript["entries"][0] == {"kind": "user", "text": NEG, "tool": "", "args": "",
                                        "status": "", "exit_code": None, "diff": "", "path": ""}
    written = next(e for e in transcript["entries"] if e["tool"] == "write_file")
    assert written["path"] == "tests/test_calc_negative.py"
    assert "+    assert add(-2, -3) == -5" in written["diff"].splitlines()
    assert events[-1]["type"] == "turn_ended" and events[-1]["reason"] == "accepted"
    assert events[-1]["speculated"] is True
    assert (service.project / "tests/test_calc_negative.py").exists()

    # the pipelined suggestion is next; reject it and its worker is killed
    nxt = _wait_completed(service, "show me the diff")
    pid = nxt["speculation"]["worker_pid"]
    rejected = service.json("reject")
    assert rejected == {"type": "ok", "req_id": rejected["req_id"], "message": "dismissed"}
    assert service.json("suggestion")["text"] is None
    assert wait_until(lambda: not _alive(pid), timeout=5)

    stats = service.json("stats")
    assert stats["type"] == "stats"
    assert stats["suggestions_accepted"] == 1 and stats["accepted_by_method"] == {"cli": 1}
    assert stats["suggestions_ignored"] == 1
    assert stats["speculations_completed"] == 2
    assert len(stats["time_saved_s"]) == 1 and stats["time_saved_total_s"] > 0

    no_suggestion = service.run("accept")
    assert no_suggestion.returncode == 1 and "no suggestion" in no_suggestion.stderr
    as_json = service.run("accept", "--json")
    assert as_json.returncode == 1
    assert _lines(as_json)[-1]["type"] == "error" and _lines(as_json)[-1]["code"] == "not_found"
    not_a_worker = service.run("debug", "kill-worker", "1", "--json")
    assert not_a_worker.returncode == 1 and _lines(not_a_worker)[0]["type"] == "error"
    assert "not a worker" in not_a_worker.stderr

    reset = service.json("reset")
    assert reset["type"] == "ok" and reset["message"].startswith("new session")
    assert service.json("status")["session_id"] != status["session_id"]

    logs = service.json_lines("logs", "-n", "5")
    assert 0 < len(logs) <= 5 and all(set(line) == {"line"} for line in logs)

    victim = service.json("workers")["workers"][0]["pid"]
    killed = service.json("debug", "kill-worker", str(victim))
    assert killed["type"] == "ok" and str(victim) in killed["message"]

    stopped = service.json("stop")
    assert stopped == {"stopped": True, "pid": status["pid"]}


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Specrun]:
    """One service (auto-edit mode, scripted model) for the two tests below, which do not
    stop it (the first one needs it fresh: it starts from the sample project as committed)."""
    project = make_sample_project(tmp_path_factory.mktemp("cli") / "proj")
    with running_service(project, "--approval-mode", "auto-edit") as runner:
        yield runner


def test_human_output_shows_tools_and_the_accept_summary(shared: Specrun) -> None:
    service = shared
    asked = service.run("ask", FIX, check=True)
    assert "read_file(file_path: tests/test_calc.py)" in asked.stdout
    assert "Fixed `add` in src/calc.py" in asked.stdout
    assert "done in" in asked.stdout and "3 tool calls" in asked.stdout
    _wait_completed(service, NEG)
    shown = service.run("suggestion", check=True).stdout
    assert NEG in shown and "completed" in shown
    accepted = service.run("accept", check=True).stdout
    assert f"❯ {NEG}" in accepted
    assert "2 tool calls" in accepted  # the tool group box
    assert "write_file tests/test_calc_negative.py" in accepted  # its file, then its lines
    assert "+def test_add_negative_numbers():" in accepted
    assert "✓ accepted in" in accepted and "1 file applied" in accepted and "saved" in accepted
    stats = service.run("stats", check=True).stdout
    assert "time saved" in stats


def test_logs_follow_stops_cleanly_on_ctrl_c(shared: Specrun) -> None:
    service = shared
    # An idle worker of a warm pool, named: its death is a line that names it, whatever
    # earlier tests left (a refill under way, a speculation holding a worker).
    idle: list[int] = []

    def warm_with_an_idle_worker() -> bool:
        status = service.query(StatusRequest)
        idle[:] = [w["pid"] for w in status["workers"] if w["state"] == "idle"]
        return bool(status["pool_warm"] and idle)

    assert wait_until(warm_with_an_idle_worker, timeout=30), "the pool never had an idle worker"
    with service.follow("logs", "-f", "-n", "1") as logs:
        lines = logs.lines
        assert lines.get(timeout=30).strip()  # the tail is printed first
        service.run("debug", "kill-worker", str(idle[0]), check=True)
        deadline = time.monotonic() + 30
        followed: list[str] = []
        while True:  # followed: the death of that worker arrives as a new line
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line names worker {idle[0]}: {followed}") from None
            followed.append(line)
            if f"worker {idle[0]}" in line:
                break
        logs.proc.send_signal(signal.SIGINT)
        assert logs.proc.wait(timeout=10) == 0


def test_logs_without_a_log_is_a_clear_error(specrun: Specrun) -> None:
    proc = specrun.run("logs")
    assert proc.returncode == 1
    assert "no service log" in proc.stderr and "specrun start" in proc.stderr


def test_memory_add_list_show(specrun: Specrun) -> None:
    added = specrun.run("memory", "add", "pytest style", "-d", "tests use plain asserts",
                        "-t", "feedback", "--json", input="Use plain `assert`, no unittest.\n")
    assert added.returncode == 0, added.stderr
    doc = json.loads(added.stdout)
    assert doc["name"] == "pytest style" and doc["type"] == "feedback"
    assert doc["scope"] == "project" and Path(doc["path"]).is_file()
    assert "plain `assert`" in doc["body"]

    listed = specrun.json("memory", "list")
    assert [m["name"] for m in listed["memories"]] == ["pytest style"]
    assert listed["project_dir"] == str(specrun.project.resolve() / ".specrun" / "memory")
    assert listed["skipped"] == []
    # a file written by hand without a type: recall ignores it, and `memory list` says why
    hand = Path(listed["project_dir"]) / "by-hand.md"
    hand.write_text("---\nname: by hand\ndescription: no type given\n---\nbody\n")
    listed = specrun.json("memory", "list")
    assert listed["skipped"] == [{"file": str(hand), "why": "its front matter has no 'type'"}]
    human = specrun.run("memory", "list", check=True).stdout
    assert "not a memory" in " ".join(human.split()) and "by-hand.md" in human
    hand.unlink()

    shown = specrun.json("memory", "show", "pytest style")
    assert shown["description"] == "tests use plain asserts"
    human = specrun.run("memory", "show", "pytest-style", check=True).stdout
    assert "pytest style" in human and "plain `assert`" in human

    again = specrun.run("memory", "add", "pytest style", "-d", "x", "--body", "y")
    assert again.returncode == 1 and "already exists" in again.stderr

    missing = specrun.run("memory", "show", "nothing like it")
    assert missing.returncode == 1 and "memory list" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_memory_dir_setting_is_used(specrun: Specrun) -> None:
    specrun.run("config", "set", "memoryDir", "notes/mem", check=True)
    specrun.run("memory", "add", "a note", "-d", "something", "--body", "text", check=True)
    assert (specrun.project / "notes" / "mem" / "MEMORY.md").is_file()
    assert specrun.json("memory", "list")["memories"][0]["name"] == "a note"


def test_explain_shell(specrun: Specrun) -> None:
    ro = specrun.json("explain-shell", "git log --oneline | head")
    assert ro["read_only"] is True and ro["command"] == "git log --oneline | head"
    rw = specrun.json("explain-shell", "sed -i s/a/b/ x.txt")
    assert rw["read_only"] is False and rw["reason"]
    text = specrun.run("explain-shell", "rm -rf build")
    assert text.returncode == 0 and "NOT read-only" in text.stdout
    batch = specrun.run("explain-shell", "--batch", input='"ls"\n"rm x"\n')
    verdicts = [json.loads(line) for line in batch.stdout.splitlines()]
    assert [v["read_only"] for v in verdicts] == [True, False]


def test_model_serve_answers_like_an_openai_endpoint(specrun: Specrun, env: Env) -> None:
    scenario = Path(__file__).resolve().parents[2] / "coordinator" / "scenarios" / "demo.yaml"
    proc = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "model", "serve", "--scenario", str(scenario)],
        env=env.vars, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        models = httpx.get(f"{base_url}/models", timeout=5).json()
        assert [m["id"] for m in models["data"]] == ["scripted"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_start_json_and_status_human(specrun: Specrun) -> None:
    started = specrun.json("start", "--workers", "1")
    assert started["started"] is True and started["pid"] > 0
    try:
        assert wait_until(lambda: len(specrun.query(WorkersRequest)["workers"]) == 1)
        status = specrun.json("status")
        workers = specrun.json("workers")["workers"]
        internals = [str(started["pid"]), status["session_id"], status["model_endpoint"]]
        human = specrun.run("status", check=True).stdout
        assert "embedded scripted model" in human and "1 worker: " in human
        # the internals only with --verbose (issue 35): the service's pid, the session's
        # id, the embedded model's address, each worker's pid
        for internal in [*internals, *(str(w["pid"]) for w in workers)]:
            assert internal not in human, (internal, human)
        verbose = specrun.run("--verbose", "status", check=True).stdout
        for internal in [*internals, *(str(w["pid"]) for w in workers)]:
            assert internal in verbose, (internal, verbose)
        # `workers` is for looking at processes: pids, but overlay paths only verbose
        listed = specrun.run("workers", check=True).stdout
        assert str(workers[0]["pid"]) in listed and "overlay" not in listed
        assert "overlay" in specrun.run("--verbose", "workers", check=True).stdout
        # the light path reads --verbose too
        assert str(started["pid"]) in specrun.run("--verbose", "status", "--json").stdout
    finally:
        stopped = specrun.run("stop", check=True).stdout
        assert stopped.strip() == "specrun stopped.", stopped
    deadline = time.monotonic() + 10
    while psutil.pid_exists(started["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
