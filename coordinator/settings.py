"""Configuration: the project's settings.json (only in a trusted project: see
``coordinator.trust``), then the person's own settings for the project (``config set``, kept
in specrun's state directory), then user settings.json, then environment, then flags
(later wins: the order design §8 gives, with flags the strongest). Every value
remembers where it came from, so ``specrun config show`` can say so, and a bad file or key
is reported with its file and key in one sentence.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints
from urllib.parse import urlsplit

import msgspec

from coordinator.durable import atomic_write
from coordinator.trust import Trust, trust_of
from coordinator.user_state import personal_settings_path
from protocol.text.secret_text import without_password
from protocol.wire.approval import ApprovalMode
from protocol.wire.control import BudgetWindow
from protocol.wire.model_options import ModelOptions, OutputCaps, TextToolCalls
from protocol.wire.work import CommandLimits, Containment, SpeculationLimits


class SettingsError(ValueError):
    """A settings file or value that cannot be used."""


def _about(
    help: str, *, ge: int | float | None = None, le: int | float | None = None
) -> msgspec.Meta:
    return msgspec.Meta(description=help, ge=ge, le=le)


class Settings(msgspec.Struct, kw_only=True, rename="camel"):
    """Every setting with its type, default, lower bound and help, in one place (the
    names in files, flags and ``config`` are the camelCase ones). ``sources`` says where
    each value came from (``default``, a file path, ``$VAR`` or ``flag --x``)."""

    model: Annotated[str, _about("main chat model name")] = "scripted"
    fast_model: Annotated[
        str, _about("model for suggestions, speculation and recall (empty: main model)")
    ] = ""
    base_url: Annotated[
        str,
        _about(
            "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 "
            "(empty: embedded scripted model)"
        ),
    ] = ""
    api_key: Annotated[
        str, _about("API key (prefer the OPENAI_API_KEY / DASHSCOPE_API_KEY variables)")
    ] = ""
    approval_mode: Annotated[
        ApprovalMode,
        _about(
            "which tool calls need a yes: default (edits and commands not proven read-only), "
            "plan (no writes at all), auto-edit (edits run, such commands ask), yolo (none)"
        ),
    ] = (
        ApprovalMode.DEFAULT
    )
    enable_speculation: Annotated[
        bool, _about("run the predicted prompt before it is accepted")
    ] = True
    enable_followup_suggestions: Annotated[
        bool, _about("predict the next prompt after each turn")
    ] = True
    suggestion_backoff_after: Annotated[
        int,
        _about(
            "after this many suggestions in a row went unused, predict less often: every "
            "2nd turn, then every 4th, up to every 8th, until one is taken (0: never back off)",
            ge=0,
        ),
    ] = 5
    suggestion_cold_cache_tokens: Annotated[
        int,
        _about(
            "skip predicting when the last main request had more prompt tokens than this "
            "that the provider's prefix cache did not serve (the prediction would pay for "
            "them all again; 0: never skip)",
            ge=0,
        ),
    ] = 50000
    suggestion_away_minutes: Annotated[
        float,
        _about(
            "chat: no keystroke for this many minutes counts as away; while every chat is "
            "away or unfocused no next prompt is predicted (0: never away)",
            ge=0,
        ),
    ] = 10.0
    suggestion_focus_reporting: Annotated[
        bool,
        _about(
            "chat: turn on the terminal's focus reporting, so that a chat whose terminal "
            "lost focus counts as nobody looking (a prediction is skipped, then made on return)"
        ),
    ] = True
    enable_cache_sharing: Annotated[
        bool, _about("reuse the provider's prefix cache in forked requests")
    ] = True
    speculate_shell: Annotated[
        bool,
        _about(
            "opt-in: speculate shell commands that are not read-only (tests, builds) in a "
            "sandbox without network, keeping their writes in the overlay"
        ),
    ] = False
    speculation_shell_timeout_s: Annotated[
        int,
        _about(
            "seconds a speculation's shell command may run before it is killed (its result "
            "then says so and the speculation goes on)",
            ge=1,
        ),
    ] = 300
    toolchain_paths: Annotated[
        tuple[str, ...],
        _about(
            "more directories speculateShell commands see read-only, besides the "
            "toolchains found on PATH and in the project's venv (never $HOME itself or a "
            "secret store in it)"
        ),
    ] = ()
    enable_memory: Annotated[bool, _about("recall relevant memories for each query")] = True
    # One: a warm worker and its sandbox helper cost an idle service about 7 MB (the idle
    # row of docs/benchmarks.md); a second worker wanted at once is forked in ~10 ms.
    worker_pool: Annotated[int, _about("number of warm idle workers", ge=0)] = 1
    heartbeat_ms: Annotated[int, _about("how often a worker says it is alive", ge=50)] = 1000
    hang_after_ms: Annotated[
        int,
        _about(
            "a worker silent this long is hung and is killed (time it waits for a CPU does "
            "not count, up to 10 times this)",
            ge=200,
        ),
    ] = 5000
    memory_dir: Annotated[
        str, _about("project memory directory (default <project>/.specrun/memory)")
    ] = ""
    scenario: Annotated[str, _about("scenario file for the embedded scripted model")] = ""
    max_session_turns: Annotated[
        int, _about("turns per session before the chat asks for a reset", ge=1)
    ] = 200
    max_turns_per_query: Annotated[
        int, _about("model round trips per user query (at most 100)", ge=1)
    ] = 50
    session_token_limit: Annotated[int, _about("total tokens per session (0: no limit)", ge=0)] = 0
    context_window: Annotated[
        int,
        _about(
            "the main model's context window in tokens (0: what the endpoint reports, "
            "else 32768)",
            ge=0,
        ),
    ] = 0
    compact_at: Annotated[
        float,
        _about(
            "summarize the oldest part of the chat once the next request would pass this "
            "fraction of the context window",
            ge=0.2,
            le=0.95,
        ),
    ] = 0.8
    approval_timeout_s: Annotated[
        int, _about("an approval question unanswered this long is a no", ge=1)
    ] = 300
    speculation_budget: Annotated[
        int,
        _about(
            "tokens speculations may spend per speculationBudgetWindow; once spent, "
            "suggestions are shown but not speculated (0: no budget)",
            ge=0,
        ),
    ] = 0
    speculation_budget_window: Annotated[
        BudgetWindow, _about("hour (the last 60 minutes) | session")
    ] = "hour"
    speculation_branches: Annotated[
        int,
        _about(
            "ranked alternative next prompts to speculate at once, each in its own worker "
            "and overlay (at most 4: every branch costs a worker, its tokens and CPU, and "
            "guesses past the fourth are rarely taken)",
            ge=1,
            le=4,
        ),
    ] = 1
    keep_speculation_while_typing: Annotated[
        bool,
        _about(
            "keep a speculation running while what is typed is a prefix of its "
            "suggestion; abort it when the typed text diverges"
        ),
    ] = True
    accept_typed_prompt: Annotated[
        bool, _about("a submitted prompt equal to a speculated one uses that speculation")
    ] = True
    enter_accepts: Annotated[
        bool,
        _about(
            "chat: Enter on an empty line accepts the suggestion at once, as Tab does "
            "(off: Enter fills the line with it and a second Enter sends it)"
        ),
    ] = False
    protected_paths: Annotated[
        tuple[str, ...],
        _about(
            "gitignore-style patterns a speculation may never write (besides .git, "
            ".gitattributes, .gitmodules and .specrun)"
        ),
    ] = ()
    runs_later_paths: Annotated[
        tuple[str, ...],
        _about(
            "gitignore-style patterns of files that run later without a key press, flagged "
            "at Tab (besides the built-in list: .envrc, CI workflows, hooks, build files...)"
        ),
    ] = ()
    runs_later_boundary: Annotated[
        bool,
        _about(
            "a speculation that writes a file that runs later (or makes one executable) "
            "stops at a boundary instead of showing it flagged at Tab"
        ),
    ] = False
    apply_ignored_output: Annotated[
        bool,
        _about(
            "Tab also applies the files git ignores that a speculation's commands wrote "
            "(build output, caches), which it otherwise holds back"
        ),
    ] = False
    overlay_quota_mb: Annotated[
        int, _about("bytes a speculation may write into its overlay (MiB)", ge=1)
    ] = 256
    overlay_quota_files: Annotated[
        int, _about("files a speculation may write into its overlay", ge=1)
    ] = 2000
    undo_store_mb: Annotated[
        int,
        _about(
            "earlier file contents `specrun undo` keeps, in specrun's state directory "
            "(MiB); the oldest checkpoints are pruned first",
            ge=1,
        ),
    ] = 256
    command_cpu_seconds: Annotated[
        int, _about("CPU seconds per unapproved shell command", ge=1)
    ] = 60
    command_memory_mb: Annotated[
        int,
        _about(
            "memory of a speculation's commands together where a control group can be "
            "made (see specrun sandbox), else address space per process (MiB)",
            ge=64,
        ),
    ] = 4096
    command_file_size_mb: Annotated[
        int, _about("largest file such a command may write (MiB)", ge=1)
    ] = 256
    command_processes: Annotated[
        int,
        _about(
            "live processes and threads of a speculation's commands together (per command "
            "without a control group)",
            ge=8,
        ),
    ] = 128
    command_open_files: Annotated[
        int, _about("open files per process of such a command", ge=32)
    ] = 1024
    speculation_timeout_s: Annotated[
        int,
        _about(
            "wall-clock seconds a speculation may run (model turns and commands); then it "
            "ends at the boundary limit:wall_clock",
            ge=1,
        ),
    ] = 600
    max_tokens_main: Annotated[
        int,
        _about(
            "output tokens a main chat answer may have (a model that loops stops here, "
            "not when the server's context is full)",
            ge=16,
        ),
    ] = 4096
    max_tokens_speculation: Annotated[
        int, _about("output tokens of each model answer inside a speculation", ge=16)
    ] = 4096
    max_tokens_suggestion: Annotated[
        int, _about("output tokens of a next-prompt suggestion (and a pipelined one)", ge=16)
    ] = 512
    max_tokens_recall: Annotated[
        int, _about("output tokens of the memory recall's choice", ge=16)
    ] = 1024
    max_tokens_compaction: Annotated[
        int, _about("output tokens of a compaction's summary", ge=16)
    ] = 2000
    model_timeout_s: Annotated[
        int,
        _about(
            "seconds the model endpoint may go silent once its answer has begun",
            ge=1,
        ),
    ] = 120
    first_byte_timeout_s: Annotated[
        int,
        _about(
            "seconds a request may wait for the first byte of its answer, plus "
            "firstByteSecondsPer1kTokens for the prompt the server has not read yet",
            ge=1,
        ),
    ] = 120
    first_byte_seconds_per_1k_tokens: Annotated[
        float,
        _about(
            "more seconds to wait for a first byte per 1,000 prompt tokens the server has "
            "not read yet (a CPU server reads 6-50 a second)",
            ge=0,
        ),
    ] = 100.0
    text_tool_calls: Annotated[
        TextToolCalls,
        _about(
            "read tool calls a model wrote as text (fenced JSON, <tool_call> tags) naming "
            "an offered tool: auto (local endpoints only) | on | off"
        ),
    ] = "auto"
    sources: dict[str, str] = msgspec.field(default_factory=dict)
    shipped_file: str = ""
    """The project settings file, when it was not applied because the project is not
    trusted (see ``coordinator.trust``); '' otherwise."""
    trust_note: str = ""
    """One sentence when the project ships files for specrun it has not been trusted with
    (settings, memory): none of them applies; '' otherwise."""
    project_trusted: bool = True
    """Whether the project's own files for specrun (settings, memory) apply."""

    @property
    def suggestion_model(self) -> str:
        """The model for suggestions, speculation and recall."""
        return self.fast_model or self.model

    def model_options(self) -> ModelOptions:
        """How the model clients (the service's and every worker's) treat the endpoint."""
        return ModelOptions(
            max_tokens=OutputCaps(
                main=self.max_tokens_main,
                speculation=self.max_tokens_speculation,
                suggestion=self.max_tokens_suggestion,
                recall=self.max_tokens_recall,
                compaction=self.max_tokens_compaction,
            ),
            first_byte_timeout_s=float(self.first_byte_timeout_s),
            first_byte_s_per_1k_tokens=float(self.first_byte_seconds_per_1k_tokens),
            text_tool_calls=self.text_tool_calls,
        )

    def speculation_limits(self) -> SpeculationLimits:
        return SpeculationLimits(
            shell_timeout_s=float(self.speculation_shell_timeout_s),
            wall_clock_s=float(self.speculation_timeout_s),
        )

    def containment(self, private_paths: tuple[str, ...] = ()) -> Containment:
        """The per-command limits, overlay quota and protected paths of design §11;
        ``private_paths``: the memory directories (``coordinator.memory.memory_dirs``)."""
        mib = 1 << 20
        return Containment(
            limits=CommandLimits(
                cpu_s=self.command_cpu_seconds,
                memory_bytes=self.command_memory_mb * mib,
                file_size_bytes=self.command_file_size_mb * mib,
                open_files=self.command_open_files,
                processes=self.command_processes,
            ),
            overlay_quota_bytes=self.overlay_quota_mb * mib,
            overlay_quota_files=self.overlay_quota_files,
            protected_paths=self.protected_paths,
            private_paths=private_paths,
            toolchain_paths=self.toolchain_paths,
            runs_later_paths=self.runs_later_paths,
            runs_later_boundary=self.runs_later_boundary,
        )

    @property
    def uses_scripted_model(self) -> bool:
        return not self.base_url

    def value(self, name: str) -> Any:
        """A setting by its camelCase name (``config show``, messages naming a key)."""
        return getattr(self, KEYS[name].attr)

    def __repr__(self) -> str:
        # A log line or a traceback must never carry the API key.
        return f"Settings({self.public()!r})"

    def public(self) -> dict[str, Any]:
        """Values safe to print, by camelCase name: the key and a password in the base URL
        are masked."""
        shown = {name: self.value(name) for name in KEYS}
        if shown.get("apiKey"):
            shown["apiKey"] = "***"
        shown["baseUrl"] = without_password(shown["baseUrl"])
        return shown


