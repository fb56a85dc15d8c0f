"""How replies look in a terminal (rich) and as JSON (msgspec).

A turn is shown as it happens: model text streams in, each tool call gets a spinner
while it runs (on a terminal) and one line with its arguments, status and a short
excerpt of its result when it ends. An accepted speculation is shown as its transcript,
tool calls grouped in a box, then one summary line with the time it saved.

Every string that specrun did not write itself (model text, suggestions, tool names,
arguments and results, file names, boundary details, the service's messages that quote
them) passes ``protocol.text.inert_text`` here and goes into a ``rich.text.Text``, never into
a markup string: controls become visible escapes and ``[bold]`` stays text. The consoles
also escape whatever text reaches them unescaped (``InertConsole``), and never turn
``:name:`` into an emoji.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from coordinator.boundary_text import boundary_kind, describe_boundary
from coordinator.cli.changes_view import append_listing, change_line
from protocol.text.branch_number import branch_name
from protocol.text.inert_text import find_hidden, inert, inert_json, quote_name
from protocol.wire.control import (
    ApprovalNeeded,
    Branch,
    BranchSpend,
    ControlReply,
    ErrorReply,
    Notice,
    SpeculationInfo,
    StatsReply,
    StatusReply,
    SuggestionReply,
    TextChunk,
    ToolShown,
    Transcript,
    TranscriptEntry,
    TurnEnded,
    WorkerInfo,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.panel import Panel
    from rich.status import Status
    from rich.table import Table
    from rich.text import Text

    console: Console
    err_console: Console


def __getattr__(name: str) -> Any:
    """``console`` and ``err_console``, made on first use: importing rich costs a short
    command (``specrun status --json``) more than the rest of its run, so only what draws
    for a person pays for it. Both are module attributes once made, as before."""
    if name not in ("console", "err_console"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    made = globals()
    if "console" not in made:
        console_class = inert_console_class()
        made["console"] = console_class(highlight=False, emoji=False)
        made["err_console"] = console_class(stderr=True, highlight=False, soft_wrap=True,
                                            emoji=False)
    return made[name]


def inert_console_class() -> type[Console]:
    """A rich ``Console`` that escapes (``protocol.text.inert_text.inert``) the text of every
    segment it writes, leaving only the escape codes rich makes itself (colours, cursor
    moves of a spinner: styles and control segments) raw. The renderers below escape
    untrusted text before layout (so widths are right); this is the net under them for a
    string that reaches a console some other way."""
    from rich.console import Console
    from rich.segment import Segment

    class InertConsole(Console):
        def _render_buffer(self, buffer: Iterable[Segment]) -> str:
            return super()._render_buffer(
                segment if segment.control or find_hidden(segment.text, allow="\t\n") is None
                else Segment(inert(segment.text), segment.style)
                for segment in buffer
            )

    return InertConsole


def _console() -> Console:
    console: Console = __getattr__("console")
    return console


def _err_console() -> Console:
    console: Console = __getattr__("err_console")
    return console

_STATUS_STYLE = {
    "running": "yellow",
    "success": "green",
    "error": "red",
    "refused": "magenta",
    "cancelled": "bright_black",
}
_STATUS_MARK = {
    "running": "…",
    "success": "✓",
    "error": "✗",
    "refused": "⊘",
    "cancelled": "−",
}
EXCERPT_LINES = 6
EXCERPT_WIDTH = 160


def to_json(value: Any) -> str:
    """The value as one line of JSON; exact, with DEL, C1, bidi and invisible characters
    written as ``\\u`` escapes too (``inert_json``), so the line is safe on a terminal."""
    return inert_json(msgspec.json.encode(msgspec.to_builtins(value)).decode())


def print_json(value: Any) -> None:
    sys.stdout.write(to_json(value) + "\n")
    sys.stdout.flush()


def error(message: str, hint: str = "") -> None:
    """One sentence on stderr, and what to do about it."""
    from rich.text import Text

    line = Text("error: ", style="bold red")
    line.append(inert(message))  # may quote a path, a command or the model's words
    if hint:
        line.append(f"\n  {inert(hint)}", style="yellow")
    _err_console().print(line)


def warning(message: str) -> None:
    from rich.text import Text

    line = Text("warning: ", style="bold yellow")
    line.append(inert(message))
    _err_console().print(line)


# -- tool calls ------------------------------------------------------------------------

_SHELL_SECTION = re.compile(r"^(Stdout|Stderr):(?: \(empty\))?$")
_WIDE_GAP = re.compile(r"[ \t]{3,}")
_FEW_LINES = {"read_file": 2, "glob": 4, "list_directory": 4, "grep_search": 4}


def result_excerpt(text: str, max_lines: int = EXCERPT_LINES) -> list[str]:
    """The few lines of a tool result worth showing a person.

    Shell results (``Exit code: N`` / ``Stdout:`` / ``Stderr:``) show the exit code only
    when it is not 0, then the output lines; other results their first lines."""
    # a tab is spacing, not a control to show (``read_file`` numbers lines with one)
    lines = [line.expandtabs(4).rstrip() for line in text.strip("\n").splitlines()]
    if lines and lines[0].startswith("Exit code: "):
        code = lines[0].removeprefix("Exit code: ")
        body = [line for line in lines[1:] if not _SHELL_SECTION.match(line) and line.strip()]
        head = [] if code == "0" else [f"exit code {code}"]
        lines = head + body if head or body else ["(no output)"]
    else:
        lines = [line for line in lines if line.strip()]
    lines = [_WIDE_GAP.sub("  ", line.strip()) for line in lines]
    shown = [_clip(line, EXCERPT_WIDTH) for line in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(f"… {len(lines) - max_lines} more line(s)")
    return shown


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def tool_line(name: str, args: str, status: str, result: str = "", excerpt: bool = True,
              exit_code: int | None = None, diff: str = "", path: str = "") -> Text:
    """``✓ name(args)`` and, under it, an excerpt of the result; a failed command says
    ``failed, exit N``; a file edit or write shows its file and its change as a diff
    instead of its arguments."""
    from rich.text import Text

    style = _STATUS_STYLE.get(status, "white")
    line = Text(f"{_STATUS_MARK.get(status, '•')} ", style=style)
    line.append(inert(name, multiline=False), style="bold")
    if diff and path:
        line.append(f" {inert(path, multiline=False)}", style="bright_black")
    elif args:
        line.append(f"({inert(args, multiline=False)})", style="bright_black")
    if status not in ("success", "running"):
        word = "failed" if status == "error" else status
        if exit_code is not None and exit_code != 0:
            word += f", exit {exit_code}"
        line.append(f"  {word}", style=style)
    if diff and path and status != "refused":
        for text in diff.splitlines():
            mark = text[:1]
            diff_style = "green" if mark == "+" else "red" if mark == "-" else "bright_black"
            line.append("\n    " + inert(text.expandtabs(4), multiline=False), style=diff_style)
        if status == "success":
            return line
    if excerpt and result and status != "running":
        lines = EXCERPT_LINES if status != "success" else _FEW_LINES.get(name, EXCERPT_LINES)
        for i, text in enumerate(result_excerpt(result, lines)):
            line.append(("\n  ⎿ " if i == 0 else "\n    ") + inert(text, multiline=False),
                        style="bright_black")
    return line


def tool_group(entries: Sequence[TranscriptEntry]) -> Panel:
    """Consecutive tool calls of a transcript in one box."""
    from rich.console import Group
    from rich.panel import Panel

    body = Group(*(tool_line(e.tool, e.args, e.status, e.text, exit_code=e.exit_code,
                             diff=e.diff, path=e.path)
                   for e in entries))
    ok = sum(e.status == "success" for e in entries)
    title = f"{len(entries)} tool call{'s' if len(entries) != 1 else ''}"
    if ok != len(entries):
        title += f", {len(entries) - ok} not successful"
    return Panel(body, title=title, title_align="left", border_style="bright_black", expand=False)


# -- a turn as it streams ----------------------------------------------------------------


class Elapsed:
    """``what`` followed by the whole seconds since it began (from 1 s on), drawn anew at
    each refresh of the spinner."""

    def __init__(self, what: str | Text) -> None:
        self.what = what
        self.started = time.monotonic()

    def __rich__(self) -> Text:
        from rich.text import Text

        line = Text.from_markup(self.what) if isinstance(self.what, str) else self.what.copy()
        seconds = int(time.monotonic() - self.started)
        if seconds >= 1:
            line.append(f" {seconds} s", style="bright_black")
        return line


class TurnPrinter:
    """Shows one turn's events as they arrive. ``close()`` stops any spinner."""

    def __init__(self, out: Console | None = None, show_user: bool = True) -> None:
        self.out = out or _console()
        self.show_user = show_user  # False where the prompt already shows what was accepted
        self._in_text = False
        self._status: Status | None = None
        self._transcript: Transcript | None = None
        self.tool_calls = 0
        self.ended: TurnEnded | None = None

    # spinner (terminals only)
    def waiting(self, what: str | Text) -> None:
        """A spinner line while nothing visible happens (model thinking, tool running),
        with the seconds it has been waiting: a wait that never ends must look like one."""
        if not self.out.is_terminal:
            return
        shown = Elapsed(what)
        if self._status is None:
            self._status = self.out.status(shown, spinner="dots")
            self._status.start()
        else:
            self._status.update(shown)

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _end_text(self) -> None:
        self._stop_spinner()
        if self._in_text:
            self.out.print()
            self._in_text = False

    def close(self) -> None:
        self._end_text()

    def show(self, reply: ControlReply) -> None:
        from rich.text import Text

        if isinstance(reply, TextChunk):
            self._stop_spinner()
            # each chunk on its own: inert works per character, so a sequence split
            # across chunks is escaped like a whole one
            self.out.print(Text(inert(reply.text)), end="", soft_wrap=True)
            self._in_text = True
        elif isinstance(reply, ToolShown):
            self._end_text()
            if reply.status == "running":
                running = Text(inert(reply.name, multiline=False), style="bold")
                running.append(f" {inert(reply.args, multiline=False)}", style="bright_black")
                self.waiting(running)
            else:
                self.tool_calls += 1
                self.out.print(tool_line(reply.name, reply.args, reply.status, reply.result,
                                         exit_code=reply.exit_code, diff=reply.diff,
                                         path=reply.path))
                self.waiting("[bright_black]thinking…[/]")
        elif isinstance(reply, Notice):
            self._end_text()
            self.out.print(Text(f"ℹ {inert(reply.text)}", style="cyan"))
        elif isinstance(reply, ApprovalNeeded):
            self._end_text()
        elif isinstance(reply, Transcript):
            self._end_text()
            self._transcript = reply
            show_transcript(reply, self.out, self.show_user)
        elif isinstance(reply, TurnEnded):
            self._end_text()
            self.ended = reply
            show_turn_end(reply, self._transcript, self.tool_calls, self.out)
        elif isinstance(reply, ErrorReply):
            self._end_text()
            error(reply.message)


