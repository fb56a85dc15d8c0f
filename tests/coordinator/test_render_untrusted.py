"""What the renderers print from untrusted strings: controls as visible escapes, rich markup
as text, and on a terminal no escape sequence but the colours the renderer chose."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from rich.text import Text

from coordinator.cli import approval, render
from protocol.wire.approval import ApprovalMode
from protocol.wire.boundary import BoundaryReason
from protocol.wire.chat import ToolCall
from protocol.wire.control import (
    ApprovalNeeded,
    Notice,
    SpeculationInfo,
    StatusReply,
    SuggestionReply,
    TextChunk,
    ToolShown,
    Transcript,
    TranscriptEntry,
    TurnEnded,
)

ERASE = "\x1b[2K\x1b[1A"
OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
MARKUP = "[bold red]x[/] [link=https://evil.example]y[/link] :smile:"
HOSTILE = f"{ERASE}{OSC52}\u202egnp\u200b\x9b{MARKUP}"
SGR = re.compile(r"\x1b\[[0-9;]*m")
OWN = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\?25[lh]")  # colours; the spinner hides the cursor


def terminal() -> tuple[Console, io.StringIO]:
    sink = io.StringIO()
    console = render.inert_console_class()(
        file=sink, force_terminal=True, color_system="standard", width=200, highlight=False,
        emoji=False,
    )
    return console, sink


def only_colours(raw: str) -> str:
    """``raw`` with the renderer's colour codes taken out: what is left must hold no
    ESC, no C1 control, no bidi or invisible character."""
    rest = OWN.sub("", raw)
    assert "\x1b" not in rest and "\x9b" not in rest and "\x07" not in rest, repr(rest)
    assert "\u202e" not in rest and "\u200b" not in rest, repr(rest)
    return rest


def test_streamed_text_split_inside_a_sequence_is_escaped() -> None:
    out, sink = terminal()
    printer = render.TurnPrinter(out)
    for chunk in ("fine ", "\x1b", "[2K", "\x1b]52;c;", "aGk=\x07", " done"):
        printer.show(TextChunk(req_id=1, text=chunk))
    printer.close()
    shown = only_colours(sink.getvalue())
    assert "fine \\x1b[2K\\x1b]52;c;aGk=\\x07 done" in shown


def test_markup_in_model_text_stays_text() -> None:
    out, sink = terminal()
    printer = render.TurnPrinter(out)
    printer.show(TextChunk(req_id=1, text=MARKUP))
    printer.close()
    shown = only_colours(sink.getvalue())
    assert MARKUP in shown
    assert "\x1b]8;" not in sink.getvalue()  # no hyperlink was made


def test_tool_lines_escape_name_arguments_and_result() -> None:
    out, sink = terminal()
    out.print(render.tool_line(f"read{ERASE}", f"path: {HOSTILE}", "success",
                               f"line one{OSC52}\nline [red]two[/]"))
    shown = only_colours(sink.getvalue())
    assert "read\\x1b[2K\\x1b[1A" in shown
    assert "\\u202egnp\\u200b\\x9b" in shown
    assert "line [red]two[/]" in shown


def test_a_running_tool_spinner_label_is_text() -> None:
    out, _sink = terminal()
    printer = render.TurnPrinter(out)
    # markup in the name used to be read as markup (a closing tag alone raises)
    printer.show(ToolShown(req_id=1, call_id="c", name="[/]x[/bold]", args="a: b\\",
                           status="running"))
    printer.close()


def test_transcript_notice_and_turn_end_are_escaped() -> None:
    out, sink = terminal()
    transcript = Transcript(req_id=1, entries=(
        TranscriptEntry(kind="user", text=f"go{ERASE}"),
        TranscriptEntry(kind="tool", text=OSC52, tool="write_file", args=f"file_path: {HOSTILE}",
                        status="success"),
        TranscriptEntry(kind="model", text=f"done{ERASE}{MARKUP}"),
    ), files=(".envrc", f"a{ERASE}.py", "my file.py"), time_saved_s=1.0)
    printer = render.TurnPrinter(out)
    printer.show(Notice(req_id=1, text=f"note {OSC52}"))
    printer.show(transcript)
    printer.show(TurnEnded(req_id=1, reason="accepted", elapsed_s=0.01))
    shown = only_colours(sink.getvalue())
    assert "wrote .envrc" in shown
    assert "wrote $'a\\x1b[2K\\x1b[1A.py'" in shown
    assert "wrote 'my file.py'" in shown
    assert MARKUP in shown


def test_suggestion_status_and_boundary_are_escaped() -> None:
    out, sink = terminal()
    spec = SpeculationInfo(id="s", status="boundary", turns=1, tool_uses=1,
                           files_written=(f"a{ERASE}",), boundary_reason=f"shell:rm {HOSTILE}",
                           elapsed_s=1.0, worker_pid=None,
                           pipelined_suggestion=f"next{ERASE}",
                           boundary=BoundaryReason("shell", f"rm {HOSTILE}"))
    render.show_suggestion(SuggestionReply(req_id=1, text=f"run{ERASE} tests", visible=True,
                                           suppressed_reason=None, speculation=spec), out)
    shown = only_colours(sink.getvalue())
    assert "run\\x1b[2K\\x1b[1A tests" in shown
    assert "stopped before the shell command `rm " in shown  # the boundary, in words
    assert MARKUP in shown


def test_status_paths_are_not_markup() -> None:
    out, sink = terminal()
    status = StatusReply(req_id=1, project="/tmp/[red]proj[/]\x1b[8m", pid=1, epoch=1,
                         uptime_s=1.0, model_endpoint="e", scripted_model=False,
                         model="m[bold]", fast_model="f", approval_mode=ApprovalMode.DEFAULT,
                         session_id="s", sandbox="full", workers=(),
                         speculation_enabled=True, suggestions_enabled=True)
    render.show_status(status, out)
    shown = only_colours(sink.getvalue())
    assert "/tmp/[red]proj[/]\\x1b[8m" in shown and "m[bold]" in shown


def test_the_console_escapes_text_that_reaches_it_unescaped() -> None:
    """The net under the renderers: a ``Text`` built without ``inert`` still comes out
    escaped, while the renderer's own colours stay codes."""
    out, sink = terminal()
    out.print(Text(f"raw {ERASE}{OSC52}\u202e", style="red"))
    raw = sink.getvalue()
    assert SGR.search(raw)  # the colour is a real code
    shown = only_colours(raw)
    # (rich drops a BEL by itself)
    assert "raw \\x1b[2K\\x1b[1A\\x1b]52;c;ZWNobyBwd25lZA==\\u202e" in shown


def test_the_consoles_never_make_emoji() -> None:
    sink = io.StringIO()
    console = render.inert_console_class()(file=sink, emoji=False)
    console.print(":smile:", markup=False)
    assert ":smile:" in sink.getvalue()


@pytest.mark.parametrize("reason", [f"why{ERASE}", "plain"])
def test_the_approval_question_is_one_inert_line(reason: str) -> None:
    call = ToolCall(id="c", name=f"run_shell_command{OSC52}",
                    arguments=f'{{"command": "echo ok{ERASE}\\nrm -rf x"}}')
    asked = approval.question(ApprovalNeeded(req_id=1, call=call, reason=reason))
    assert "\x1b" not in asked and "\x07" not in asked
    assert asked.startswith("Allow run_shell_command\\x1b]52;c;")