@dataclass(frozen=True)
class Key:
    """One setting as files and flags see it, read off the ``Settings`` fields."""

    name: str  # camelCase, as in settings.json
    attr: str  # the field of ``Settings``
    kind: type  # bool, int, float, str or tuple (a list of strings)
    default: Any
    help: str
    hint: Any  # the field's annotated type: what a value is validated against
    choices: tuple[str, ...] = ()
    minimum: int | float | None = None
    maximum: int | float | None = None


def _keys() -> dict[str, Key]:
    keys: dict[str, Key] = {}
    hints = get_type_hints(Settings, include_extras=True)  # once: it evaluates every field
    for field_info in msgspec.structs.fields(Settings):
        if field_info.name in ("sources", "shipped_file", "trust_note", "project_trusted"):
            continue
        hint = hints[field_info.name]
        base, *extras = get_args(hint)
        meta = next(m for m in extras if isinstance(m, msgspec.Meta))
        choices: tuple[str, ...] = ()
        kind: type
        if isinstance(base, type) and issubclass(base, enum.Enum):
            kind, choices = str, tuple(m.value for m in base)
        elif get_origin(base) is Literal:
            kind, choices = str, tuple(get_args(base))
        elif get_origin(base) is tuple:
            kind = tuple
        else:
            kind = base
        keys[field_info.encode_name] = Key(
            field_info.encode_name,
            field_info.name,
            kind,
            field_info.default,
            meta.description or "",
            hint,
            choices,
            meta.ge,
            meta.le,
        )
    return keys


