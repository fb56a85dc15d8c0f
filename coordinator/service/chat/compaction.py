"""Compaction: the oldest part of the chat becomes one summary message.

Which part (``split_point``): the history is cut at a message that is not a tool result,
so a tool call and its results always stay on the same side. The cut prefers the start of
a turn (a person's prompt), the earliest one whose tail fits ``keep_tokens``, so the last
turns stay whole; only when the last turn alone is larger than that does the cut fall
inside it (between one model step and the next, never between a call and its result).

What it says (``summarize``): the fast model reads the old part as a plain transcript
(tool outputs cut short: what a command printed matters less than what was decided)
and writes the summary; specrun then appends what must survive whatever the model wrote:
every prompt the person typed and every file a tool wrote. When the fast model fails,
those facts alone (with the last answer of the model) are the summary, so compaction
never depends on the model being up.

The summary is a user message holding one system reminder, so the model reads it as
context rather than as a new request.

When (``Compactor``): at the end of a turn whose next request would pass ``compactAt`` of
the window (``context_meter``), after a provider's overflow error, or on ``specrun
compact``; the summary is written to the history on disk (one compaction record) before
the history in memory is replaced.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.service.chat.context_meter import ContextMeter
from coordinator.service.chat.history import CompactionRecord, HistoryStore
from coordinator.service.emitter import Emitter
from protocol.model import ChatRequest, ModelClient, ModelError
from protocol.model.client import WaitCallback
from protocol.model.tokens import (
    cut_to_tokens,
    estimate_messages,
    estimate_request,
    estimate_tokens,
)
from protocol.rules.tools import WRITE_TOOLS
from protocol.wire.chat import Message, ToolSpec

log = logging.getLogger("specrun.compaction")

SUMMARY_HEADING = "Summary of the earlier part of this session (compacted by specrun)"
TOOL_OUTPUT_CHARS = 600  # of each tool result, in the transcript the summarizer reads
MAX_SUMMARY_TOKENS = 2_000

SUMMARIZER_PROMPT = """\
You are condensing the first part of a coding session between a person and an AI \
assistant, so that the assistant can keep working without the full transcript. The \
transcript follows. Write a compact summary for the assistant, in this order:

1. What the person is trying to achieve overall, and any constraints or preferences they \
stated.
2. What was done: files read and changed (with the gist of each change), commands run \
and what they showed.
3. Decisions made and why; approaches that were tried and dropped.
4. What is still open or was about to happen next.

