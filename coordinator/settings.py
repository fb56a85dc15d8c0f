"""Configuration: project settings.json, then user settings.json, then environment,
then flags (later wins: the order SPEC §8 gives, with flags the strongest). Every value
remembers where it came from, so ``specrun config show`` can say so, and a bad file or key
is reported with its file and key in one sentence.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from coordinator.durable import atomic_write
from protocol.approval import ApprovalMode
from protocol.work import CommandLimits, Containment


class SettingsError(ValueError):
    """A settings file or value that cannot be used."""


@dataclass(frozen=True)
class Key:
    name: str
    kind: type
    default: Any
    help: str


KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key("model", str, "scripted", "main chat model name"),
        Key(
            "fastModel",
            str,
            "",
            "model for suggestions, speculation and recall (empty: main model)",
        ),
        Key(
            "baseUrl",
            str,
            "",
            "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 "
            "(empty: embedded scripted model)",
        ),
        Key("apiKey", str, "", "API key (prefer the OPENAI_API_KEY / DASHSCOPE_API_KEY variables)"),
        Key("approvalMode", str, "default", "default | plan | auto-edit | yolo"),
        Key("enableSpeculation", bool, True, "run the predicted prompt before it is accepted"),
        Key("enableFollowupSuggestions", bool, True, "predict the next prompt after each turn"),
        Key(
            "enableCacheSharing", bool, True, "reuse the provider's prefix cache in forked requests"
        ),
        Key(
            "speculateShell",
            bool,
            False,
            "opt-in: speculate shell commands that are not read-only (tests, builds) in a "
            "sandbox without network, keeping their writes in the overlay",
        ),
        Key("enableMemory", bool, True, "recall relevant memories for each query"),
        Key("workerPool", int, 2, "number of warm idle workers"),
        Key("heartbeatMs", int, 1000, "how often a worker says it is alive"),
        Key("hangAfterMs", int, 5000, "a worker silent this long is hung and is killed"),
        Key("memoryDir", str, "", "project memory directory (default <project>/.specrun/memory)"),
        Key("scenario", str, "", "scenario file for the embedded scripted model"),
        Key("maxSessionTurns", int, 200, "turns per session before the chat asks for a reset"),
        Key("maxTurnsPerQuery", int, 50, "model round trips per user query (at most 100)"),
        Key("sessionTokenLimit", int, 0, "total tokens per session (0: no limit)"),
        Key("approvalTimeoutS", int, 300, "an approval question unanswered this long is a no"),
        Key(
            "speculationBudget",
            int,
            0,
            "tokens speculations may spend per speculationBudgetWindow; once spent, "
            "suggestions are shown but not speculated (0: no budget)",
        ),
        Key("speculationBudgetWindow", str, "hour", "hour (the last 60 minutes) | session"),
        Key(
            "protectedPaths",
            list,
            [],
            "gitignore-style patterns a speculation may never write (besides .git, "
            ".gitattributes, .gitmodules and .specrun)",
        ),
        Key("overlayQuotaMb", int, 256, "bytes a speculation may write into its overlay (MiB)"),
        Key("overlayQuotaFiles", int, 2000, "files a speculation may write into its overlay"),
        Key("commandCpuSeconds", int, 60, "CPU seconds per unapproved shell command"),
        Key("commandMemoryMb", int, 4096, "address space per process of such a command (MiB)"),
        Key("commandFileSizeMb", int, 256, "largest file such a command may write (MiB)"),
        Key("commandProcesses", int, 128, "processes per such command"),
        Key("commandOpenFiles", int, 1024, "open files per process of such a command"),
    )
}

ENV_KEYS = {
    "OPENAI_BASE_URL": "baseUrl",
    "OPENAI_API_KEY": "apiKey",
    "DASHSCOPE_API_KEY": "apiKey",
    "SPECRUN_MODEL": "model",
    "SPECRUN_FAST_MODEL": "fastModel",
}


@dataclass
class Settings:
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def approval_mode(self) -> ApprovalMode:
        return ApprovalMode(self.values["approvalMode"])

    @property
    def fast_model(self) -> str:
        return self.values["fastModel"] or self.values["model"]

    def containment(self) -> Containment:
        """The per-command limits, overlay quota and protected paths of SPEC §11."""
        mib = 1 << 20
        return Containment(
            limits=CommandLimits(
                cpu_s=self["commandCpuSeconds"],
                memory_bytes=self["commandMemoryMb"] * mib,
                file_size_bytes=self["commandFileSizeMb"] * mib,
                open_files=self["commandOpenFiles"],
                processes=self["commandProcesses"],
            ),
            overlay_quota_bytes=self["overlayQuotaMb"] * mib,
            overlay_quota_files=self["overlayQuotaFiles"],
            protected_paths=tuple(self["protectedPaths"]),
        )

    @property
    def uses_scripted_model(self) -> bool:
        return not self.values["baseUrl"]

    def public(self) -> dict[str, Any]:
        """Values safe to print: the key is masked."""
        shown = dict(self.values)
        if shown.get("apiKey"):
            shown["apiKey"] = "***"
        return shown


_KIND_WORDS = {
    bool: "true or false",
    int: "a whole number",
    str: "a string",
    list: "a list of strings",
}


def _coerce(key: Key, value: Any, where: str) -> Any:
    if key.kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
    elif key.kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return _check_int(key, value, where)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return _check_int(key, int(value), where)
    elif key.kind is list:
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return list(value)
        if isinstance(value, str):  # from a flag or the environment: comma-separated
            return [item.strip() for item in value.split(",") if item.strip()]
    elif key.kind is str and isinstance(value, str):
        if key.name == "approvalMode" and value not in {m.value for m in ApprovalMode}:
            raise SettingsError(
                f"{where}: approvalMode must be one of default, plan, auto-edit, yolo "
                f"(got {value!r})."
            )
        if key.name == "speculationBudgetWindow" and value not in ("hour", "session"):
            raise SettingsError(f"{where}: {key.name} must be hour or session (got {value!r}).")
        if key.name == "baseUrl" and value and not value.startswith(("http://", "https://")):
            raise SettingsError(
                f"{where}: baseUrl must be an http:// or https:// URL (got {value!r})."
            )
        return value
    shown = json.dumps(value) if not isinstance(value, str) else repr(value)
    raise SettingsError(f"{where}: {key.name} must be {_KIND_WORDS[key.kind]} (got {shown}).")


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_MIN_INT = {
    "overlayQuotaMb": 1,
    "overlayQuotaFiles": 1,
    "commandCpuSeconds": 1,
    "commandMemoryMb": 64,
    "commandFileSizeMb": 1,
    "commandProcesses": 8,
    "commandOpenFiles": 32,
    "workerPool": 0,
    "maxSessionTurns": 1,
    "maxTurnsPerQuery": 1,
    "sessionTokenLimit": 0,
    "speculationBudget": 0,
    "heartbeatMs": 50,
    "hangAfterMs": 200,
    "approvalTimeoutS": 1,
}


def _check_int(key: Key, value: int, where: str) -> int:
    low = _MIN_INT.get(key.name)
    if low is not None and value < low:
        raise SettingsError(f"{where}: {key.name} must be at least {low} (got {value}).")
    return value


def _apply(settings: Settings, raw: Mapping[str, Any], source: str) -> None:
    for name, value in raw.items():
        key = KEYS.get(name)
        if key is None:
            known = ", ".join(sorted(KEYS))
            raise SettingsError(f"{source}: unknown key {name!r} (known keys: {known}).")
        settings.values[name] = _coerce(key, value, source)
        settings.sources[name] = source


def read_settings_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SettingsError(f"{path}: cannot be read ({exc.strerror}).") from None
    except UnicodeDecodeError as exc:
        raise SettingsError(
            f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8 JSON."
        ) from None
    try:
        raw = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg}).") from None
    if not isinstance(raw, dict):
        raise SettingsError(f"{path}: must hold a JSON object.")
    return raw


def project_settings_path(project_root: Path) -> Path:
    return project_root / ".specrun" / "settings.json"


def user_settings_path(home: Path | None = None) -> Path:
    return (home or Path.home()) / ".specrun" / "settings.json"


FLAG_NAMES = {
    "model": "--model",
    "fastModel": "--fast",
    "baseUrl": "--base-url",
    "approvalMode": "--approval-mode",
    "workerPool": "--workers",
    "scenario": "--scenario",
}


def load_settings(
    project_root: Path,
    *,
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Settings:
    """Merge defaults, project file, user file, environment and flags (later wins).

    Precedence follows SPEC §8 literally: project file < user file < environment <
    flags. A user-wide setting therefore overrides a project's file (a person's own
    choice of endpoint or model beats what a repository ships). When both
    ``OPENAI_API_KEY`` and ``DASHSCOPE_API_KEY`` are set, the one matching the base URL
    (DashScope's host or not) is used."""
    settings = Settings()
    for key in KEYS.values():
        settings.values[key.name] = key.default
        settings.sources[key.name] = "default"
    for path in (project_settings_path(project_root), user_settings_path(home)):
        _apply(settings, read_settings_file(path), str(path))
    environ = os.environ if env is None else env
    for var, name in ENV_KEYS.items():
        if environ.get(var) and name != "apiKey":
            _apply(settings, {name: environ[var]}, f"${var}")
    for name, value in (flags or {}).items():
        if value is not None and name == "baseUrl":
            _apply(settings, {name: value}, f"flag {FLAG_NAMES.get(name, name)}")
    key_vars = [v for v in ("OPENAI_API_KEY", "DASHSCOPE_API_KEY") if environ.get(v)]
    if len(key_vars) == 2:
        key_vars = ["DASHSCOPE_API_KEY" if is_dashscope(settings["baseUrl"]) else "OPENAI_API_KEY"]
    for var in key_vars:
        _apply(settings, {"apiKey": environ[var]}, f"${var}")
    for name, value in (flags or {}).items():
        if value is not None:
            _apply(settings, {name: value}, f"flag {FLAG_NAMES.get(name, name)}")
    if settings.values["maxTurnsPerQuery"] > 100:
        where = settings.sources["maxTurnsPerQuery"]
        raise SettingsError(f"{where}: maxTurnsPerQuery must be between 1 and 100.")
    return settings


def is_dashscope(base_url: str) -> bool:
    return "dashscope" in (urlsplit(base_url).hostname or "").lower()


def endpoint_problem(settings: Settings) -> str | None:
    """A configuration that cannot work, found without a network request (one sentence)."""
    url = settings["baseUrl"]
    if url and is_dashscope(url) and not settings["apiKey"]:
        return (
            f"The base URL {url} is DashScope's, but no API key is set; export "
            "DASHSCOPE_API_KEY=<your key> (or run `specrun config set apiKey <key>`) and retry."
        )
    return None


def set_setting(path: Path, name: str, value: str) -> Any:
    """Write one key into a settings.json (atomically); returns the stored value.
    An empty value removes the key (back to the default)."""
    key = KEYS.get(name)
    if key is None:
        raise SettingsError(f"unknown key {name!r} (known keys: {', '.join(sorted(KEYS))}).")
    raw = read_settings_file(path)
    stored: Any = None
    if value == "" and key.kind is not str:
        raw.pop(name, None)
    else:
        stored = _coerce(key, value, f"{name}={value!r}")
        raw[name] = stored
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (json.dumps(raw, indent=2) + "\n").encode("utf-8"))
    return stored