KEYS: dict[str, Key] = _keys()

ENV_KEYS = {
    "OPENAI_BASE_URL": "baseUrl",
    "OPENAI_API_KEY": "apiKey",
    "DASHSCOPE_API_KEY": "apiKey",
    "SPECRUN_MODEL": "model",
    "SPECRUN_FAST_MODEL": "fastModel",
}

_KIND_WORDS = {
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    str: "a string",
    tuple: "a list of strings",
}
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _coerce(key: Key, value: Any, where: str) -> Any:
    """``value`` (from JSON, the environment or a flag) as the key's type, or a
    ``SettingsError`` naming where it came from.

    msgspec validates it against the field's type and bounds: strictly for a JSON value (a
    number is no flag, a float no whole number), laxly for text from the environment or a
    flag (``"12"`` is a number there). Text first gets the spellings msgspec does not take:
    ``yes``/``no``/``on``/``off``, a comma-separated list, spaces around a number."""
    given = value
    if isinstance(value, str):
        value = _from_text(key, value)
    try:
        result = msgspec.convert(value, key.hint, strict=not isinstance(given, str))
    except msgspec.ValidationError:
        raise SettingsError(f"{where}: {key.name} must be {_expected(key, given)}.") from None
    if key.name == "baseUrl" and result:
        problem = _url_problem(result)
        if problem:
            raise SettingsError(f"{where}: baseUrl must be an http:// or https:// URL "
                                f"(got {result!r}: {problem}).")
    if key.name == "apiKey":
        return _api_key(result, where)
    return result


