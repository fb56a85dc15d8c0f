"""The web view's routes: the page and its two static files, the event stream, the
snapshot, and the four actions (send a prompt, accept a branch, reject, answer an
approval question), each the same control request the CLI sends; and the pages' own
visibility, which the service hears as one client's presence (``visibility.py``).
``Guard`` has checked every request before it gets here.

A prompt or an accept sent from the page can be asked about (``can_confirm``): its
approval questions are answered from the page, as the chat answers them; a question
asked of a terminal is answered there, not here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from importlib import resources
from typing import Annotated, Literal

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from coordinator.web.fanout import CLOSED, RESYNC, Fanout, Viewer
from coordinator.web.link import NoService, ServiceLink
from coordinator.web.shown import shown_json
from coordinator.web.visibility import PageVisibility
from protocol.text.inert_text import inert
from protocol.wire.control import (
    AcceptRequest,
    ApprovalAnswer,
    ApprovalNeeded,
    AskRequest,
    ControlReply,
    ErrorReply,
    LiveSnapshot,
    LiveSnapshotRequest,
    OkReply,
    PresenceRequest,
    RejectRequest,
    TurnEnded,
    UndoReply,
    UndoRequest,
)

KEEPALIVE_S = 15.0
MAX_BATCH = 512  # events written to a viewer at once
MAX_PROMPT_CHARS = 20_000
SERVICE_STOPPED = "service stopped: `specrun start --web` (or `specrun web`) prints a new URL"
STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/first.js": ("first.js", "text/javascript; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
}


# What an undo did to each file, in the page's sentence.
UNDONE = {"restore": "restored", "remove": "removed", "recreate": "recreated",
          "kept": "kept", "already": "already as before"}


class AskBody(msgspec.Struct, forbid_unknown_fields=True):
    text: str


class AcceptBody(msgspec.Struct, forbid_unknown_fields=True):
    index: int | None = None
    # What the page showed of that branch (as sent to it): the service takes it only if
    # it is still that one.
    text: str | None = None
    speculation: str = ""


class ApproveBody(msgspec.Struct, forbid_unknown_fields=True):
    call_id: str
    answer: Literal["once", "session", "no"]
    reason: str = ""


MAX_REASON_CHARS = 2000

PageId = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9-]+$")]


class VisibilityBody(msgspec.Struct, forbid_unknown_fields=True):
    page: PageId
    visible: bool


def _static(verbose: bool = False) -> dict[str, tuple[bytes, str]]:
    """The page's files. ``verbose`` (``specrun --verbose web``) marks the page's body so
    that it shows the internals too (each worker's pid), as the command line does."""
    folder = resources.files("coordinator.web") / "static"
    files = {path: ((folder / name).read_bytes(), kind) for path, (name, kind) in STATIC.items()}
    if verbose:
        page, kind = files["/"]
        files["/"] = (page.replace(b"<body>", b'<body data-verbose="1">', 1), kind)
    return files


def _sse(event: str, data: bytes) -> bytes:
    # JSON has no raw newline, so one data line holds it.
    return b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"


def _answer(reply: ControlReply) -> JSONResponse:
    """The final reply of an action, for the page (its sentence may quote a suggestion)."""
    if isinstance(reply, ErrorReply):
        status = 409 if reply.code == "busy" else 404 if reply.code == "not_found" else 400
        body = {"ok": False, "error": reply.code, "message": inert(reply.message)}
        return JSONResponse(body, status)
    if isinstance(reply, TurnEnded):
        ok = reply.reason in ("completed", "accepted")
        return JSONResponse({"ok": ok, "reason": reply.reason, "message": inert(reply.message)})
    if isinstance(reply, OkReply):
        return JSONResponse({"ok": True, "message": inert(reply.message)})
    if isinstance(reply, UndoReply):
        files = "; ".join(f"{UNDONE[f.action]} {f.path}" + (f" ({f.why})" if f.why else "")
                          for f in reply.files)
        text = reply.message + (f" ({files})" if files else "")
        return JSONResponse({"ok": reply.undone, "message": inert(text)})
    return JSONResponse({"ok": False, "message": f"unexpected reply {type(reply).__name__}"}, 500)


def build_app(link: ServiceLink, fanout: Fanout, verbose: bool = False) -> Starlette:
    views = _Views(link, fanout, verbose)
    routes = [
        *(Route(path, views.page, methods=["GET"]) for path in STATIC),
        Route("/api/events", views.events, methods=["GET"]),
        Route("/api/ask", views.ask, methods=["POST"]),
        Route("/api/accept", views.accept, methods=["POST"]),
        Route("/api/reject", views.reject, methods=["POST"]),
        Route("/api/approve", views.approve, methods=["POST"]),
        Route("/api/undo", views.undo, methods=["POST"]),
        Route("/api/visibility", views.visibility, methods=["POST"]),
    ]
    return Starlette(routes=routes)


class _SharedSnapshot:
    """Fresh snapshots from the service; viewers asking at the same time share one
    request, so a burst of resyncs costs the service one snapshot, not one per viewer."""

    def __init__(self, link: ServiceLink) -> None:
        self.link = link
        self._in_flight: asyncio.Future[LiveSnapshot] | None = None

    async def get(self) -> LiveSnapshot:
        if self._in_flight is not None and not self._in_flight.done():
            return await asyncio.shield(self._in_flight)
        future: asyncio.Future[LiveSnapshot] = asyncio.get_running_loop().create_future()
        self._in_flight = future
        try:
            reply = await self.link.request(LiveSnapshotRequest(self.link.next_id()))
            if not isinstance(reply, LiveSnapshot):
                raise NoService(self.link.project_root)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: the waiters (if any) get it too
            raise
        future.set_result(reply)
        return reply


async def _next_write(viewer: Viewer, seq: int) -> tuple[bytes, tuple[int, bytes] | None]:
    """What to write to ``viewer`` next: a keepalive after ``KEEPALIVE_S`` of quiet, else
    the changes after ``seq`` queued by now (one write); and the marker that came after
    them (``RESYNC`` or ``CLOSED``), if any."""
    try:
        first = await asyncio.wait_for(viewer.get(), KEEPALIVE_S)
    except TimeoutError:
        return b": keepalive\n\n", None
    batch = [first]
    while len(batch) < MAX_BATCH and not viewer.queue.empty():
        batch.append(viewer.get_nowait())
    out: list[bytes] = []
    for item in batch:
        if item in (RESYNC, CLOSED):
            return b"".join(out), item
        item_seq, data = item
        if item_seq > seq:
            out.append(_sse("change", data))
    return b"".join(out), None


class _Views:
    """The route handlers, all speaking to the service through one link."""

    def __init__(self, link: ServiceLink, fanout: Fanout, verbose: bool = False) -> None:
        self.link = link
        self.fanout = fanout
        self.static = _static(verbose)
        self.snapshots = _SharedSnapshot(link)
        # the approval questions of the page's own requests: call id -> the request's id
        self.asked: dict[str, int] = {}
        self.pages = PageVisibility()

    def _note_question(self, reply: ControlReply) -> None:
        if isinstance(reply, ApprovalNeeded):
            self.asked[reply.call.id] = reply.req_id

    async def _turn(self, req: AskRequest | AcceptRequest) -> Response:
        try:
            return _answer(await self.link.request(req, self._note_question))
        finally:
            for call_id in [c for c, r in self.asked.items() if r == req.req_id]:
                del self.asked[call_id]

    async def page(self, request: Request) -> Response:
        body, kind = self.static[request.url.path]
        return Response(body, media_type=kind)

    async def events(self, request: Request) -> Response:
        viewer = self.fanout.add()
        page = request.query_params.get("page", "")
        return StreamingResponse(
            self._stream(viewer, page),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    async def _stream(self, viewer: Viewer, page: str = "") -> AsyncIterator[bytes]:
        """A snapshot, then the changes after it, until a resync asks for a new one."""
        if page:  # its visibility counts from now (it may have said so already)
            self.pages.opened(page)
            await self._tell_presence()
        try:
            while not self.link.closed.is_set():
                snap = await self.snapshots.get()
                yield _sse("snapshot", shown_json(snap))
                marker = None
                while marker is None:
                    chunk, marker = await _next_write(viewer, snap.seq)
                    if chunk:
                        yield chunk
                if marker == CLOSED:
                    break
            yield _sse("closed", self._closed_json())
        except NoService:
            yield _sse("closed", self._closed_json())
        finally:
            self.fanout.remove(viewer)
            if page:  # a closed page no longer looks
                self.pages.closed(page)
                await self._tell_presence()

    def _closed_json(self) -> bytes:
        because = self.fanout.closed_because or SERVICE_STOPPED
        return msgspec.json.encode(because)

    async def ask(self, request: Request) -> Response:
        try:
            body = msgspec.json.decode(await request.body(), type=AskBody)
        except msgspec.DecodeError as exc:
            return JSONResponse({"ok": False, "message": f"bad request: {exc}"}, 400)
        text = body.text.strip()
        if not text or len(text) > MAX_PROMPT_CHARS:
            return JSONResponse({"ok": False, "message": "Type a prompt to send."}, 400)
        req = AskRequest(
            req_id=self.link.next_id(), text=text, accept_method="web", client_pid=os.getpid(),
            can_confirm=True,
        )
        return await self._turn(req)

    async def accept(self, request: Request) -> Response:
        try:
            body = msgspec.json.decode(await request.body() or b"{}", type=AcceptBody)
        except msgspec.DecodeError as exc:
            return JSONResponse({"ok": False, "message": f"bad request: {exc}"}, 400)
        req = AcceptRequest(
            req_id=self.link.next_id(), method="web", index=body.index,
            shown_text=body.text, shown_speculation=body.speculation,
            can_confirm=True, client_pid=os.getpid(),
        )
        return await self._turn(req)

    async def reject(self, request: Request) -> Response:
        return _answer(await self.link.request(RejectRequest(req_id=self.link.next_id())))

    async def approve(self, request: Request) -> Response:
        try:
            body = msgspec.json.decode(await request.body(), type=ApproveBody)
        except msgspec.DecodeError as exc:
            return JSONResponse({"ok": False, "message": f"bad request: {exc}"}, 400)
        ask_req_id = self.asked.get(body.call_id)
        if ask_req_id is None:
            return JSONResponse({"ok": False, "error": "not_found", "message": (
                "That question is not waiting for an answer from this page: it was answered, "
                "or asked at a terminal (answer it there).")}, 404)
        approved = body.answer != "no"
        answer = ApprovalAnswer(
            self.link.next_id(), ask_req_id, body.call_id, approved,
            remember=body.answer == "session",
            reason="" if approved else body.reason.strip()[:MAX_REASON_CHARS],
        )
        reply = await self.link.request(answer)
        if isinstance(reply, OkReply):
            self.asked.pop(body.call_id, None)
            said = {"once": "Allowed once.", "session": "Allowed for this session.",
                    "no": "Declined."}[body.answer]
            return JSONResponse({"ok": True, "message": said})
        return _answer(reply)

    async def visibility(self, request: Request) -> Response:
        """A page says whether it is visible; the service hears what all pages add up to."""
        try:
            body = msgspec.json.decode(await request.body(), type=VisibilityBody)
        except msgspec.DecodeError as exc:
            return JSONResponse({"ok": False, "message": f"bad request: {exc}"}, 400)
        self.pages.seen(body.page, body.visible)
        await self._tell_presence()
        return JSONResponse({"ok": True, "message": ""})

    async def _tell_presence(self) -> None:
        state = self.pages.report()
        if state is None or self.link.closed.is_set():
            return
        # NoService: the view ends with its service; the pages are told so
        with contextlib.suppress(NoService):
            await self.link.request(PresenceRequest(self.link.next_id(), state, os.getpid()))

    async def undo(self, request: Request) -> Response:
        """`specrun undo`: the last accept or turn that wrote files, taken back (a file
        changed since is named and nothing is undone; the page has no --force)."""
        return _answer(await self.link.request(UndoRequest(req_id=self.link.next_id())))
