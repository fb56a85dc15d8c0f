"""The web view's routes: the page and its two static files, the event stream, the
snapshot, and the three actions (send a prompt, accept a branch, reject), each the same
control request the CLI sends. ``Guard`` has checked every request before it gets here.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from importlib import resources

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from coordinator.web.fanout import RESYNC, Fanout
from coordinator.web.link import NoService, ServiceLink
from coordinator.web.shown import shown_json
from protocol.control import (
    AcceptRequest,
    AskRequest,
    ControlReply,
    ErrorReply,
    LiveSnapshot,
    LiveSnapshotRequest,
    OkReply,
    RejectRequest,
    TurnEnded,
)
from protocol.inert_text import inert

KEEPALIVE_S = 15.0
MAX_BATCH = 512  # events written to a viewer at once
MAX_PROMPT_CHARS = 20_000
STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
}


class AskBody(msgspec.Struct, forbid_unknown_fields=True):
    text: str


class AcceptBody(msgspec.Struct, forbid_unknown_fields=True):
    index: int | None = None


def _static() -> dict[str, tuple[bytes, str]]:
    folder = resources.files("coordinator.web") / "static"
    return {path: ((folder / name).read_bytes(), kind) for path, (name, kind) in STATIC.items()}


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
    return JSONResponse({"ok": False, "message": f"unexpected reply {type(reply).__name__}"}, 500)


def build_app(link: ServiceLink, fanout: Fanout) -> Starlette:
    static = _static()

    async def page(request: Request) -> Response:
        body, kind = static[request.url.path]
        return Response(body, media_type=kind)

    in_flight: list[asyncio.Future[LiveSnapshot]] = []

    async def snapshot() -> LiveSnapshot:
        """A fresh snapshot; viewers asking at the same time share one request, so a burst
        of resyncs costs the service one snapshot, not one per viewer."""
        if in_flight and not in_flight[0].done():
            return await asyncio.shield(in_flight[0])
        future: asyncio.Future[LiveSnapshot] = asyncio.get_running_loop().create_future()
        in_flight[:] = [future]
        try:
            reply = await link.request(LiveSnapshotRequest(link.next_id()))
            if not isinstance(reply, LiveSnapshot):
                raise NoService(link.project_root)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: the waiters (if any) get it too
            raise
        future.set_result(reply)
        return reply

    async def events(request: Request) -> Response:
        viewer = fanout.add()

        async def stream() -> AsyncIterator[bytes]:
            try:
                while not link.closed.is_set():
                    snap = await snapshot()
                    yield _sse("snapshot", shown_json(snap))
                    resync = False
                    while not resync:
                        try:
                            first = await asyncio.wait_for(viewer.queue.get(), KEEPALIVE_S)
                        except TimeoutError:
                            yield b": keepalive\n\n"
                            continue
                        # Everything queued meanwhile goes out in one write.
                        batch = [first]
                        while len(batch) < MAX_BATCH and not viewer.queue.empty():
                            batch.append(viewer.queue.get_nowait())
                        out = []
                        for item in batch:
                            if item == RESYNC:
                                resync = True
                                break
                            seq, data = item
                            if seq > snap.seq:
                                out.append(_sse("change", data))
                        if out:
                            yield b"".join(out)
            except NoService:
                yield _sse("closed", b'"the service stopped"')
            finally:
                fanout.remove(viewer)

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"x-accel-buffering": "no"}
        )

    async def ask(request: Request) -> Response:
        try:
            body = msgspec.json.decode(await request.body(), type=AskBody)
        except msgspec.DecodeError as exc:
            return JSONResponse({"ok": False, "message": f"bad request: {exc}"}, 400)
        text = body.text.strip()
        if not text or len(text) > MAX_PROMPT_CHARS:
            return JSONResponse({"ok": False, "message": "Type a prompt to send."}, 400)
        req = AskRequest(
            req_id=link.next_id(), text=text, accept_method="web", client_pid=os.getpid()
        )
        return _answer(await link.request(req))

    async def accept(request: Request) -> Response:
        try:
            body = msgspec.json.decode(await request.body() or b"{}", type=AcceptBody)
        except msgspec.DecodeError as exc:
            return JSONResponse({"ok": False, "message": f"bad request: {exc}"}, 400)
        req = AcceptRequest(req_id=link.next_id(), method="web", index=body.index)
        return _answer(await link.request(req))

    async def reject(request: Request) -> Response:
        return _answer(await link.request(RejectRequest(req_id=link.next_id())))

    routes = [
        *(Route(path, page, methods=["GET"]) for path in STATIC),
        Route("/api/events", events, methods=["GET"]),
        Route("/api/ask", ask, methods=["POST"]),
        Route("/api/accept", accept, methods=["POST"]),
        Route("/api/reject", reject, methods=["POST"]),
    ]
    return Starlette(routes=routes)
