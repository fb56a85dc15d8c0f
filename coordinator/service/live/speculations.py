"""Each live speculation as the live view shows it: its steps (the model's text, its tool
calls) as its worker reports them, and its diff (what Tab would do now), recomputed in a
thread when it wrote a file or ended, or when the person changed one of its files in the
project. Both are kept for the newest ``MAX_TRACKED`` speculations; ``LiveState`` sends the
steps as they come and asks for the diffs of a snapshot."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from coordinator.service.live.hub import LiveHub
from coordinator.service.speculation import Progress, preview_files
from protocol.wire.chat import ToolCall, ToolResult
from protocol.wire.control import FileDiff, LiveActivity, LiveDiff, LiveSpeculationStep
from protocol.wire.display import call_diff, call_path, cut, format_args
from protocol.wire.work import (
    Boundary,
    Completed,
    ModelText,
    ToolFinished,
    ToolStarted,
    WorkerEvent,
    WrittenFile,
)

if TYPE_CHECKING:
    from coordinator.service.speculation import Speculation, SpeculationManager

log = logging.getLogger("specrun.live")

MAX_ENTRY_CHARS = 20_000

MAX_STEPS = 200  # per speculation
MAX_TRACKED = 16  # speculations whose steps and diffs are kept

# Of a speculation's diff, the view is sent at most this much per file and in all (the
# rest is counted): a speculation may write hundreds of MiB, and each diff is kept here
# for MAX_TRACKED speculations, sent after every tool call and drawn line by line.
VIEW_FILE_CHARS = 64 * 1024
VIEW_DIFF_CHARS = 512 * 1024

#: The project's side of a speculation's files, as lstat sees each (None: absent).
RealFiles = tuple[tuple[int, int, int, int, int] | None, ...]


def real_files(root: str, written: Mapping[str, WrittenFile]) -> RealFiles:
    """What the real files at ``written``'s paths look like now: enough to see that the
    person changed, replaced, created or removed one since."""
    out: list[tuple[int, int, int, int, int] | None] = []
    for rel in sorted(written):
        try:
            st = os.lstat(os.path.join(root, rel))
        except OSError:
            out.append(None)
            continue
        out.append((st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
    return tuple(out)


def _written(spec: Speculation) -> dict[str, WrittenFile]:
    return dict(spec.outcome.written_files) if spec.outcome else dict(spec.progress.written)


def bounded_for_view(files: tuple[FileDiff, ...]) -> tuple[FileDiff, ...]:
    """``files`` with each diff cut at a line end to ``VIEW_FILE_CHARS``, and to what is
    left of ``VIEW_DIFF_CHARS`` for them all; ``cut_lines`` counts the lines left out."""
    left = VIEW_DIFF_CHARS
    out: list[FileDiff] = []
    for item in files:
        limit = min(VIEW_FILE_CHARS, left)
        if len(item.diff) <= limit:
            left -= len(item.diff)
            out.append(item)
            continue
        end = item.diff.rfind("\n", 0, limit) + 1  # 0: not even one whole line fits
        left -= end
        cut = item.diff.count("\n", end)  # a preview's diff ends with a newline
        out.append(msgspec.structs.replace(item, diff=item.diff[:end], cut_lines=cut))
    return tuple(out)


def _text_step(turn: int, text: str) -> LiveActivity:
    return LiveActivity("text", cut(text, MAX_ENTRY_CHARS), turn=turn)


def _call_step(turn: int, call: ToolCall, result: ToolResult | None) -> LiveActivity:
    started = LiveActivity("tool", "", call.id, call.name, format_args(call), "running",
                           turn=turn, diff=call_diff(call), path=call_path(call))
    return started if result is None else _result_step(turn, started, result)


def _result_step(turn: int, started: LiveActivity | None, result: ToolResult) -> LiveActivity:
    """A call's step once its result came (``started``: its step before, if known)."""
    return LiveActivity(
        "tool",
        cut((result.output if result.ok else result.error) or "", 500),
        result.call_id,
        result.name,
        started.args if started else "",
        "error" if result.failed else "success",
        result.exit_code,
        turn=turn,
        diff=started.diff if started else "",
        path=started.path if started else "",
    )


def steps_from_progress(progress: Progress) -> tuple[LiveActivity, ...]:
    """A speculation's steps as the live view sends them one by one (the same
    conversion), rebuilt from its record: per model turn its text, then its tool calls,
    each with its result when it came; the newest ``MAX_STEPS``."""
    steps: list[LiveActivity] = []
    for number in sorted(progress.turns):
        turn = progress.turns[number]
        if turn.text:
            steps.append(_text_step(number, turn.text))
        steps.extend(_call_step(number, call, turn.results.get(call.id)) for call in turn.calls)
    return tuple(steps[-MAX_STEPS:])


Spawn = Callable[[Coroutine[Any, Any, object]], "asyncio.Task[object]"]