def show_transcript(t: Transcript, out: Console | None = None, show_user: bool = True) -> None:
    """User text, model text, and tool calls in groups, as if the turn had just run."""
    from rich.text import Text

    out = out or _console()
    group: list[TranscriptEntry] = []
    for entry in (*t.entries, None):
        if entry is not None and entry.kind == "tool":
            group.append(entry)
            continue
        if group:
            out.print(tool_group(group))
            group = []
        if entry is None:
            break
        if entry.kind == "user":
            if show_user:
                out.print(Text(f"❯ {inert(entry.text)}", style="bold cyan"))
        else:
            out.print(Text(inert(entry.text)), soft_wrap=True)


def accept_summary(end: TurnEnded, transcript: Transcript | None) -> Text:
    """``✓ accepted in 12 ms · 1 file applied (created a.py) · saved 0.84 s``; with more
    than one file, every change follows on a line of its own, in full (what a Tab wrote is
    never hidden behind an ellipsis, design §11), then the runs-later warning and the
    ignored-files summary (``changes_view``). All of it is what the apply did."""
    from rich.text import Text

    line = Text("✓ accepted", style="bold green")
    line.append(f" in {end.elapsed_s * 1000:.0f} ms", style="green")
    if transcript is not None and not transcript.changes and transcript.files:
        # From a service that sends no per-file changes: its list of paths, as it was.
        files = transcript.files
        if len(files) == 1:
            line.append(f" · 1 file applied ({quote_name(files[0])})")
        else:
            line.append(f" · {len(files)} files applied")
        line.append(f" · saved {transcript.time_saved_s:.2f} s", style="bold")
        for name in files if len(files) > 1 else ():
            line.append(f"\n  wrote {quote_name(name)}")
    elif transcript is not None:
        listed = [c for c in transcript.changes if not c.summarized]
        if len(listed) == 1:
            line.append(f" · 1 file applied ({change_line(listed[0])})")
        elif listed:
            line.append(f" · {len(listed)} files applied")
        else:
            line.append(" · no file changes")
        line.append(f" · saved {transcript.time_saved_s:.2f} s", style="bold")
        append_listing(
            line,
            transcript.changes,
            transcript.ignored_skipped,
            applied=True,
            one_line=len(listed) == 1,
            held=transcript.ignored_held,
            held_in=transcript.ignored_held_in,
            links_held=transcript.links_held,
        )
    elif end.message:
        line.append(f" · {inert(end.message)}")
    return line