Keep exact file paths, function names, commands and error messages. Leave out greetings, \
tool output that no longer matters and anything repeated. Plain text, no preamble."""


@dataclass(frozen=True)
class Summary:
    text: str
    by: str  # "model" or "fallback"


def is_summary(message: Message) -> bool:
    return (
        message.role == "user"
        and not message.text
        and len(message.reminders) == 1
        and message.reminders[0].startswith(SUMMARY_HEADING)
    )


def _is_prompt(message: Message) -> bool:
    """A message a person typed (a turn starts there)."""
    return message.role == "user" and bool(message.text) and not is_summary(message)


def split_point(
    history: Sequence[Message], keep_tokens: int, *, on_request: bool = False
) -> int | None:
    """The index where the kept tail begins (everything before it is summarized), or
    None when there is nothing worth summarizing (a summary at most, before the tail).
    ``on_request`` (``specrun compact``): keep only the last turn, whatever it costs."""
    sizes = [estimate_messages([m]) for m in history]
    tail = [0] * (len(history) + 1)
    for i in range(len(history) - 1, -1, -1):
        tail[i] = tail[i + 1] + sizes[i]
    first_old = 1 if history and is_summary(history[0]) else 0

    def worth_it(cut: int) -> bool:  # something besides an old summary goes
        return cut > first_old

    prompts = [i for i, m in enumerate(history) if _is_prompt(m)]
    if on_request:
        return prompts[-1] if prompts and worth_it(prompts[-1]) else None
    for i in prompts:
        if worth_it(i) and tail[i] <= keep_tokens:
            return i
    if prompts and tail[prompts[-1]] <= keep_tokens:
        return None  # the last turn fits, and nothing before it can go
    # The last turn alone is too large: cut inside it, at the earliest model step whose
    # tail fits, keeping at least the last step (an assistant message and its results).
    start = prompts[-1] if prompts else 0
    steps = [
        i for i, m in enumerate(history) if i > start and m.role == "assistant" and worth_it(i)
    ]
    for i in steps:
        if tail[i] <= keep_tokens:
            return i
    return steps[-1] if steps else None


def transcript(old: Sequence[Message]) -> str:
    """The old part as the summarizer reads it."""
    lines: list[str] = []
    for message in old:
        if is_summary(message):
            lines.append(f"[an earlier summary]\n{message.reminders[0]}")
        elif message.role == "user":
            if message.text:
                lines.append(f"PERSON: {message.text}")
        elif message.role == "assistant":
            if message.text:
                lines.append(f"ASSISTANT: {message.text}")
            for call in message.tool_calls:
                lines.append(f"ASSISTANT CALLS {call.name} {call.arguments[:300]}")
        elif message.role == "tool":
            for result in message.tool_results:
                body = result.error if result.error is not None else result.output or ""
                cut = body[:TOOL_OUTPUT_CHARS]
                left = len(body) - len(cut)
                more = f" … [{left} more characters]" if left else ""
                status = "FAILED" if result.error is not None else "RESULT"
                lines.append(f"{result.name} {status}: {cut}{more}")
    return "\n".join(lines)


MAX_PROMPTS = 30  # the latest ones; older ones are counted
MAX_FILES = 200


@dataclass(frozen=True)
class Summarized:
    """The facts of every message the current summary stands for, kept up to date one
    compaction at a time (``plus`` reads only the part being summarized), so a compaction
    late in a long session neither reads the session file nor walks its whole history.
    ``files``: every distinct file a tool wrote, in order (the text lists the first
    ``MAX_FILES``); ``prompts``: the latest ``MAX_PROMPTS`` of ``prompt_count``."""

    prompts: tuple[str, ...] = ()
    prompt_count: int = 0
    files: tuple[str, ...] = ()

    @classmethod
    def of_session(cls, full: Sequence[Message], view: Sequence[Message]) -> Summarized:
        """What a loaded session's summary stands for: every message on disk (``full``)
        but those the compacted ``view`` still holds after its summary."""
        if not view or not is_summary(view[0]):
            return cls()
        return cls().plus(full[: len(full) - (len(view) - 1)])

    def plus(self, old: Sequence[Message]) -> Summarized:
        """With ``old`` summarized too (an earlier summary in it is skipped: this ledger
        already holds what that one stood for). A tool call and its result are never cut
        apart, so a write and its success are both in ``old``."""
        prompts = [m.text for m in old if _is_prompt(m)]
        succeeded = {r.call_id for m in old for r in m.tool_results if r.ok}
        files = list(self.files)
        seen = set(files)
        for message in old:
            for call in message.tool_calls:
                if call.name in WRITE_TOOLS and call.id in succeeded:
                    path = call.args().get("file_path") or call.args().get("path")
                    if isinstance(path, str) and path not in seen:
                        seen.add(path)
                        files.append(path)
        return Summarized(
            prompts=(*self.prompts, *prompts)[-MAX_PROMPTS:],
            prompt_count=self.prompt_count + len(prompts),
            files=tuple(files),
        )

    def text(self) -> str:
        """What must survive any summary: the person's prompts (the latest
        ``MAX_PROMPTS``) and the files tools wrote."""
        earlier = self.prompt_count - len(self.prompts)
        files = self.files
        parts = []
        if self.prompts:
            before = f" (after {earlier} earlier prompts)" if earlier > 0 else ""
            listed = "\n".join(f"- {p[:300]}" for p in self.prompts)
            parts.append(f"The person asked, in order{before}:\n{listed}")
        if files:
            more = f" and {len(files) - MAX_FILES} more" if len(files) > MAX_FILES else ""
            parts.append("Files written by tools: " + ", ".join(files[:MAX_FILES]) + more)
        return "\n\n".join(parts)


def facts(old: Sequence[Message]) -> str:
    """The facts (``Summarized.text``) of every message a summary stands for."""
    return Summarized().plus(old).text()


def fallback_text(old: Sequence[Message], kept_facts: str) -> str:
    """A summary made without a model: the facts and the model's last words in the old
    part."""
    last = next((m.text for m in reversed(old) if m.role == "assistant" and m.text), "")
    parts = [kept_facts] if kept_facts else []
    if last:
        parts.append(f"The assistant's last answer in that part: {last[:1500]}")
    return "\n\n".join(parts) or "(nothing of note)"


async def summarize(
    model: ModelClient,
    model_name: str,
    old: Sequence[Message],
    input_tokens: int,
    kept_facts: str,
    on_wait: WaitCallback | None = None,
) -> Summary:
    """The summary of ``old`` (the part of the view being replaced, maybe starting with
    the earlier summary), ending with ``kept_facts`` (``Summarized.text`` of everything it
    stands for). ``input_tokens`` bounds the transcript the fast model reads (its oldest part
    is dropped first). ``on_wait`` is told of each wait to retry the request."""
    text = transcript(old)
    if estimate_tokens(text) > input_tokens:
        kept = cut_to_tokens(text[::-1], input_tokens)[::-1]
        text = "[… the oldest part of the transcript is left out …]\n" + kept
    request = ChatRequest(
        system=SUMMARIZER_PROMPT,
        history=(Message.user(text),),
        model=model_name,
        purpose="compaction",
        enable_thinking=False,
        max_tokens=MAX_SUMMARY_TOKENS,
    )
    try:
        answer = await model.complete(request, on_wait)
        written = answer.message.text.strip()
        by = "model"
    except ModelError as exc:
        log.warning("the fast model could not summarize (%s); using the facts alone", exc)
        written, by = "", "fallback"
    if not written:
        return Summary(fallback_text(old, kept_facts), "fallback")
    return Summary(f"{written}\n\n{kept_facts}" if kept_facts else written, by)


def summary_message(text: str) -> Message:
    return Message.user("", reminders=(f"{SUMMARY_HEADING}:\n{text}",))


class Compactor:
    """Compacts the main chat's history in place (the summary on disk first, as one
    compaction record) when it nears the window of ``context``."""

    def __init__(
        self,
        context: ContextMeter,
        store: HistoryStore,
        model: ModelClient,
        *,
        model_name: str,
        fast_model: str,
        window_known: bool,
        summarized: Summarized | None = None,
    ) -> None:
        self.context = context
        self.store = store
        self.model = model
        self.model_name = model_name
        self.fast_model = fast_model
        # The endpoint is asked once: at the service's start, or at first use if that
        # comes first; a turn starting meanwhile waits for that one answer.
        self._window_asked = window_known
        self._window_probe: asyncio.Task[None] | None = None
        self.last = ""  # what the last compaction did, in one sentence
        # The prompts and files of what the history's summary stands for (the session
        # loaded from disk gives the first), so a compaction reads only the part it cuts.
        self.summarized = summarized if summarized is not None else Summarized()

    async def resolve_window(self) -> None:
        """Ask the endpoint for the model's window once, unless the setting gives it."""
        if self._window_asked:
            return
        if self._window_probe is None:
            self._window_probe = asyncio.ensure_future(self._ask_window())
        await asyncio.shield(self._window_probe)  # a cancelled turn leaves the probe be

    async def _ask_window(self) -> None:
        reported = await self.model.context_window(self.model_name)
        self._window_asked = True
        if reported is not None and self.context.source == "default":
            self.context.window, self.context.source = reported, "endpoint"

    async def at_end_of_turn(
        self, out: Emitter, system: str, tools: tuple[ToolSpec, ...], history: list[Message]
    ) -> bool:
        """Compact when the next request would pass ``compactAt`` of the window."""
        if not self.due(system, tools, history):
            return False
        return await self.compact(out, system, tools, history)

    def due(self, system: str, tools: tuple[ToolSpec, ...], history: list[Message]) -> bool:
        """The next request over ``history`` would pass ``compactAt`` of the window."""
        return self.context.estimate(system, history, tools) > self.context.compact_threshold

    async def compact(
        self,
        out: Emitter,
        system: str,
        tools: tuple[ToolSpec, ...],
        history: list[Message],
        *,
        forced: bool = False,
        on_request: bool = False,
    ) -> bool:
        """Replace the oldest part of ``history`` by a summary; whether anything was
        compacted. ``forced``: after an overflow error, where a cut anywhere beats none."""
        context = self.context
        before = context.estimate(system, history, tools)
        keep = context.keep_tokens // (2 if forced else 1)
        cut = split_point(history, keep, on_request=on_request)
        if cut is None:
            log.info("nothing to compact (%d messages)", len(history))
            return False
        old, kept = history[:cut], history[cut:]
        summarized = self.summarized.plus(old)
        summary = await summarize(
            self.model,
            self.fast_model,
            old,
            input_tokens=context.window // 2,
            kept_facts=summarized.text(),
            on_wait=lambda wait: out.notice(wait.text),  # the person waits for it too
        )
        message = summary_message(summary.text)
        compacted = [message, *kept]
        after = estimate_request(system, compacted, tools)
        record = CompactionRecord(
            summary=message,
            kept=len(kept),
            summarized=len(old),
            tokens_before=before,
            tokens_after=after,
            created=time.time(),
            by=summary.by,
        )
        await asyncio.to_thread(self.store.append_compaction, record)
        history[:] = compacted
        self.summarized = summarized
        context.forget()
        context.last_estimate = after
        how = "" if summary.by == "model" else " (the fast model failed: kept the facts only)"
        self.last = (
            f"Compacted the conversation: {len(old)} earlier messages summarized{how}, "
            f"about {before:,} -> {after:,} tokens of the {context.window:,}-token window."
        )
        await out.notice(self.last)
        return True