class SpeculationViews:
    """The steps and diffs of the shown suggestion's speculations, sent through ``hub``
    while someone watches."""

    def __init__(
        self, hub: LiveHub, project_root: Path, speculation: SpeculationManager, spawn: Spawn
    ) -> None:
        self.hub = hub
        self.project_root = project_root
        self.speculation = speculation
        self._spawn = spawn
        self._steps: OrderedDict[str, list[LiveActivity]] = OrderedDict()
        self._diffs: OrderedDict[str, LiveDiff] = OrderedDict()
        self._real_seen: dict[str, RealFiles] = {}  # per speculation, as its diff saw them
        self._diffing: dict[str, asyncio.Task[object]] = {}
        self._dirty: set[str] = set()

    def event(self, spec_id: str, event: WorkerEvent) -> None:
        """An event of that speculation's worker: a step to send, a diff to recompute."""
        step: LiveActivity | None = None
        if isinstance(event, ModelText):
            step = _text_step(event.turn, event.text)
        elif isinstance(event, ToolStarted):
            step = _call_step(event.turn, event.call, None)
        elif isinstance(event, ToolFinished):
            result = event.result
            step = _result_step(event.turn, self._find_step(spec_id, result.call_id), result)
            self._diff_soon(spec_id)
        elif isinstance(event, (Completed, Boundary)):
            self._diff_soon(spec_id)
        if step is not None:
            self._remember_step(spec_id, step)
            self.hub.publish(LiveSpeculationStep(spec_id, step))

    async def fill_diffs(self) -> None:
        """Compute the diffs not computed yet of the shown suggestion's speculations
        (for a snapshot)."""
        current = self.speculation.current
        for spec in current.speculations() if current is not None else []:
            if spec.id not in self._diffs and spec.overlay_dir:
                with contextlib.suppress(OSError):
                    self._diffs.setdefault(spec.id, await self._compute_diff(spec))

    @staticmethod
    def steps_of(specs: list[Speculation]) -> dict[str, tuple[LiveActivity, ...]]:
        """Each speculation's steps, from what its worker reported (``Progress``, which the
        speculation keeps whoever watches): a view opened after a speculation ran, or
        while it ran, sees all its steps, not only those sent since it subscribed."""
        return {spec.id: steps_from_progress(spec.progress) for spec in specs}

    def diffs_of(self, ids: list[str]) -> dict[str, LiveDiff]:
        return {i: self._diffs[i] for i in ids if i in self._diffs}

    def _find_step(self, spec_id: str, call_id: str) -> LiveActivity | None:
        for step in self._steps.get(spec_id, []):
            if step.call_id == call_id:
                return step
        return None

    def _remember_step(self, spec_id: str, step: LiveActivity) -> None:
        steps = self._steps.setdefault(spec_id, [])
        self._steps.move_to_end(spec_id)
        if step.kind == "tool":
            for i, old in enumerate(steps):
                if old.call_id == step.call_id:
                    steps[i] = step
                    return
        steps.append(step)
        del steps[:-MAX_STEPS]
        while len(self._steps) > MAX_TRACKED:
            self._steps.popitem(last=False)

    def _live_speculation(self, spec_id: str) -> Speculation | None:
        current = self.speculation.current
        for spec in current.speculations() if current is not None else []:
            if spec.id == spec_id:
                return spec
        return None

    def _diff_soon(self, spec_id: str) -> None:
        """Recompute a live speculation's diff in a thread; one at a time per speculation,
        again after it if it was asked for meanwhile."""
        if spec_id in self._diffing:
            self._dirty.add(spec_id)
            return
        self._diffing[spec_id] = self._spawn(self._diff(spec_id))

    async def _compute_diff(self, spec: Speculation) -> LiveDiff:
        """What Tab would do now with its files: ``specrun diff``'s computation, which is
        accept's (a running speculation: the files it wrote so far)."""
        written = _written(spec)
        root = str(self.project_root)

        def compute() -> tuple[RealFiles, tuple[FileDiff, ...], str, tuple[str, ...]]:
            seen = real_files(root, written)  # first: a change during the diff is seen next
            return (seen, *preview_files(root, spec.overlay_dir, written,
                                         self.speculation.settings, False))

        seen, files, refused, links_held = await asyncio.to_thread(compute)
        self._real_seen[spec.id] = seen
        return LiveDiff(spec.id, bounded_for_view(files), refused, links_held)

    async def recheck_real_files(self) -> None:
        """A diff also goes stale when the person changes, in the project, a file a
        speculation wrote: Tab would then refuse it (a conflict), or leave it (a file git
        ignores). Each live speculation's real files are looked at (lstat only) and its
        diff recomputed when one of them changed since."""
        current = self.speculation.current
        specs = [
            spec for spec in (current.speculations() if current is not None else [])
            if spec.overlay_dir and spec.id in self._real_seen and spec.id not in self._diffing
        ]
        for gone in set(self._real_seen) - {spec.id for spec in specs} - set(self._diffing):
            del self._real_seen[gone]
        if not specs:
            return
        root = str(self.project_root)
        wanted = {spec.id: _written(spec) for spec in specs}
        now = await asyncio.to_thread(
            lambda: {spec_id: real_files(root, written) for spec_id, written in wanted.items()}
        )
        for spec_id, seen in now.items():
            if spec_id in self._real_seen and seen != self._real_seen[spec_id]:
                self._diff_soon(spec_id)

    async def _diff(self, spec_id: str) -> None:
        diff: LiveDiff | None = None
        try:
            while True:
                self._dirty.discard(spec_id)
                spec = self._live_speculation(spec_id)
                if spec is None or not spec.overlay_dir:
                    return
                diff = await self._compute_diff(spec)
                if spec_id not in self._dirty:
                    break
        except OSError as exc:  # the overlay went away meanwhile (accepted, killed)
            log.info("no diff for %s: %s", spec_id, exc)
            return
        finally:
            self._diffing.pop(spec_id, None)
        if diff is None or diff == self._diffs.get(spec_id):
            return
        self._diffs[spec_id] = diff
        while len(self._diffs) > MAX_TRACKED:
            self._diffs.popitem(last=False)
        if self.hub.active:
            self.hub.publish(diff)