def show_turn_end(
    end: TurnEnded, transcript: Transcript | None = None, tool_calls: int = 0,
    out: Console | None = None,
) -> None:
    from rich.text import Text

    out = out or _console()
    if end.reason == "accepted":
        out.print(accept_summary(end, transcript))
    elif end.reason == "completed":
        calls = f" · {tool_calls} tool call{'s' if tool_calls != 1 else ''}" if tool_calls else ""
        out.print(Text(f"done in {end.elapsed_s:.2f} s{calls}", style="bright_black"))
    elif end.reason == "aborted":
        out.print(Text("⏹ turn aborted", style="yellow"))
    elif end.reason == "debounced":
        out.print(Text(end.message or "accept ignored (pressed twice)", style="bright_black"))
    elif end.reason == "error":
        message, hint = explain_model_error(end.message)
        error(message, hint)
    elif end.reason == "refused":
        line = Text("⊘ the model declined: ", style="bold magenta")
        line.append(inert(end.message))
        out.print(line)
    else:
        out.print(Text(inert(f"{end.reason.replace('_', ' ')}: {end.message}"), style="yellow"))


def explain_model_error(message: str) -> tuple[str, str]:
    """The service's one-sentence model error, and what the person can do about it."""
    lower = message.lower()
    restart = "after changing settings restart the service: `specrun stop && specrun start`"
    # the kinds whose sentence names an HTTP status that would read as a key problem
    if "out of credit or quota" in lower:
        return message, "Add credit or raise the quota in the provider's console, or use " \
                        f"another key (`specrun config set apiKey <key>`); {restart}."
    if "content filter" in lower:
        return message, "Rephrase the request; the provider's moderation refused it."
    if "with an html page" in lower or "tls certificate" in lower or "tls handshake" in lower:
        return message, f"Check baseUrl and the network (`specrun config show`); {restart}."
    if "api key" in lower or "http 401" in lower or "http 403" in lower:
        return message, (
            "Set OPENAI_API_KEY (or DASHSCOPE_API_KEY for DashScope) or "
            f"`specrun config set apiKey <key>`; {restart}."
        )
    # the model client's transport sentences (protocol/model/endpoint_errors.py): a
    # refused or unresolvable endpoint, or one that timed out, sent nothing or stopped
    # sending (a slow local model is a first-time user's usual case)
    if any(w in lower for w in ("refused the connection", "could not be resolved",
                                "could not connect", "connect", "timed out",
                                "sent nothing for", "stopped sending for", "took longer than")):
        return message, (
            "Check that the model server is running and that baseUrl is right "
            f"(`specrun config show`); {restart}."
        )
    if "http 404" in lower:
        return message, f"Check baseUrl and the model name (`specrun config show`); {restart}."
    if "rate limit" in lower:
        return message, "Wait a moment and ask again."
    return message or "The model request failed.", "See `specrun logs` for details."


