"""How a speculation's file changes are shown: after Tab (the accept listing) and before it
(``specrun diff``). Both come from the coordinator's applied-set computation, never from a
worker's claim: one line per created, modified, deleted or mode-changed file; files that run
later without a key press on a warning line of their own; files git ignores summed up on one
line (unless they run later: those are listed, with their diff); conflicts said plainly.
Names are shown through ``protocol.text.inert_text.quote_name``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from protocol.text.branch_number import branch_name
from protocol.text.inert_text import inert, quote_name
from protocol.wire.control import DiffReply, FileChange, FileDiff

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.text import Text

_VERB = {"created": "created", "modified": "modified", "deleted": "deleted", "mode": "mode"}
_STYLE = {"created": "green", "modified": "yellow", "deleted": "red", "mode": "cyan"}


def change_line(change: FileChange) -> str:
    """``modified src/app.py (+x)``, ``created link libz.so -> libz.so.1``; a conflict adds
    why Tab refuses it."""
    verb = _VERB[change.status]
    mode = f" ({change.mode})" if change.mode and change.status != "mode" else ""
    if change.status == "mode":
        verb = f"mode {change.mode}"
    line = f"{verb} {quote_name(change.path)}{mode}"
    if change.link:
        line = f"{verb} link {quote_name(change.path)} -> {quote_name(change.link)}"
    if change.conflict:
        line += f" — conflict: the real file was {inert(change.conflict)} since"
    return line


def ignored_line(changes: Sequence[FileChange], skipped: int, *, applied: bool) -> str:
    """``…and 705 files ignored by git (3 skipped: changed meanwhile)``; '' if none."""
    count = len(changes) + skipped if applied else len(changes)
    if not count:
        return ""
    noun = "file" if count == 1 else "files"
    if applied:
        tail = f" ({skipped} skipped: changed meanwhile)" if skipped else ""
    else:
        conflicts = sum(1 for c in changes if c.conflict)
        tail = f" ({conflicts} will be skipped: changed meanwhile)" if conflicts else ""
    return f"…and {count} {noun} ignored by git{tail}"


def held_line(count: int, where: Sequence[str]) -> str:
    """``…and 335 files git ignores that its commands wrote were not applied (build/)``;
    '' if none."""
    if not count:
        return ""
    noun = "file" if count == 1 else "files"
    places = ", ".join(quote_name(w) for w in where)
    return (
        f"…and {count} {noun} git ignores that its commands wrote were not applied "
        f"(build output and caches: {places}; applyIgnoredOutput applies them)"
    )


def links_held_line(held: Sequence[str]) -> str:
    """``…and 2 symlinks its commands made are not created: up -> ..: its target leaves
    the project, …``; '' if none. Each entry is already quoted by the coordinator."""
    if not held:
        return ""
    noun = "symlink" if len(held) == 1 else "symlinks"
    return f"…and {len(held)} {noun} its commands made are not created: {'; '.join(held)}"


def runs_later_line(changes: Sequence[FileChange]) -> str:
    """The warning for files that run later without a key press; '' if none."""
    later = [c for c in changes if c.runs_later]
    if not later:
        return ""
    names = ", ".join(quote_name(c.path) for c in later)
    return f"⚠ runs later without a key press (check before you commit, build or open): {names}"


def append_listing(
    line: Text,
    changes: Sequence[FileChange],
    ignored_skipped: int,
    *,
    applied: bool,
    one_line: bool = False,
    held: int = 0,
    held_in: Sequence[str] = (),
    links_held: Sequence[str] = (),
) -> None:
    """Append the listing to ``line``: one indented line per listed file (none with
    ``one_line``: the caller named the only one already), then the runs-later warning, then
    the ignored-files summary."""
    listed = [c for c in changes if not c.summarized]
    ignored = [c for c in changes if c.summarized]
    for change in [] if one_line else listed:
        line.append(f"\n  {change_line(change)}", style=_STYLE[change.status])
    warning = runs_later_line(changes)
    if warning:
        line.append(f"\n  {warning}", style="bold yellow")
    for summary in (
        ignored_line(ignored, ignored_skipped, applied=applied),
        held_line(held, held_in),
        links_held_line(links_held),
    ):
        if summary:
            line.append(f"\n  {summary}", style="bright_black")


_STATE = {
    "running": "still running: what it wrote so far",
    "completed": "completed: Tab applies this",
    "boundary": "stopped at a boundary: Tab runs the prompt as a normal turn instead",
    "failed": "failed: Tab runs the prompt as a normal turn instead",
    "aborted": "aborted",
    "accepted": "accepted",
}


def file_line(item: FileDiff) -> str:
    """``modified src/calc.py  +1 -1``: what Tab does to one file of a preview."""
    line = change_line(item.change)
    if item.binary:
        line += "  (binary)"
    elif item.too_large and item.size >= 0:
        line += (f"  (not shown: too large to diff in time, {item.size:,} bytes, "
                 f"sha256 {item.sha256[:16]}…)")
    elif item.too_large:
        line += "  (not shown: not a plain file)"
    elif item.added or item.removed:
        line += f"  +{item.added} -{item.removed}"
    return line


def conflicts_line(changes: Sequence[FileChange]) -> str:
    """Why Tab would refuse the whole accept now (files changed since the speculation read
    them); '' if none."""
    conflicts = [c for c in changes if c.conflict and not c.ignored]
    if not conflicts:
        return ""
    names = ", ".join(quote_name(c.path) for c in conflicts)
    return (
        f"⚠ Tab would refuse all of it now: {names} changed in the project since the "
        "speculation read it"
    )


def state_phrase(reply: DiffReply) -> str:
    """``completed: Tab applies this``: what the speculation's state means for Tab."""
    return _STATE[reply.status]


