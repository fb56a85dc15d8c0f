"""``specrun config``: the settings in effect, where each value came from, and writing one."""

from __future__ import annotations

import json

import click

from coordinator.cli import render
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import CliError, friendly
from coordinator.cli.options import json_option
from protocol.text.inert_text import inert
from protocol.text.secret_text import without_password


@click.group()
def config() -> None:
    """Settings: what is in effect and where each value came from.

    \b
    Order (later wins): defaults, <project>/.specrun/settings.json (only in a
    trusted project: `specrun trust`), your settings for the project (`config set`,
    kept in specrun's state directory), ~/.specrun/settings.json, environment
    (OPENAI_API_KEY, OPENAI_BASE_URL, DASHSCOPE_API_KEY, SPECRUN_MODEL, SPECRUN_FAST_MODEL), flags.
    """


@config.command("show")
@json_option
@click.pass_obj
@friendly
def config_show(obj: CommandContext, as_json: bool) -> None:
    """Print the merged settings and the source of each value (API key masked).

    \b
    Example:
      specrun config show --json
    """
    from coordinator.settings import KEYS, project_settings_path, user_settings_path
    from coordinator.user_state import personal_settings_path

    settings = obj.settings()
    public = settings.public()
    files = {"project": str(project_settings_path(obj.project)),
             "yours": str(personal_settings_path(obj.project)),
             "user": str(user_settings_path())}
    if as_json:
        render.print_json({
            "project": str(obj.project),
            "files": files,
            "trusted": settings.project_trusted,
            "settings": {k: {"value": public[k], "source": settings.sources[k]} for k in KEYS},
        })
        return
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("key")
    table.add_column("value", overflow="fold")
    table.add_column("from", style="bright_black", overflow="fold")
    for k in KEYS:
        value = public[k]
        shown = json.dumps(value) if not isinstance(value, str) else (value or '""')
        table.add_row(*render.cells(k, shown, settings.sources[k]))  # a repo's file: text
    render.console.print(table)
    from rich.text import Text

    shipped = "" if settings.project_trusted else " (not applied: the project is not trusted)"
    render.console.print(Text(inert(f"project file: {files['project']}{shipped}\n"
                                    f"your file:    {files['yours']}\n"
                                    f"user file:    {files['user']}"), style="bright_black"))


# A VALUE may start with "-" (a negative number): it is the value, not an option, so the
# person is told what the key accepts instead of "No such option '-3'".
@config.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.argument("value")
@click.option("--user", "user_file", is_flag=True,
              help="Write ~/.specrun/settings.json instead of your file for this project.")
@json_option
@click.pass_obj
@friendly
def config_set(obj: CommandContext, key: str, value: str, user_file: bool,
               as_json: bool) -> None:
    """Write KEY=VALUE into your settings for this project (or for every project with
    --user). They are yours, kept in specrun's state directory outside the project, so they
    apply whether or not the project is trusted.

    An empty VALUE removes a non-string key. A running service reads settings at start:
    restart it for the change to apply.

    \b
    Examples:
      specrun config set approvalMode auto-edit
      specrun config set --user fastModel qwen3.5-flash
    """
    from coordinator.settings import SettingsError, set_setting, user_settings_path
    from coordinator.user_state import personal_settings_path, project_state_dir

    if not user_file:
        obj.require_directory()
    if not user_file:
        project_state_dir(obj.project)  # private, checked, before anything is written there
    path = user_settings_path() if user_file else personal_settings_path(obj.project)
    try:
        stored = set_setting(path, key, value)
    except SettingsError as exc:  # the value (or key) given here, not the file: say so
        raise CliError(
            f"Not set: {exc}", "`specrun config show` lists every key with its value."
        ) from None
    obj.settings()  # the file as a whole must still load
    shown = "***" if key == "apiKey" and stored else stored
    if key == "baseUrl" and isinstance(shown, str):
        shown = without_password(shown)
    if as_json:
        render.print_json({"key": key, "value": shown, "file": str(path)})
    else:
        what = "removed" if stored is None else f"= {json.dumps(shown)}"
        from rich.text import Text

        render.console.print(Text(inert(f"{key} {what} in {path}")))