# -- status, workers, suggestion, stats ------------------------------------------------


def workers_table(workers: Iterable[WorkerInfo], verbose: bool = False) -> Table:
    """One row per worker. Its pid is what `specrun workers` is for (a process to look
    at); the job's id and the overlay's path are internals, shown with ``--verbose``."""
    from rich.table import Table

    table = Table(show_edge=False, header_style="bold", box=None, pad_edge=False)
    columns = ("pid", "state", "job", "kind", "overlay", "age", "rss", "sandbox")
    shown = [c for c in columns if verbose or c not in ("job", "overlay")]
    for col in shown:
        table.add_column(col)
    for w in workers:
        rss = f"{w.rss_bytes / 2**20:.1f} MiB" if w.rss_bytes else "-"
        row = dict(zip(columns, (
            str(w.pid), w.state, w.job_id or "-", w.job_kind or "-", w.overlay_dir or "-",
            f"{w.age_s:.1f}s", rss, w.sandbox,
        ), strict=True))
        table.add_row(*cells(*(row[c] for c in shown)))
    return table


def workers_summary(workers: Sequence[WorkerInfo]) -> str:
    """``3 workers: 2 idle, 1 busy``: the pool at a glance, with no process ids."""
    counts: dict[str, int] = {}
    for w in workers:
        counts[w.state] = counts.get(w.state, 0) + 1
    states = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    noun = "worker" if len(workers) == 1 else "workers"
    return f"{len(workers)} {noun}" + (f": {states}" if states else "")