def _url_problem(url: str) -> str | None:
    """What keeps ``url`` from being an endpoint's base URL, or None. Checked here, where
    it is set: the service would otherwise start on it and fail at its first request
    (a port out of range even stopped the start with an internal error)."""
    if not url.startswith(("http://", "https://")):
        return "it has no http:// or https:// in front"
    if any(char.isspace() for char in url):
        return "it holds a blank"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port out of range, an unclosed IPv6 bracket
        said = str(exc).rstrip(".")
        return said[:1].lower() + said[1:]
    if not parts.hostname:
        return "it names no host"
    if port == 0:
        return "port 0 is no server's"
    if parts.query or parts.fragment:
        return "the paths of requests are added after it, so it cannot hold a ? or #"
    return None


def _api_key(key: str, where: str) -> str:
    """The key without the blanks around it (a pasted key often ends in a newline); a
    character no API key holds (a typographic quote, an ellipsis, a space or a control
    character from a copy-paste) is refused here, naming the character and never the key:
    sent as it is, it fails every request with an encoding error that echoes the key."""
    key = key.strip()
    for position, char in enumerate(key, 1):
        if not "!" <= char <= "~":
            shown = f"U+{ord(char):04X}" + (f" {char!r}" if char.isprintable() else "")
            raise SettingsError(
                f"{where}: apiKey holds {shown} at character {position}, which no API key "
                "holds (copied with a quote, a space or a line break?); copy the key again."
            )
    return key


