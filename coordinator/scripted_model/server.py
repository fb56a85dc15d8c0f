"""The scripted model's HTTP server: OpenAI-compatible, on loopback, in a thread.

``POST /v1/chat/completions`` (SSE streaming or one JSON body) and
``GET /v1/models``. HTTP/1.1 with keep-alive, streams in chunked transfer encoding,
so a client's connection pool is exercised like against a real server.

:meth:`ScriptedModelServer.stop` returns promptly whatever the handlers are doing:
waits (latency, chunk gaps, stalls) watch a stop event, and open connections
(idle keep-alive ones too) are shut down so their threads end.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import sys
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import msgspec

from coordinator.scripted_model.engine import Answer, Decision, Engine, Failure
from coordinator.scripted_model.scenario import Scenario, load_scenario, scenario_from_obj

log = logging.getLogger("specrun.scripted_model")

_DISCONNECTS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)

MAX_BODY_BYTES = 32 << 20
"""The largest request body read. Any local process can reach the loopback port, so a body
is never read on the strength of its Content-Length alone: a larger one is refused with 413
before a byte of it is read (a long session's request is a few MB at most)."""


class _Refused(Exception):
    """The request's body was refused unread; the answer is already sent."""


class _Gone(Exception):
    """The client went away or the server is stopping: end this response quietly."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], engine: Engine, stopping: threading.Event):
        super().__init__(address, _Handler)
        self.engine = engine
        self.stopping = stopping
        self._conns: dict[threading.Thread, socket.socket] = {}
        self._conns_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name="scripted-model-conn",
            daemon=True,
        )
        with self._conns_lock:
            self._conns[thread] = request
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._conns_lock:
                self._conns.pop(threading.current_thread(), None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError) or self.stopping.is_set():  # disconnects, shutdown
            return
        log.exception("scripted model: error while serving %s", client_address)

    def close_connections(self, timeout: float) -> None:
        with self._conns_lock:
            conns = dict(self._conns)
        for sock in conns.values():
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in conns:
            thread.join(timeout)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "specrun-scripted-model/0.1"
    timeout = 60  # an idle keep-alive connection is dropped after a minute
    disable_nagle_algorithm = True  # small writes (headers, chunks) go out at once
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("scripted model: " + format, *args)

    # ------------------------------------------------------------- plumbing

    def _headers_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.headers.items()}

    def _send_json(self, status: int, payload: Any, extra: Mapping[str, str] = {}) -> None:
        data = msgspec.json.encode(payload)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
        except (OSError, ValueError):
            return True

    def _pause(self, seconds: float) -> None:
        """Sleep, but give up at once when the server stops or the client leaves."""
        stopping = self.server.stopping
        remaining = seconds
        while remaining > 0:
            step = min(remaining, 0.05)
            if stopping.wait(step):
                raise _Gone
            remaining -= step
            if remaining > 0 and self._client_gone():
                raise _Gone
        if stopping.is_set():
            raise _Gone

    def _stall(self) -> None:
        while not self.server.stopping.wait(0.02):
            if self._client_gone():
                break
        raise _Gone

    def _body_length(self) -> int | None:
        """The declared body length, or None after answering a body we will not read (a bad
        or oversized Content-Length, a chunked body); the connection then closes."""
        declared = self.headers.get("Content-Length")
        status, message = 0, ""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            status, message = 411, "A chunked request body is not accepted: send Content-Length."
        elif declared is not None and not declared.strip().isdigit():
            status, message = 400, "The Content-Length header is not a number."
        elif declared is not None and int(declared) > MAX_BODY_BYTES:
            status = 413
            message = f"The request body is larger than {MAX_BODY_BYTES} bytes."
        if not status:
            return int(declared or 0)
        self.close_connection = True
        self.server.engine.record(
            method=self.command, path=self.path, headers=self._headers_dict(), body=None,
            decision=None, status=status,
        )  # fmt: skip
        self._send_json(status, self._error_payload(status, message), {"Connection": "close"})
        return None

    def _read_body(self) -> tuple[Any, bytes]:
        length = self._body_length()
        if length is None:
            raise _Refused
        raw = self.rfile.read(length) if length > 0 else b""
        if not raw:
            return None, raw
        try:
            return msgspec.json.decode(raw), raw
        except msgspec.DecodeError:
            return None, raw

    def _error_payload(self, status: int, message: str) -> dict[str, Any]:
        kind = "rate_limit_error" if status == 429 else "scripted_error"
        return {"error": {"message": message, "type": kind, "code": status}}

    # ------------------------------------------------------------- routes

    def do_GET(self) -> None:
        engine = self.server.engine
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            window = engine.scenario.context_window
            extra = {} if window is None else {"max_model_len": window}  # as vLLM lists it
            payload = {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "specrun", **extra}
                    for m in engine.scenario.models
                ],
            }
            engine.record(
                method="GET", path=self.path, headers=self._headers_dict(), body=None,
                decision=None, status=200,
            )  # fmt: skip
            self._send_json(200, payload)
            return
        self._not_found(None)

    def _not_found(self, body: Any) -> None:
        self.server.engine.record(
            method=self.command, path=self.path, headers=self._headers_dict(), body=body,
            decision=None, status=404,
        )  # fmt: skip
        self._send_json(404, self._error_payload(404, f"No route for {self.command} {self.path}."))

    def do_POST(self) -> None:
        try:
            body, raw = self._read_body()
        except _Refused:
            return
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._not_found(body)
            return
        engine = self.server.engine
        headers = self._headers_dict()
        if body is None and raw:
            decision = Decision(None, "bad_request", Failure(400, "The body is not valid JSON."))
            logged: Any = raw.decode("utf-8", "replace")
        else:
            decision = engine.plan(body, headers)
            logged = body
        status = decision.failure.status if decision.failure else 200
        engine.record(
            method="POST", path=self.path, headers=headers, body=logged,
            decision=decision, status=status,
        )  # fmt: skip
        try:
            if decision.failure is not None:
                self._send_failure(decision.failure)
            elif decision.answer is not None and decision.stream:
                self._send_stream(decision.answer, decision.include_usage)
            elif decision.answer is not None:
                self._send_completion(decision.answer)
        except (_Gone, *_DISCONNECTS):
            self.close_connection = True

    def _send_failure(self, failure: Failure) -> None:
        extra = {}
        if failure.retry_after is not None:
            extra["Retry-After"] = f"{failure.retry_after:g}"
        body = failure.body
        if body is None:
            body = self._error_payload(failure.status, failure.message)
        self._send_json(failure.status, body, extra)

    def _send_completion(self, answer: Answer) -> None:
        self._pause(answer.latency_s)
        if answer.stall:
            self._stall()
        self._send_json(200, answer.completion(), {"x-request-id": answer.request_id})

    def _send_stream(self, answer: Answer, include_usage: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", answer.request_id)
        self.end_headers()
        self.wfile.flush()
        self._pause(answer.latency_s)
        for position, chunk in enumerate(answer.chunks(include_usage)):
            if position:
                self._pause(answer.chunk_s)
            self._write_chunk(b"data: " + msgspec.json.encode(chunk) + b"\n\n")
            if answer.stall:
                self._stall()
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")  # the zero-length chunk ends the body


class ScriptedModelServer:
    """The scripted model on ``127.0.0.1``, served from a background thread.

    ``scenario`` is a :class:`Scenario`, a path to a scenario file or a mapping;
    ``port=0`` picks a free port; ``request_log`` appends one JSON line per request;
    :attr:`requests` keeps the latest ``keep_requests`` of them in memory.
    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        scenario: Scenario | str | os.PathLike[str] | Mapping[str, Any],
        port: int = 0,
        request_log: str | os.PathLike[str] | None = None,
        *,
        host: str = "127.0.0.1",
        keep_requests: int = 500,
    ) -> None:
        if isinstance(scenario, str | os.PathLike):
            scenario = load_scenario(scenario)
        elif not isinstance(scenario, Scenario):
            scenario = scenario_from_obj(scenario)
        self.scenario = scenario
        self._host = host
        self._port = port
        self._request_log = Path(request_log) if request_log is not None else None
        self._keep_requests = keep_requests
        self._stopping = threading.Event()
        self._engine: Engine | None = None
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def bind(self) -> ScriptedModelServer:
        """Listen on the port (``port`` and ``base_url`` are then final) without serving
        yet: no thread is started, so a process may still fork safely after this."""
        self._bound()
        return self

    def start(self) -> ScriptedModelServer:
        if self._thread is not None:
            return self
        self._thread = threading.Thread(
            target=self._bound().serve_forever,
            kwargs={"poll_interval": 0.5},
            name="scripted-model",
            daemon=True,
        )
        self._thread.start()
        return self

    def _bound(self) -> _HTTPServer:
        if self._httpd is not None:
            return self._httpd
        self._stopping.clear()
        engine = Engine(self.scenario, self._request_log, keep_requests=self._keep_requests)
        try:
            httpd = _HTTPServer((self._host, self._port), engine, self._stopping)
        except OSError:
            engine.close()
            raise
        self._engine, self._httpd = engine, httpd
        self._port = httpd.server_address[1]
        return httpd

    def stop(self, timeout: float = 2.0) -> None:
        """Stop serving; in-flight responses are cut off. Idempotent."""
        httpd, thread, engine = self._httpd, self._thread, self._engine
        if httpd is None:
            return
        self._stopping.set()
        if thread is not None:  # bound and never served: no loop to stop
            self._shutdown_loop(httpd)
        httpd.close_connections(timeout)
        httpd.server_close()
        if thread is not None:
            thread.join(timeout)
        if engine is not None:
            engine.close()
        self._httpd = self._thread = None

    @staticmethod
    def _shutdown_loop(httpd: _HTTPServer) -> None:
        """``httpd.shutdown()``, without waiting out the loop's poll interval: a
        throwaway connection wakes the loop up so it sees the request at once."""
        waiter = threading.Thread(target=httpd.shutdown, name="scripted-model-stop", daemon=True)
        waiter.start()
        address = httpd.server_address[:2]
        while waiter.is_alive():
            with contextlib.suppress(OSError):
                socket.create_connection(address, timeout=0.2).close()  # type: ignore[arg-type]
            waiter.join(0.005)

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``http://127.0.0.1:<port>/v1``)."""
        return f"http://{self._host}:{self._port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The requests received so far (the latest ``keep_requests``, a copy), as the
        request log records them."""
        return list(self._engine.requests) if self._engine is not None else []

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self.base_url if self.running else "stopped"
        return f"ScriptedModelServer({self.scenario.name!r}, {state})"


def serve_forever(
    scenario_path: str | os.PathLike[str],
    port: int = 0,
    request_log: str | os.PathLike[str] | None = None,
    *,
    host: str = "127.0.0.1",
) -> None:
    """Serve a scenario until SIGINT or SIGTERM; the base URL is the first line printed.

    Raises :class:`ScenarioError` for a bad scenario and ``OSError`` when the port
    cannot be bound, before anything is printed.
    """
    server = ScriptedModelServer(scenario_path, port, request_log, host=host)
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (int(signal.SIGINT), int(signal.SIGTERM)):
            previous[signum] = signal.signal(signum, on_signal)
    try:
        server.start()
        print(server.base_url, flush=True)
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