def cells(*values: str) -> list[Text]:
    """Table cells that are shown as written: a ``str`` cell would be read as markup."""
    from rich.text import Text

    return [Text(inert(value, multiline=False)) for value in values]


def show_status(s: StatusReply, out: Console | None = None, verbose: bool = False) -> None:
    """The service at a glance; its pid, the session's id and each worker's process and
    overlay only with ``verbose`` (``specrun --verbose status``; ``--json`` has them all)."""
    from rich.text import Text

    out = out or _console()
    where = "embedded scripted model" if s.scripted_model else "endpoint"
    on = {True: ("on", "green"), False: ("off", "yellow")}
    line = Text.assemble(("specrun", "bold"), " serving ",
                         (inert(s.project, multiline=False), "cyan"))
    out.print(line)
    if verbose:
        out.print(Text(inert(f"  pid {s.pid}, up {_duration(s.uptime_s)}, "
                             f"session {s.session_id}")))
    else:
        out.print(Text(f"  up {_duration(s.uptime_s)}"))
    # the embedded model's local address is an internal; a real endpoint's is not
    endpoint = "" if s.scripted_model and not verbose else f" {s.model_endpoint}"
    line = Text.assemble("  model ", (inert(s.model, multiline=False), "bold"),
                         inert(f" (fast: {s.fast_model}), {where}{endpoint}",
                               multiline=False))
    out.print(line)
    out.print(Text(f"  approval mode {s.approval_mode.value}, worker sandbox {s.sandbox}"))
    out.print(Text.assemble("  suggestions ", on[s.suggestions_enabled], ", speculation ",
                            on[s.speculation_enabled]))
    if s.context is not None:
        from coordinator.cli.context_fill import context_line

        out.print(Text(f"  {context_line(s.context)}"))
    if s.model_wait is not None:
        out.print(Text(f"  ⏳ {inert(s.model_wait.text, multiline=False)}", style="yellow"))
    if not verbose:
        out.print(Text(f"  {inert(workers_summary(s.workers))} (`specrun workers` lists them)"))
        return
    out.print(Text(f"  {len(s.workers)} worker(s):"))
    out.print(workers_table(s.workers, verbose=True))


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def speculation_line(s: SpeculationInfo, indent: str = "  ") -> Text:
    from rich.text import Text

    marks = {"running": ("⟳ running", "yellow"), "completed": ("✓ completed", "green"),
             "boundary": ("⏸ stopped at a boundary", "magenta"),
             "accepted": ("✓ accepted", "green"), "aborted": ("⏹ aborted", "bright_black"),
             "failed": ("✗ failed", "red")}
    label, style = marks.get(s.status, (s.status, "white"))
    line = Text(f"{indent}speculation ")
    line.append(label, style=style)
    files = len(s.files_written)
    line.append(
        f": {s.turns} turn(s), {s.tool_uses} tool use(s), {files} file(s), {s.elapsed_s:.2f}s",
        style="bright_black",
    )
    # the worker's pid is an internal: in --json and `specrun workers`, not here
    if s.boundary is not None:
        # The raw `code:detail` stays in --json; a person reads it in words.
        line.append(f"\n{indent}{inert(describe_boundary(s.boundary), multiline=False)}",
                    style=style)
    if s.pipelined_suggestion:
        line.append(f"\n{indent}next: {inert(s.pipelined_suggestion, multiline=False)}",
                    style="bright_black")
    return line