def _from_text(key: Key, text: str) -> Any:
    if key.kind is bool and text.lower() in _TRUE | _FALSE:
        return text.lower() in _TRUE
    if key.kind is tuple:
        return tuple(item.strip() for item in text.split(",") if item.strip())
    if key.kind in (int, float):
        return text.strip()
    return text


def _expected(key: Key, given: Any) -> str:
    """What a refused ``given`` should have been, and what it was."""
    if key.kind in (int, float):
        base = get_args(key.hint)[0]
        value = _from_text(key, given) if isinstance(given, str) else given
        try:
            number = msgspec.convert(value, base, strict=not isinstance(given, str))
        except msgspec.ValidationError:
            number = None
        if number is not None:  # a number, out of bounds
            shown = number if isinstance(given, str) else given
            if key.minimum is not None and number < key.minimum:
                return f"at least {key.minimum} (got {shown})"
            return f"at most {key.maximum} (got {shown})"
    if key.choices and isinstance(given, str):
        if len(key.choices) == 2:
            return f"{' or '.join(key.choices)} (got {given!r})"
        return f"one of {', '.join(key.choices)} (got {given!r})"
    shown = json.dumps(given) if not isinstance(given, str) else repr(given)
    return f"{_KIND_WORDS[key.kind]} (got {shown})"


