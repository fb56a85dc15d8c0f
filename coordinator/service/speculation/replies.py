"""What the clients are told of the speculation core: the shown suggestion, what Tab
would do with one of its branches, the stats."""

from __future__ import annotations

import asyncio
from pathlib import Path

from coordinator.service.speculation.preview import preview_files, transcript_of
from coordinator.service.speculation.stats import Stats
from coordinator.service.speculation.suggestion import ShownSuggestion, Suggestion
from coordinator.settings import Settings
from protocol.wire.control import DiffReply, StatsReply, SuggestionReply, TranscriptEntry


def suggestion_reply(
    shown: ShownSuggestion, pending: bool, req_id: int, transcript: int | None = None,
    full: bool = False,
) -> SuggestionReply:
    """The shown suggestion; ``transcript``: the rank of a branch whose speculation so far
    (text, tool calls and results, whole with ``full``) the reply carries."""
    current = shown.current
    if current is None:
        return SuggestionReply(req_id, None, False, shown.last_suppressed, None, pending=pending)
    branches = tuple(branch.info() for branch in current.branches)
    entries: tuple[TranscriptEntry, ...] = ()
    chosen = current.branch(transcript) if transcript is not None else None
    if chosen is not None and chosen.speculation is not None:
        spec = chosen.speculation
        messages = spec.outcome.messages if spec.outcome is not None else None
        entries = tuple(transcript_of(chosen.text, messages, spec.progress, full=full))
    return SuggestionReply(
        req_id,
        current.text,
        current.visible,
        None,
        branches[0].speculation,  # the top live branch's, read once for both
        speculation_skipped=current.skipped,
        branches=branches,
        typed=current.typed,
        transcript=entries,
    )


async def diff_reply(
    current: Suggestion | None,
    project_root: Path,
    settings: Settings,
    req_id: int,
    index: int | None,
    stat: bool,
) -> DiffReply | None:
    """What Tab would do now with the branch of rank ``index`` (None: the top live
    one), computed as accept computes its listing; None if there is no such branch
    with a speculation."""
    if current is None:
        return None
    branch = current.branch(index) if index is not None else current.top
    spec = branch.speculation if branch is not None else None
    if branch is None or spec is None or not spec.overlay_dir:
        return None
    written = dict(spec.outcome.written_files) if spec.outcome else dict(spec.progress.written)
    files, refused, links_held = await asyncio.to_thread(
        preview_files, str(project_root), spec.overlay_dir, written, settings, stat
    )
    return DiffReply(req_id, branch.rank, branch.text, spec.status, files, refused, links_held)


def stats_reply(stats: Stats, current: Suggestion | None, req_id: int) -> StatsReply:
    # Only a speculation that can still be accepted is undecided; a failed or boundary
    # one is thrown away already (accepting it runs the prompt as a normal turn).
    specs = current.speculations() if current else []
    pending = [s.id for s in specs if s.status in ("running", "completed")]
    return stats.reply(req_id, pending_speculation=pending)
