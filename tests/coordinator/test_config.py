"""Settings: precedence (a trusted project's file < your file for the project < user file <
environment < flags), sources, and errors that name the file and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coordinator.settings import (
    SettingsError,
    endpoint_problem,
    load_settings,
    set_setting,
)
from coordinator.trust import record_trust
from protocol.wire.approval import ApprovalMode
from tests.support import Specrun


def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    project, home = tmp_path / "proj", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    return project, home


def test_defaults(dirs: tuple[Path, Path]) -> None:
    project, home = dirs
    s = load_settings(project, env={}, home=home)
    assert s.model == "scripted" and s.approval_mode == "default"
    assert s.uses_scripted_model and s.suggestion_model == "scripted"
    assert set(s.sources.values()) == {"default"}


def test_precedence_project_user_env_flags(dirs: tuple[Path, Path]) -> None:
    project, home = dirs
    pfile = _write(project / ".specrun" / "settings.json",
                   {"model": "p", "fastModel": "pf", "workerPool": 3, "approvalMode": "plan",
                    "enableSpeculation": False})
    ufile = _write(home / ".specrun" / "settings.json", {"model": "u", "fastModel": "uf"})
    env = {"SPECRUN_MODEL": "e"}
    assert load_settings(project, env=env, home=home).worker_pool == 1  # not trusted yet
    record_trust(project, True)
    s = load_settings(project, env=env, home=home, flags={"model": "f"})
    assert s.model == "f" and s.sources["model"] == "flag --model"
    assert s.fast_model == "uf" and s.sources["fastModel"] == str(ufile)
    assert s.worker_pool == 3 and s.sources["workerPool"] == str(pfile)
    assert s.enable_speculation is False
    s = load_settings(project, env=env, home=home)
    assert s.model == "e" and s.sources["model"] == "$SPECRUN_MODEL"


def test_environment_variables(dirs: tuple[Path, Path]) -> None:
    project, home = dirs
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "k1",
           "SPECRUN_FAST_MODEL": "small"}
    s = load_settings(project, env=env, home=home)
    assert s.base_url == "http://127.0.0.1:9/v1" and not s.uses_scripted_model
    assert s.api_key == "k1" and s.sources["apiKey"] == "$OPENAI_API_KEY"
    assert s.fast_model == "small"
    assert s.public()["apiKey"] == "***"


def test_the_key_matching_the_endpoint_wins(dirs: tuple[Path, Path]) -> None:
    project, home = dirs
    both = {"OPENAI_API_KEY": "openai", "DASHSCOPE_API_KEY": "dash"}
    s = load_settings(project, env=both, home=home)
    assert s.api_key == "openai"
    s = load_settings(project, env=both, home=home,
                      flags={"baseUrl": "https://dashscope.aliyuncs.com/compatible-mode/v1"})
    assert s.api_key == "dash" and s.sources["apiKey"] == "$DASHSCOPE_API_KEY"
    only = load_settings(project, env={"DASHSCOPE_API_KEY": "dash"}, home=home)
    assert only.api_key == "dash"


def test_dashscope_without_a_key_is_a_problem(dirs: tuple[Path, Path]) -> None:
    project, home = dirs
    url = "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"
    s = load_settings(project, env={}, home=home, flags={"baseUrl": url})
    problem = endpoint_problem(s)
    assert problem is not None and "DASHSCOPE_API_KEY" in problem
    s = load_settings(project, env={"DASHSCOPE_API_KEY": "k"}, home=home, flags={"baseUrl": url})
    assert endpoint_problem(s) is None


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ({"modle": "x"}, "unknown key 'modle'"),
        ({"workerPool": "two"}, "workerPool must be a whole number (got 'two')"),
        ({"workerPool": -1}, "workerPool must be at least 0"),
        ({"enableSpeculation": "maybe"}, "enableSpeculation must be true or false"),
        ({"model": 3}, "model must be a string (got 3)"),
        ({"approvalMode": "sometimes"}, "approvalMode must be one of"),
        ({"baseUrl": "localhost:8000"}, "baseUrl must be an http:// or https:// URL"),
        ({"baseUrl": "http://"}, "(got 'http://': it names no host)"),
        ({"baseUrl": "http://exa mple/v1"}, "it holds a blank"),
        ({"baseUrl": "http://h:99999/v1"}, "port out of range"),
        ({"baseUrl": "http://[::1/v1"}, "invalid IPv6 URL"),
        ({"baseUrl": "http://h/v1?key=1"}, "it cannot hold a ? or #"),
        ({"maxTurnsPerQuery": 500}, "maxTurnsPerQuery must be between 1 and 100"),
        ({"workerPool": 2.0}, "workerPool must be a whole number (got 2.0)"),  # JSON: strict
        ({"workerPool": True}, "workerPool must be a whole number (got true)"),
        ({"enableSpeculation": 1}, "enableSpeculation must be true or false (got 1)"),
        ({"speculationBranches": "9"}, "speculationBranches must be at most 4 (got 9)"),
        ({"compactAt": 1}, "compactAt must be at most 0.95 (got 1)"),
        ({"compactAt": "0.1"}, "compactAt must be at least 0.2 (got 0.1)"),
        ({"compactAt": "nan"}, "compactAt must be at most 0.95 (got nan)"),
        ({"speculationBudgetWindow": "day"}, "must be hour or session (got 'day')"),
        ({"protectedPaths": ["a", 1]}, "protectedPaths must be a list of strings (got [\"a\", 1])"),
        ([1, 2], "must hold a JSON object"),
    ],
)
def test_errors_name_the_file_and_the_key(dirs: tuple[Path, Path], content: object,
                                          expected: str) -> None:
    project, home = dirs
    path = _write(home / ".specrun" / "settings.json", content)
    with pytest.raises(SettingsError) as err:
        load_settings(project, env={}, home=home)
    assert str(path) in str(err.value)
    assert expected in str(err.value)


def test_bad_json_names_the_file_and_line(dirs: tuple[Path, Path]) -> None:
    project, home = dirs
    path = project / ".specrun" / "settings.json"
    path.parent.mkdir()
    path.write_text('{\n  "model": "x"\n  "fastModel": "y"\n}\n')
    record_trust(project, True)
    with pytest.raises(SettingsError, match="not valid JSON") as err:
        load_settings(project, env={}, home=home)
    assert str(path) in str(err.value) and "line 3" in str(err.value)


def test_bad_environment_value_names_the_variable(dirs: tuple[Path, Path]) -> None:
    project, home = dirs
    with pytest.raises(SettingsError, match=r"\$OPENAI_BASE_URL: baseUrl must be"):
        load_settings(project, env={"OPENAI_BASE_URL": "nope"}, home=home)


def test_a_pasted_api_key_loses_its_surrounding_blanks(dirs: tuple[Path, Path]) -> None:
    project, home = dirs
    assert load_settings(project, env={"OPENAI_API_KEY": "sk-abc\n"}, home=home).api_key == "sk-abc"


@pytest.mark.parametrize(("key", "named"), [
    ("\u201csk-SECRETVALUE\u201d", "U+201C '\u201c' at character 1"),
    ("sk-SECRETVALUE\u2026", "U+2026 '\u2026' at character 15"),
    ("sk-SECRET VALUE", "U+0020 ' ' at character 10"),
    ("sk-SECRET\nVALUE", "U+000A at character 10"),
])
def test_an_api_key_no_endpoint_could_take_is_refused_unechoed(
    specrun: Specrun, key: str, named: str
) -> None:
    """A copy-pasted key with a typographic quote, an ellipsis or a blank inside failed
    every request with "'ascii' codec can't encode" (or an "Illegal header value" that
    quoted the key): refused where it is set, naming the character and never the key."""
    refused = specrun.run("config", "set", "apiKey", key)
    assert refused.returncode == 1 and named in refused.stderr, refused
    assert "SECRET" not in refused.stdout + refused.stderr
    _write(specrun.env.own_settings(specrun.project), {"apiKey": key})
    started = specrun.run("start")
    assert started.returncode == 1 and named in started.stderr, started
    assert "SECRET" not in started.stdout + started.stderr and "codec" not in started.stderr
    assert "Traceback" not in started.stderr
    assert specrun.run("status").returncode == 2  # no service was left running


def test_a_base_url_no_request_could_use_stops_the_start_clearly(specrun: Specrun) -> None:
    """A port out of range passed the scheme check and stopped the service's start with
    "unhandled errors in a TaskGroup"; now the file and the reason are named."""
    _write(specrun.env.own_settings(specrun.project), {"baseUrl": "http://127.0.0.1:99999/v1"})
    started = specrun.run("start")
    assert started.returncode == 1, started
    assert "baseUrl must be an http:// or https:// URL" in started.stderr
    assert "port out of range" in started.stderr and "TaskGroup" not in started.stderr
    assert specrun.run("status").returncode == 2


def test_set_setting_writes_typed_values(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    assert set_setting(path, "workerPool", "4") == 4
    assert set_setting(path, "enableSpeculation", "off") is False
    assert set_setting(path, "model", "qwen") == "qwen"
    assert json.loads(path.read_text()) == {"workerPool": 4, "enableSpeculation": False,
                                            "model": "qwen"}
    assert set_setting(path, "workerPool", "") is None
    assert "workerPool" not in json.loads(path.read_text())
    with pytest.raises(SettingsError, match="unknown key 'nope'"):
        set_setting(path, "nope", "1")
    with pytest.raises(SettingsError, match="workerPool must be a whole number"):
        set_setting(path, "workerPool", "lots")


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("workerPool", " 3 ", 3),
        ("compactAt", "0.5", 0.5),
        ("compactAt", " 0.5", 0.5),
        ("enableSpeculation", "Yes", True),
        ("enableSpeculation", "OFF", False),
        ("enableSpeculation", "1", True),
        ("protectedPaths", "a/**, b ,", ("a/**", "b")),
        ("approvalMode", "plan", ApprovalMode.PLAN),
        ("speculationBudgetWindow", "session", "session"),
    ],
)
def test_text_from_a_flag_or_the_environment_is_read_laxly(
    tmp_path: Path, name: str, text: str, value: object
) -> None:
    assert set_setting(tmp_path / "settings.json", name, text) == value


# -- through the CLI ----------------------------------------------------------------------


def test_config_show_json_reports_values_and_sources(specrun: Specrun) -> None:
    _write(specrun.project / ".specrun" / "settings.json", {"approvalMode": "auto-edit"})
    specrun.trust()
    user = _write(specrun.env.home / ".specrun" / "settings.json", {"fastModel": "mini"})
    specrun.env.vars["SPECRUN_MODEL"] = "big"
    specrun.env.vars["OPENAI_API_KEY"] = "secret-key-value"
    shown = specrun.json("config", "show")
    settings = shown["settings"]
    assert settings["approvalMode"] == {
        "value": "auto-edit",
        "source": str(specrun.project.resolve() / ".specrun" / "settings.json"),
    }
    assert settings["fastModel"] == {"value": "mini", "source": str(user)}
    assert settings["model"] == {"value": "big", "source": "$SPECRUN_MODEL"}
    assert settings["apiKey"] == {"value": "***", "source": "$OPENAI_API_KEY"}
    assert settings["workerPool"] == {"value": 1, "source": "default"}
    assert shown["files"]["user"] == str(user)
    human = specrun.run("config", "show", check=True)
    assert "$SPECRUN_MODEL" in human.stdout and "secret-key-value" not in human.stdout


def test_config_set_then_show(specrun: Specrun) -> None:
    result = specrun.json("config", "set", "workerPool", "3")
    path = specrun.env.own_settings(specrun.project)
    assert result == {"key": "workerPool", "value": 3, "file": str(path)}
    assert specrun.json("config", "show")["settings"]["workerPool"]["value"] == 3
    user = specrun.json("config", "set", "--user", "fastModel", "tiny")
    assert user["file"] == str(specrun.env.home / ".specrun" / "settings.json")
    bad = specrun.run("config", "set", "workerPool", "many")
    assert bad.returncode == 1 and "workerPool must be a whole number" in bad.stderr
    unknown = specrun.run("config", "set", "colour", "blue")
    assert unknown.returncode == 1 and "unknown key 'colour'" in unknown.stderr
    # the value given is what is wrong, not a file: no "fix the file" advice
    assert "Not set:" in bad.stderr and "config show" in bad.stderr
    assert "Fix the file" not in bad.stderr + unknown.stderr
    assert specrun.json("config", "show")["settings"]["workerPool"]["value"] == 3  # unchanged
    hidden = specrun.json("config", "set", "apiKey", "abc")
    assert hidden["value"] == "***"


def test_a_value_starting_with_a_dash_is_the_value(specrun: Specrun) -> None:
    """A negative number is checked like any value, not taken for an unknown option."""
    negative = specrun.run("config", "set", "workerPool", "-3")
    assert negative.returncode == 1, negative
    assert "workerPool must be at least 0 (got -3)" in negative.stderr
    assert "No such option" not in negative.stderr


def test_a_refused_setting_leaves_no_state_dir_behind(specrun: Specrun) -> None:
    state = specrun.project / ".specrun"
    assert not state.exists()
    refused = specrun.run("config", "set", "workerPool", "many")
    assert refused.returncode == 1 and "Not set:" in refused.stderr
    assert not state.exists()  # it would mark this directory as a project for its subdirs
    specrun.json("config", "set", "workerPool", "2")
    assert specrun.run("config", "set", "workerPool", "many").returncode == 1
    assert not state.exists()  # your settings live outside the project
    assert specrun.env.own_settings(specrun.project).exists()


def test_flags_win_when_the_service_starts(specrun: Specrun) -> None:
    _write(specrun.env.own_settings(specrun.project),
           {"approvalMode": "plan", "workerPool": 1})
    specrun.env.vars["SPECRUN_FAST_MODEL"] = "from-env"
    specrun.run("start", "--approval-mode", "yolo", check=True)
    try:
        status = specrun.json("status")
        assert status["approval_mode"] == "yolo"
        assert status["fast_model"] == "from-env"
    finally:
        specrun.run("stop", check=True)