def show_suggestion(reply: SuggestionReply, out: Console | None = None) -> None:
    from rich.text import Text

    out = out or _console()
    if reply.text is None and reply.pending:
        out.print(Text("suggestion pending: the next prompt is being predicted "
                       "(`specrun suggestion --wait` waits for it)", style="bright_black"))
        return
    if reply.text is None:
        why = f" ({reply.suppressed_reason})" if reply.suppressed_reason else ""
        out.print(Text(inert(f"no suggestion{why}"), style="bright_black"))
        return
    line = Text("❯ ", style="bold")
    line.append(inert(reply.text, multiline=False), style="bright_black")
    if not reply.visible:
        line.append("  (not shown yet)", style="bright_black italic")
    alternatives = reply.branches[1:]
    if alternatives or (reply.branches and reply.branches[0].rank != 0):
        # the number `specrun accept --branch` takes (typing can leave only a lower one)
        line.append(f"  ({branch_name(reply.branches[0].rank)})", style="bright_black")
    out.print(line)
    if reply.speculation is not None:
        out.print(speculation_line(reply.speculation))
    elif reply.speculation_skipped:
        out.print(Text(f"  {inert(_not_speculated(reply.speculation_skipped))}",
                       style="bright_black"))
    if alternatives:
        out.print(Text(f"  {len(alternatives)} more guess{'es' if len(alternatives) != 1 else ''}"
                       " (↓ in `specrun chat`, or `specrun accept --branch N`):",
                       style="bright_black"))
        for branch in alternatives:
            out.print(branch_lines(branch))


_SKIPPED = {"budget": "the speculation budget is spent"}


def branch_lines(branch: Branch, indent: str = "  ") -> Text:
    """One alternative suggestion: its text and branch number, then its speculation."""
    from rich.text import Text

    line = Text(f"{indent}❯ ", style="bold")
    line.append(inert(branch.text, multiline=False), style="bright_black")
    line.append(f"  ({branch_name(branch.rank)})", style="bright_black")
    if branch.speculation is not None:
        line.append("\n")
        line.append_text(speculation_line(branch.speculation, indent + "  "))
    else:
        line.append(f"\n{indent}  {inert(_not_speculated(branch.skipped))}",
                    style="bright_black")
    return line


def _not_speculated(why: str | None) -> str:
    return f"not speculated ({_SKIPPED.get(why, why)})" if why else "not speculated"


