"""How replies look in a terminal (rich) and as JSON (msgspec)."""

from __future__ import annotations

import sys
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table
from rich.text import Text

from protocol.control import (
    ApprovalNeeded,
    ControlReply,
    ErrorReply,
    Notice,
    StatusReply,
    TextChunk,
    ToolShown,
    Transcript,
    TurnEnded,
    WorkerInfo,
)

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

_STATUS_STYLE = {
    "running": "yellow",
    "success": "green",
    "error": "red",
    "refused": "magenta",
    "cancelled": "dim",
}


def to_json(value: Any) -> str:
    return msgspec.json.encode(msgspec.to_builtins(value)).decode()


def print_json(value: Any) -> None:
    sys.stdout.write(to_json(value) + "\n")
    sys.stdout.flush()


def tool_line(name: str, args: str, status: str, result: str = "") -> Text:
    style = _STATUS_STYLE.get(status, "white")
    line = Text("  ● ", style=style)
    line.append(name, style="bold")
    if args:
        line.append(f"({args})", style="dim")
    line.append(f"  {status}", style=style)
    if result and status != "running":
        excerpt = result.strip().splitlines()[0] if result.strip() else ""
        if excerpt:
            line.append(f"\n    ⎿ {excerpt[:200]}", style="dim")
    return line


class TurnPrinter:
    """Streams one turn's events to the terminal as they arrive."""

    def __init__(self) -> None:
        self._in_text = False

    def _end_text(self) -> None:
        if self._in_text:
            console.print()
            self._in_text = False

    def show(self, reply: ControlReply) -> None:
        if isinstance(reply, TextChunk):
            console.print(reply.text, end="", markup=False, soft_wrap=True)
            self._in_text = True
        elif isinstance(reply, ToolShown):
            self._end_text()
            if reply.status != "running":
                console.print(tool_line(reply.name, reply.args, reply.status, reply.result))
        elif isinstance(reply, Notice):
            self._end_text()
            console.print(f"[cyan]ℹ {reply.text}[/cyan]")
        elif isinstance(reply, ApprovalNeeded):
            self._end_text()
        elif isinstance(reply, Transcript):
            self._end_text()
            show_transcript(reply)
        elif isinstance(reply, TurnEnded):
            self._end_text()
            show_turn_end(reply)
        elif isinstance(reply, ErrorReply):
            self._end_text()
            err_console.print(f"[red]error:[/red] {reply.message}")


def show_transcript(t: Transcript) -> None:
    for entry in t.entries:
        if entry.kind == "user":
            console.print(Text("> " + entry.text, style="bold cyan"))
        elif entry.kind == "model":
            console.print(entry.text, markup=False)
        else:
            console.print(tool_line(entry.tool, entry.args, entry.status, entry.text))
    if t.files:
        console.print(f"[green]applied {len(t.files)} file(s):[/green] " + ", ".join(t.files))


def show_turn_end(end: TurnEnded) -> None:
    if end.reason == "accepted":
        console.print(f"[green]✓ accepted speculation[/green] [dim]({end.message}; {end.elapsed_s * 1000:.0f} ms)[/dim]")
    elif end.reason == "completed":
        console.print(f"[dim]done in {end.elapsed_s:.2f}s[/dim]")
    elif end.reason == "aborted":
        console.print("[yellow]turn aborted[/yellow]")
    else:
        console.print(f"[yellow]{end.reason}[/yellow]: {end.message}")


def workers_table(workers: tuple[WorkerInfo, ...]) -> Table:
    table = Table(show_edge=False, header_style="bold")
    for col in ("pid", "state", "job", "overlay", "age", "rss", "sandbox"):
        table.add_column(col)
    for w in workers:
        rss = f"{w.rss_bytes / 2**20:.1f} MiB" if w.rss_bytes else "-"
        table.add_row(
            str(w.pid), w.state, w.job_id or "-", w.overlay_dir or "-", f"{w.age_s:.1f}s", rss, w.sandbox
        )
    return table


def show_status(s: StatusReply) -> None:
    model = "embedded scripted model" if s.scripted_model else s.model_endpoint
    console.print(f"[bold]specrun[/bold] serving [cyan]{s.project}[/cyan]")
    console.print(f"  pid {s.pid}, up {s.uptime_s:.1f}s, session {s.session_id}")
    console.print(f"  model {s.model} (fast: {s.fast_model}) at {model} ({s.model_endpoint})")
    console.print(f"  approval mode {s.approval_mode}, sandbox {s.sandbox}")
    console.print(
        f"  suggestions {'on' if s.suggestions_enabled else 'off'}, "
        f"speculation {'on' if s.speculation_enabled else 'off'}"
    )
    console.print(workers_table(s.workers))