class _Layers:
    """Values by camelCase name and where each came from, while the layers are merged."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {k.name: k.default for k in KEYS.values()}
        self.sources: dict[str, str] = dict.fromkeys(KEYS, "default")

    def apply(self, raw: Mapping[str, Any], source: str) -> None:
        for name, value in raw.items():
            key = KEYS.get(name)
            if key is None:
                known = ", ".join(sorted(KEYS))
                raise SettingsError(f"{source}: unknown key {name!r} (known keys: {known}).")
            self.values[name] = _coerce(key, value, source)
            self.sources[name] = source

    def settings(self) -> Settings:
        return msgspec.convert({**self.values, "sources": self.sources}, Settings)


def read_settings_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # no such file (a parent is a file)
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


def personal_memory_dir(project_root: Path, home: Path | None = None) -> str:
    """The memory directory the person's own settings name ('' for the default): what the
    trust hash covers besides ``.specrun/`` (a project's own settings cannot move it)."""
    memory_dir = ""
    for path in (personal_settings_path(project_root), user_settings_path(home)):
        with contextlib.suppress(SettingsError):
            value = read_settings_file(path).get("memoryDir")
            if isinstance(value, str) and value:
                memory_dir = value
    return memory_dir


def project_trust(project_root: Path, home: Path | None = None) -> Trust:
    """Whether what the project ships for specrun applies (``coordinator.trust``)."""
    return trust_of(project_root, personal_memory_dir(project_root, home))


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

    Precedence follows design §8 literally: project file < the person's file for the
    project < user file < environment < flags. The project's own file applies only in a
    trusted project (``Settings.shipped_file`` names it otherwise, and ``trust_note`` says
    so). A user-wide setting overrides a project's file
    (a person's own choice of endpoint or model beats what is written there). When both
    ``OPENAI_API_KEY`` and ``DASHSCOPE_API_KEY`` are set, the one matching the base URL
    (DashScope's host or not) is used."""
    layers = _Layers()
    trust = project_trust(project_root, home)
    shipped = not trust.applies and project_settings_path(project_root).exists()
    paths = [personal_settings_path(project_root), user_settings_path(home)]
    if trust.applies:
        paths.insert(0, project_settings_path(project_root))
    for path in paths:
        layers.apply(read_settings_file(path), str(path))
    environ = os.environ if env is None else env
    for var, name in ENV_KEYS.items():
        if environ.get(var) and name != "apiKey":
            layers.apply({name: environ[var]}, f"${var}")
    for name, value in (flags or {}).items():
        if value is not None and name == "baseUrl":
            layers.apply({name: value}, f"flag {FLAG_NAMES.get(name, name)}")
    key_vars = [v for v in ("OPENAI_API_KEY", "DASHSCOPE_API_KEY") if environ.get(v)]
    if len(key_vars) == 2:
        dashscope = is_dashscope(layers.values["baseUrl"])
        key_vars = ["DASHSCOPE_API_KEY" if dashscope else "OPENAI_API_KEY"]
    for var in key_vars:
        layers.apply({"apiKey": environ[var]}, f"${var}")
    for name, value in (flags or {}).items():
        if value is not None:
            layers.apply({name: value}, f"flag {FLAG_NAMES.get(name, name)}")
    if layers.values["maxTurnsPerQuery"] > 100:
        where = layers.sources["maxTurnsPerQuery"]
        raise SettingsError(f"{where}: maxTurnsPerQuery must be between 1 and 100.")
    settings = layers.settings()
    if shipped:
        settings.shipped_file = str(project_settings_path(project_root))
    settings.project_trusted = trust.applies
    settings.trust_note = trust.sentence(project_root)
    return settings


def is_dashscope(base_url: str) -> bool:
    return "dashscope" in (urlsplit(base_url).hostname or "").lower()


def endpoint_problem(settings: Settings) -> str | None:
    """A configuration that cannot work, found without a network request (one sentence)."""
    url = settings.base_url
    if url and is_dashscope(url) and not settings.api_key:
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
    if value == "" and key.kind is not str:  # an empty list, number or flag: the default
        raw.pop(name, None)
    else:
        shown = "***" if name == "apiKey" else repr(value)  # a key is never echoed
        stored = _coerce(key, value, f"{name}={shown}")
        raw[name] = list(stored) if isinstance(stored, tuple) else stored
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (json.dumps(raw, indent=2) + "\n").encode("utf-8"))
    return stored
