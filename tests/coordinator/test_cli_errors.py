"""Errors a person meets, each with its own sentence and what to do; never a traceback."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from coordinator.scripted_model import ScriptedModelServer
from tests.support import Env, Specrun, local_http_server, processes_with_env


class _Unauthorized(BaseHTTPRequestHandler):
    def _deny(self) -> None:
        body = json.dumps({"error": {"message": "Incorrect API key provided."}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._deny()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._deny()

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def unauthorized_endpoint() -> Iterator[str]:
    with local_http_server(_Unauthorized) as server:
        yield f"http://127.0.0.1:{server.server_port}/v1"


@pytest.fixture
def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _clean(proc_stderr: str) -> None:
    assert "Traceback" not in proc_stderr


def test_a_rejected_key_stops_start(specrun: Specrun, unauthorized_endpoint: str) -> None:
    proc = specrun.run("start", "--base-url", unauthorized_endpoint)
    assert proc.returncode == 1
    assert "requires an API key" in proc.stderr and "HTTP 401" in proc.stderr
    assert "OPENAI_API_KEY" in proc.stderr and "DASHSCOPE_API_KEY" in proc.stderr
    _clean(proc.stderr)
    assert not processes_with_env(specrun.env.runtime)


def test_a_wrong_key_says_the_key_was_rejected(specrun: Specrun,
                                               unauthorized_endpoint: str) -> None:
    specrun.env.vars["OPENAI_API_KEY"] = "sk-not-valid-123"
    proc = specrun.run("start", "--base-url", unauthorized_endpoint)
    assert proc.returncode == 1
    assert "rejected the API key" in proc.stderr
    assert "sk-not-valid-123" not in proc.stderr


def test_an_auth_error_during_a_turn(specrun: Specrun, unauthorized_endpoint: str) -> None:
    specrun.run("start", "--no-check", "--base-url", unauthorized_endpoint, check=True)
    try:
        proc = specrun.run("ask", "hello")
        assert proc.returncode == 1
        assert "requires an API key" in proc.stderr
        assert "specrun stop && specrun start" in proc.stderr
        _clean(proc.stderr)
        events = specrun.json_lines("ask", "hello")
        assert events[-1]["type"] == "turn_ended" and events[-1]["reason"] == "error"
        assert "API key" in events[-1]["message"]
    finally:
        specrun.run("stop")


def test_an_unreachable_endpoint(specrun: Specrun, closed_port_url: str) -> None:
    started = specrun.run("start", "--base-url", closed_port_url)
    assert started.returncode == 0
    assert "warning" in started.stderr and "refused the connection" in started.stderr
    try:
        proc = specrun.run("ask", "hello", timeout=90)
        assert proc.returncode == 1
        assert "refused the connection" in proc.stderr
        assert "model server is running" in proc.stderr and "baseUrl" in proc.stderr
        _clean(proc.stderr)
    finally:
        specrun.run("stop")


LISTS_TWO_MODELS = {"name": "t", "models": ["qwen-a", "qwen-b"],
                    "rules": [{"default": {"text": "hi"}}]}


@pytest.mark.parametrize(("settings", "named"), [
    ({"model": "gpt-typo"}, "does not list the model 'gpt-typo'; it lists qwen-a, qwen-b."),
    ({}, "does not list the model 'scripted' (the default: no model is set)"),
    ({"model": "qwen-a", "fastModel": "tiny"}, "`specrun config set fastModel <name>`"),
])
def test_a_model_the_endpoint_does_not_list_is_named_at_start(
    specrun: Specrun, settings: dict[str, str], named: str
) -> None:
    """A first query used to be the first to say, with a 404 that points at the base URL."""
    with ScriptedModelServer(LISTS_TWO_MODELS) as server:
        own = specrun.env.own_settings(specrun.project)
        own.write_text(json.dumps({"baseUrl": server.base_url, **settings}))
        started = specrun.run("start")
        try:
            assert started.returncode == 0, started
            assert "warning:" in started.stderr and named in started.stderr, started.stderr
            _clean(started.stderr)
        finally:
            specrun.run("stop")


def test_a_model_the_endpoint_lists_starts_without_a_warning(specrun: Specrun) -> None:
    """The other side of the test above (once, not after each of its cases)."""
    with ScriptedModelServer(LISTS_TWO_MODELS) as server:
        own = specrun.env.own_settings(specrun.project)
        own.write_text(json.dumps({"baseUrl": server.base_url, "model": "qwen-b"}))
        started = specrun.run("start")
        try:
            assert started.returncode == 0 and "warning" not in started.stderr, started
        finally:
            specrun.run("stop")


def test_dashscope_without_a_key(specrun: Specrun) -> None:
    proc = specrun.run("start", "--base-url",
                       "https://dashscope.aliyuncs.com/compatible-mode/v1")
    assert proc.returncode == 1
    assert "DashScope" in proc.stderr and "DASHSCOPE_API_KEY" in proc.stderr
    _clean(proc.stderr)
    assert not processes_with_env(specrun.env.runtime)


def test_a_bad_settings_file_names_the_file(specrun: Specrun) -> None:
    path = specrun.env.own_settings(specrun.project)
    path.write_text('{"model": "x",\n "fastModel": }\n')
    for args in (("start",), ("config", "show"), ("memory", "list")):
        proc = specrun.run(*args)
        assert proc.returncode == 1, args
        assert str(path) in proc.stderr and "not valid JSON" in proc.stderr
        assert "line 2" in proc.stderr
        assert "config show" in proc.stderr
        _clean(proc.stderr)
    assert not processes_with_env(specrun.env.runtime)


def test_settings_errors_stay_one_sentence_even_with_debug(specrun: Specrun) -> None:
    path = specrun.env.own_settings(specrun.project)
    path.write_text('{"workerPool": "many"}')
    quiet = specrun.run("config", "show")
    assert quiet.returncode == 1 and "workerPool must be a whole number" in quiet.stderr
    _clean(quiet.stderr)
    # --debug applies to unexpected errors; a settings problem stays one sentence
    loud = specrun.run("--debug", "config", "show")
    assert loud.returncode == 1 and "workerPool" in loud.stderr


def test_chat_needs_a_terminal(specrun: Specrun) -> None:
    proc = specrun.run("chat")
    assert proc.returncode == 1
    assert "needs a terminal" in proc.stderr
    assert not processes_with_env(specrun.env.runtime)


def test_a_project_whose_state_dir_cannot_be_made_is_one_sentence(env: Env, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    runner = Specrun(blocker / "proj", env)  # mkdir fails below a file, for root too
    for args in (("start",), ("config", "set", "model", "x")):
        proc = runner.run(*args)
        assert proc.returncode == 1, proc
        assert "Cannot use" in proc.stderr and "not a directory" in proc.stderr
        assert "Traceback" not in proc.stderr and "Errno" not in proc.stderr
        assert "directory you can write to" in proc.stderr
    assert not processes_with_env(env.runtime)


def test_an_os_error_is_its_reason_and_path() -> None:
    from coordinator.cli.errors import _sentence

    full = OSError(28, "No space left on device", "/p/x")
    assert _sentence(full) == "No space left on device: /p/x"
    moved = OSError(18, "Invalid cross-device link", "/a", None, "/b")
    assert _sentence(moved) == "Invalid cross-device link: /a -> /b"
    assert _sentence(OSError("plain")) == "plain"
    assert _sentence(ValueError()) == "ValueError"


def test_a_password_in_the_base_url_is_shown_nowhere(
    specrun: Specrun, closed_port_url: str
) -> None:
    """``baseUrl`` with basic-auth credentials: ``config set``/``show``, ``start``'s warning,
    ``status`` and the service log show the URL with ``***`` for the password (a turn's
    error: ``test_model_client``)."""
    secret = "hunter2-password"
    url = closed_port_url.replace("http://", f"http://gateway:{secret}@")
    shown = closed_port_url.replace("http://", "http://gateway:***@")
    outputs = [specrun.run("config", "set", "baseUrl", url, check=True)]
    assert specrun.json("config", "show")["settings"]["baseUrl"]["value"] == shown
    outputs.append(specrun.run("config", "show", check=True))
    outputs.append(specrun.run("start", check=True))
    try:
        assert specrun.json("status")["model_endpoint"] == shown
        outputs.append(specrun.run("status", check=True))
        outputs.append(specrun.run("logs"))
    finally:
        specrun.run("stop")
    for proc in outputs:
        assert secret not in proc.stdout + proc.stderr, proc.args
    assert "gateway:***@" in outputs[2].stderr  # start's warning names the endpoint