DiffLineKind = Literal["file", "hunk", "added", "removed", "context"]


def diff_lines(diff: str) -> list[str]:
    """A unified diff's lines, cut at newlines only: a carriage return or another line
    break inside a line stays in it (shown escaped), so a file's text can never pass for a
    line of its own."""
    return diff.split("\n")[:-1] if diff.endswith("\n") else diff.split("\n")


def classified_lines(diff: str) -> list[tuple[str, DiffLineKind]]:
    """One file's unified diff, each line with what it is, for its colour. Only the lines
    before the first hunk are file lines: after it, the first character decides, so a
    removed ``-- comment`` (``--- comment`` in the diff) is a removal and an added
    ``++i`` an addition, not a file line shown in the file lines' style."""
    out: list[tuple[str, DiffLineKind]] = []
    in_hunks = False
    for line in diff_lines(diff):
        kind: DiffLineKind
        if line.startswith("@@"):
            in_hunks, kind = True, "hunk"
        elif not in_hunks and line.startswith(("---", "+++")):
            kind = "file"
        elif line.startswith("+"):
            kind = "added"
        elif line.startswith("-"):
            kind = "removed"
        else:
            kind = "context"
        out.append((line, kind))
    return out


def diff_text(reply: DiffReply) -> RenderableType:
    """``specrun diff``: the header, one line per file with its counts, each file's diff
    (colored, inert), the runs-later warning, the ignored-files summary, and what Tab would
    refuse."""
    from rich.text import Text

    out = Text("What Tab would do with ", style="bold", end="")
    out.append(f"“{inert(reply.suggestion, multiline=False)}”", style="bold cyan")
    out.append(f" ({branch_name(reply.rank)}; {state_phrase(reply)})")
    if reply.refused:
        out.append(f"\n  {inert(reply.refused)}", style="bold red")
        out.end = "\n"
        return out
    changes = [f.change for f in reply.files]
    listed = [f for f in reply.files if not f.change.summarized]
    if not changes and not reply.links_held:
        out.append("\n  no file changes", style="bright_black")
    for item in listed:
        out.append(f"\n  {file_line(item)}", style=_STYLE[item.change.status])
    tail = Text(style=out.style)  # the head's base style covers the whole output
    warning = runs_later_line(changes)
    if warning:
        tail.append(f"\n  {warning}", style="bold yellow")
    summary = ignored_line([c for c in changes if c.summarized], 0, applied=False)
    for line in (summary, links_held_line(reply.links_held)):
        if line:
            tail.append(f"\n  {line}", style="bright_black")
    refuse = conflicts_line(changes)
    if refuse:
        tail.append(f"\n  {refuse}", style="bold red")
    return _DiffView(out, [item.diff for item in listed if item.diff], tail)


_DIFF_STYLE: dict[DiffLineKind, str] = {
    "file": "bold", "hunk": "cyan", "added": "green", "removed": "red", "context": ""}


class _DiffView:
    """``specrun diff``'s whole output: ``head`` (printed without its own line end), a blank
    line and each file's diff lines, then ``tail``. The diff lines go out as plain segments:
    one rich ``Text`` of them is wrapped as a whole when printed, and a 234,000-line diff
    (a shuffled 120,000-line file) took 6-9 s of CPU there, against 0.5 s this way, with
    the same bytes out. Each line is already inert (``inert`` escapes every control
    character ``Text`` would strip)."""

    def __init__(self, head: Text, diffs: list[str], tail: Text) -> None:
        self.head, self.diffs, self.tail = head, diffs, tail

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.segment import Segment
        from rich.style import Style

        # As spans of one Text would: the head's base style under each kind's own.
        base = console.get_style(self.head.style) if self.head.style else Style.null()
        styles = {kind: base + (console.get_style(name) if name else Style.null())
                  for kind, name in _DIFF_STYLE.items()}
        yield self.head
        for diff in self.diffs:
            yield Segment("\n")
            for line, kind in classified_lines(diff):
                yield Segment("\n")
                yield Segment(inert(line, multiline=False), styles[kind])
        yield self.tail