def show_stats(r: StatsReply, out: Console | None = None) -> None:
    from rich.table import Table

    out = out or _console()
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()

    def row(*values: str) -> None:  # reasons and purposes come from the service: as text
        table.add_row(*cells(*values))

    by_method = ", ".join(f"{k} {v}" for k, v in sorted(r.accepted_by_method.items()))
    row("suggestions shown", str(r.suggestions_shown))
    accepted = f"{r.suggestions_accepted}" + (f" ({by_method})" if by_method else "")
    row("  accepted", accepted)
    if r.accepted_by_rank and set(r.accepted_by_rank) != {0}:
        # Only once an alternative (``speculationBranches``) was taken: branch 1 is the top guess.
        row("    by branch", ", ".join(f"{_rank_name(rank)}: {n}" for rank, n
                                         in sorted(r.accepted_by_rank.items())))
    typing = {k: v for k, v in r.accepted_by_typing.items() if v}
    if typing:
        row("    while typing", ", ".join(
            f"{_TYPING.get(k, k)} {n}" for k, n in sorted(typing.items())))
    row("  ignored", str(r.suggestions_ignored))
    row("  suppressed", _by_reason(r.suggestions_suppressed.total,
                                             r.suggestions_suppressed.by_reason))
    if r.suggestions_made_on_return:
        # skipped while nobody looked (unfocused / away), then made when someone came back
        row("    made on return", str(r.suggestions_made_on_return))
    row("speculations completed", str(r.speculations_completed))
    row("  stopped at a boundary", _by_reason(r.speculations_boundary.total,
                                              r.speculations_boundary.by_reason,
                                              boundary_kind))
    row("  aborted", str(r.speculations_aborted))
    row("  failed", str(r.speculations_failed))
    row(
        "time saved",
        f"{r.time_saved_total_s:.2f} s total, median {r.time_saved_median_s:.2f} s "
        f"over {len(r.time_saved_s)} accept(s)",
    )
    if r.speculations_skipped.total:
        row("suggestions not speculated", _by_reason(
            r.speculations_skipped.total, r.speculations_skipped.by_reason))
    spec = r.speculation_tokens
    if spec.total:
        # What speculation costs: the tokens its workers spent, by what became of them.
        split = (f"{spec.total:,}: {spec.accepted:,} accepted ({spec.accepted / spec.total:.0%}),"
                 f" {spec.discarded:,} thrown away")
        row("speculation tokens",
                      split + (f", {spec.pending:,} pending" if spec.pending else ""))
    if r.time_saved_per_1k_tokens_s is not None:
        row("  time saved", f"{r.time_saved_per_1k_tokens_s:.3f} s per 1,000 tokens")
    cost = r.branch_cost
    if len(cost.by_rank) > 1 or set(cost.by_rank) - {0}:
        # What each rank of alternative spent, and what the branches thrown away cost.
        spent = [f"{_rank_name(rank)}: {_spend(s)}" for rank, s in sorted(cost.by_rank.items())]
        row("speculation branches", "; ".join(spent))
        row("  thrown away", _spend(cost.discarded))
    if r.speculation_budget is not None:
        b = r.speculation_budget
        per = "per hour" if b.window == "hour" else "per session"
        state = " (spent: not speculating)" if b.exhausted else ""
        row("speculation budget", f"{b.spent:,} of {b.tokens:,} {per}{state}")
    out.print(table)
    used = {k: v for k, v in r.tokens.items() if v.requests}
    if used:
        tokens = Table(title="tokens by purpose", title_justify="left", box=None, pad_edge=False)
        for name in ("purpose", "requests", "prompt", "cached prompt", "completion"):
            tokens.add_column(name, justify="left" if name == "purpose" else "right")
        for purpose, c in used.items():
            cached = f"{c.cached_prompt:,}" + (f" ({c.cached_prompt / c.prompt:.0%})"
                                               if c.prompt else "")
            tokens.add_row(*cells(purpose, f"{c.requests:,}", f"{c.prompt:,}", cached,
                                  f"{c.completion:,}"))
        out.print(tokens)


_TYPING = {"prefix_kept": "typed its beginning first", "exact_match": "typed in full"}


def _rank_name(rank: int) -> str:
    """A branch as a person counts them (``protocol.text.branch_number``): branch 1 is
    the top guess."""
    return branch_name(rank) + (" (top)" if rank == 0 else "")


def _spend(spend: BranchSpend) -> str:
    return f"{spend.tokens:,} tokens, {spend.cpu_s:.2f} s CPU"


def _by_reason(total: int, by_reason: dict[str, int],
               words: Callable[[str], str] | None = None) -> str:
    """``3 (shell command 2, cold cache 1)``: each reason's code in words (``--json``
    keeps the codes)."""
    if not by_reason:
        return str(total)
    name = words or (lambda code: code.replace("_", " "))
    return f"{total} (" + ", ".join(f"{name(k)} {v}" for k, v in sorted(by_reason.items())) + ")"


def show_reply(reply: ControlReply, verbose: bool = False) -> None:
    """A command's final reply, drawn for a person (``verbose``: with the internals,
    ``specrun --verbose``)."""
    from rich.text import Text

    from protocol.wire.control import DiffReply, OkReply, UndoReply, WorkersReply

    if isinstance(reply, StatusReply):
        show_status(reply, verbose=verbose)
    elif isinstance(reply, WorkersReply):
        _console().print(workers_table(reply.workers, verbose=verbose))
    elif isinstance(reply, SuggestionReply):
        show_suggestion(reply)
    elif isinstance(reply, StatsReply):
        show_stats(reply)
    elif isinstance(reply, Transcript):
        show_transcript(reply)
    elif isinstance(reply, DiffReply):
        from coordinator.cli.changes_view import diff_text

        _console().print(diff_text(reply), soft_wrap=True)
    elif isinstance(reply, OkReply):
        _console().print(Text(inert(reply.message or "ok")))
    elif isinstance(reply, UndoReply):
        from coordinator.cli.undo_view import undo_text

        _console().print(Text(undo_text(reply)))
    else:
        print_json(reply)
