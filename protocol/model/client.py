"""The OpenAI-compatible chat-completions client (async, one per process).

Creating an ``httpx.AsyncClient`` costs about 20 ms, so a process keeps one
:class:`ModelClient` for its lifetime and closes it with :meth:`ModelClient.aclose`.

Retries (429, 5xx, connection failures) run in tenacity's loop with the policy of
``retry.py``: the wait the server asks for, else exponential backoff with jitter, each wait
announced (a :class:`RetryWait` event of the stream, or ``on_wait``) before it starts;
background purposes never retry a rate limit. A streamed request is retried only while
nothing of its answer has reached the caller: an error event before the first token is
retried like an error status, one after it is reported. Every stream is read to its end,
because a response abandoned half-way cannot go back to the connection pool.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
import msgspec
from httpx_sse import EventSource, SSEError

from protocol.model.assemble import StreamAssembler, parse_completion
from protocol.model.byte_clock import ByteClock
from protocol.model.endpoint_errors import EndpointErrors
from protocol.model.errors import ModelError, one_line
from protocol.model.first_byte import PromptMemory, first_byte_s
from protocol.model.local_endpoint import is_local_endpoint
from protocol.model.rate_hold import RateLimitHold
from protocol.model.request import (
    ChatRequest,
    ChatResult,
    RetryWait,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    build_body,
    encode_body,
)
from protocol.model.retry import BACKGROUND_PURPOSES, RetryPolicy
from protocol.model.text_tool_calls import ArgumentsFit, TextCallReader
from protocol.model.tls import ssl_context
from protocol.text.secret_text import without_password
from protocol.wire.chat import Usage
from protocol.wire.model_options import ModelOptions

log = logging.getLogger("specrun.model")

PURPOSE_HEADER = "X-Specrun-Purpose"
DASHSCOPE_CACHE_HEADER = "X-DashScope-CacheControl"
USER_AGENT = "specrun/0.1"

EventCallback = Callable[[StreamEvent], Awaitable[None] | None]
UsageCallback = Callable[[str, Usage], Awaitable[None] | None]
"""Told the purpose and token usage of every request that produced an answer."""
WaitCallback = Callable[[RetryWait], Awaitable[None] | None]


class ModelClient:
    """An async client for one OpenAI-compatible endpoint.

    ``base_url`` is the OpenAI base (for example ``http://127.0.0.1:8000/v1`` or
    ``https://dashscope.aliyuncs.com/compatible-mode/v1``); requests go to
    ``{base_url}/chat/completions`` and ``{base_url}/models``.

    ``timeout_s`` bounds every wait for bytes after the first; the wait for the first
    grows with the prompt the server has not read yet (``options``: see
    ``first_byte.py``); ``connect_timeout_s`` bounds the TCP/TLS connect,
    ``total_timeout_s`` (off by default) the whole request. ``max_retries`` counts
    retries after the first attempt. ``options`` also caps every request's output by its
    purpose and says whether tool calls written as text are read (``arguments_fit``: the
    tools' own argument check, see ``text_tool_calls.py``).
    ``cache_sharing`` enables DashScope's explicit cache markers; ``dashscope``
    forces (``True``) or disables (``False``) the DashScope dialect, which by
    default follows the host name. ``transport`` replaces the HTTP transport
    (tests, proxies).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        total_timeout_s: float | None = None,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        backoff_max_s: float = 8.0,
        retry_after_cap_s: float = 30.0,
        cache_sharing: bool = True,
        dashscope: bool | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        on_usage: UsageCallback | None = None,
        options: ModelOptions | None = None,
        arguments_fit: ArgumentsFit | None = None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self.options = options if options is not None else ModelOptions()
        self._timeout_s = timeout_s
        reading = self.options.text_tool_calls
        self._text_calls = TextCallReader(
            reading == "on" or (reading == "auto" and is_local_endpoint(self._base_url)),
            arguments_fit,
        )
        self._prompts = PromptMemory()
        # Set (or replaced) by the owner of the client: what speculation costs is counted
        # from here, so no caller of chat/stream/complete can forget to report it.
        self.on_usage = on_usage
        self._api_key = api_key or None
        self._total_timeout_s = total_timeout_s
        self._max_retries = max(0, max_retries)
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._retry_after_cap_s = retry_after_cap_s
        self._hold = RateLimitHold(longest_s=10 * retry_after_cap_s)
        self.cache_sharing = cache_sharing
        host = (urlsplit(self._base_url).hostname or "").lower()
        self.dashscope = ("dashscope" in host) if dashscope is None else dashscope
        self._thinking_style: Literal["top_level", "both", "omit"]
        if self.dashscope:
            self._thinking_style = "top_level"
        elif host == "api.openai.com":
            self._thinking_style = "omit"  # OpenAI rejects unknown body fields
        else:
            self._thinking_style = "both"  # vLLM / SGLang / llama.cpp read chat_template_kwargs
        self._errors = EndpointErrors(
            self._base_url, self._api_key, timeout_s, connect_timeout_s, total_timeout_s
        )
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(
                timeout_s, connect=connect_timeout_s, read=timeout_s, write=timeout_s
            ),
            transport=transport,
            verify=ssl_context(self._base_url),
            headers={"User-Agent": USER_AGENT},
            follow_redirects=False,
        )

    # ------------------------------------------------------------------ basics

    @property
    def base_url(self) -> str:
        return self._base_url

    def __repr__(self) -> str:
        key = "<set>" if self._api_key else None
        return (
            f"ModelClient(base_url={without_password(self._base_url)!r}, api_key={key}, "
            f"dashscope={self.dashscope})"
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def build_body(self, req: ChatRequest, *, stream: bool) -> dict[str, Any]:
        """The request body this client sends for ``req`` (deterministic), its output
        capped by its purpose."""
        cap = self.options.max_tokens.for_purpose(req.purpose)
        if req.max_tokens is None or req.max_tokens > cap:
            req = msgspec.structs.replace(req, max_tokens=cap)
        return build_body(
            req,
            stream=stream,
            cache_markers=self.dashscope and self.cache_sharing,
            thinking_style=self._thinking_style,
        )

    def _headers(self, purpose: str, *, stream: bool) -> dict[str, str]:
        headers = {PURPOSE_HEADER: purpose}
        if stream:
            headers["Accept"] = "text/event-stream"
            headers["Cache-Control"] = "no-store"
        else:
            headers["Accept"] = "application/json"
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        if self.dashscope and self.cache_sharing:
            headers[DASHSCOPE_CACHE_HEADER] = "enable"
        return headers

    async def _report_usage(self, purpose: str, usage: Usage) -> None:
        """Pass a finished request's usage on. Counting must never fail the request
        itself, so an error of the callback is logged, not raised."""
        if self.on_usage is None:
            return
        try:
            outcome = self.on_usage(purpose, usage)
            if outcome is not None:
                await outcome
        except Exception:
            log.exception("the usage callback failed (purpose=%s)", purpose)

    # ------------------------------------------------------------------ sending

    def _retry_policy(self, purpose: str) -> RetryPolicy:
        return RetryPolicy(
            max_retries=self._max_retries,
            backoff_s=self._backoff_s,
            backoff_max_s=self._backoff_max_s,
            wait_cap_s=self._retry_after_cap_s,
            background=purpose in BACKGROUND_PURPOSES,
        )

    def _hold_background(self, purpose: str) -> None:
        """Refuse a background request while the endpoint is known to be rate limiting."""
        refusal = self._hold.refusal(purpose, self._base_url)
        if refusal is not None:
            raise self._errors.error("rate_limit", refusal, retry_after=self._hold.left_s())

    @staticmethod
    def _chosen_wait(policy: RetryPolicy) -> RetryWait | None:
        """The wait tenacity chose before this attempt (None before the first), logged."""
        wait = policy.take_wait()
        if wait is not None:
            log.warning(
                "model request failed (%s%s), attempt %d of %d in %.2f s",
                wait.reason,
                f", HTTP {wait.status}" if wait.status else "",
                wait.attempt,
                wait.attempts,
                wait.delay_s,
            )
        return wait

    async def _pause(self, wait: RetryWait, deadline: float | None) -> None:
        """Sleep before the next attempt; a wait that would pass the total limit is not
        started. Cancellation (Ctrl-C) ends the sleep at once."""
        if deadline is not None and asyncio.get_running_loop().time() + wait.delay_s > deadline:
            raise self._errors.total_timeout()
        await asyncio.sleep(wait.delay_s)

    async def _attempt(
        self,
        method: str,
        url: str,
        content: bytes | None,
        headers: dict[str, str],
        stream: bool,
        first_byte: tuple[float, int] | None = None,
    ) -> httpx.Response:
        """One request; returns a 2xx response (open when ``stream``, else read).
        ``first_byte``: (seconds, unread prompt tokens) replaces the client's wait for
        bytes until the answer begins (a non-streamed answer: until it is all there)."""
        timeout: Any = httpx.USE_CLIENT_DEFAULT
        if first_byte is not None:
            default = self._http.timeout
            timeout = httpx.Timeout(
                first_byte[0], connect=default.connect, read=first_byte[0], write=default.write
            )
        request = self._http.build_request(
            method, url, content=content, headers=headers, timeout=timeout
        )
        try:
            response = await self._http.send(request, stream=True)
        except httpx.ReadTimeout as exc:
            if first_byte is not None:
                raise self._errors.first_byte(*first_byte) from exc
            raise self._errors.transport(exc, started=False) from exc
        except httpx.HTTPError as exc:
            raise self._errors.transport(exc, started=False) from exc
        try:
            if response.status_code >= 400 or not stream:
                await response.aread()
        except httpx.ReadTimeout as exc:
            await response.aclose()
            if first_byte is not None and not stream and response.status_code < 400:
                raise self._errors.first_byte(*first_byte) from exc
            raise self._errors.transport(exc, started=False) from exc
        except httpx.HTTPError as exc:
            await response.aclose()
            raise self._errors.transport(exc, started=False) from exc
        except BaseException:
            await response.aclose()
            raise
        if response.status_code >= 400:
            await response.aclose()
            raise self._errors.status(response)
        return response

    async def _send(
        self,
        method: str,
        url: str,
        content: bytes | None,
        headers: dict[str, str],
        *,
        purpose: str,
        deadline: float | None,
        on_wait: WaitCallback | None,
        first_byte: tuple[float, int] | None = None,
    ) -> httpx.Response:
        """``_attempt`` (not streamed) with retries, all given up at ``deadline`` (the
        optional limit on the whole request)."""
        policy = self._retry_policy(purpose)
        async for attempt in policy.retrying():
            wait = self._chosen_wait(policy)
            if wait is not None:
                if on_wait is not None:
                    outcome = on_wait(wait)
                    if outcome is not None:
                        await outcome
                await self._pause(wait, deadline)
            try:
                self._hold_background(purpose)
                async with asyncio.timeout_at(deadline):
                    response = await self._attempt(
                        method, url, content, headers, False, first_byte
                    )
            except TimeoutError:
                raise self._errors.total_timeout() from None
            except ModelError as exc:
                self._hold.observe(exc)
                with attempt:  # tenacity decides: a wait and a next attempt, or the end
                    raise
            else:
                self._hold.observe(None)
                return response
        raise AssertionError("tenacity ends the attempts by raising the last error")

    def _deadline(self) -> float | None:
        if self._total_timeout_s is None:
            return None
        return asyncio.get_running_loop().time() + self._total_timeout_s

    # ------------------------------------------------------------------ API

    async def stream(self, req: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        """Stream one request: text, thinking and tool-call events, then the
        :class:`ChatResult` as the last event; a :class:`RetryWait` before each wait for
        a retry.

        Close the iterator if you stop early (``contextlib.aclosing``); cancelling the
        consuming task closes the response (and ends a wait for a retry).
        """
        url = f"{self._base_url}/chat/completions"
        content = encode_body(self.build_body(req, stream=True))
        headers = self._headers(req.purpose, stream=True)
        deadline = self._deadline()
        policy = self._retry_policy(req.purpose)
        log.debug("model request purpose=%s model=%s stream=true", req.purpose, req.model)
        async for attempt in policy.retrying():
            wait = self._chosen_wait(policy)
            if wait is not None:
                yield wait
                await self._pause(wait, deadline)
            answered = False  # something of the answer reached the caller: no retry
            try:
                self._hold_background(req.purpose)
                once = self._stream_once(req, url, content, headers, deadline)
                async with aclosing(once):
                    async for event in once:
                        answered = True
                        yield event
                return
            except ModelError as exc:
                if answered:
                    number = attempt.retry_state.attempt_number
                    raise exc.with_attempts(number) from exc.__cause__
                self._hold.observe(exc)
                with attempt:  # tenacity decides: a wait and a next attempt, or the end
                    raise

    async def _stream_once(
        self,
        req: ChatRequest,
        url: str,
        content: bytes,
        headers: dict[str, str],
        deadline: float | None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """One attempt of ``stream``. Until the first event arrives the first-byte
        deadline applies, after it the between-bytes timeout."""
        loop = asyncio.get_running_loop()
        unread = self._prompts.unread_tokens(req)
        first_s = max(self._timeout_s, first_byte_s(self.options, unread))
        first_by = loop.time() + first_s
        try:
            async with asyncio.timeout_at(_earlier(deadline, first_by)):
                response = await self._attempt(
                    "POST", url, content, headers, True, (first_s, unread)
                )
        except TimeoutError:
            if deadline is not None and loop.time() >= deadline:
                raise self._errors.total_timeout() from None
            raise self._errors.first_byte(first_s, unread) from None
        try:
            if not _is_event_stream(response):
                async for event in self._whole_answer(req, response):
                    yield event
                return
            assembler = StreamAssembler()
            clock = ByteClock(response, self._timeout_s, deadline)
            answering = False
            async with aclosing(EventSource(response).aiter_sse()) as events:
                while True:
                    try:  # every byte, a keep-alive comment too, pushes the limit back
                        sse = await clock.next_event(events, first_by)
                    except StopAsyncIteration:
                        break
                    except TimeoutError:
                        if deadline is not None and loop.time() >= deadline:
                            raise self._errors.total_timeout() from None
                        if clock.last is None:
                            raise self._errors.first_byte(first_s, unread) from None
                        raise self._errors.transport(
                            httpx.ReadTimeout("between bytes"), started=True
                        ) from None
                    except SSEError as exc:
                        raise self._errors.not_a_stream(response, str(exc)) from exc
                    except httpx.HTTPError as exc:
                        raise self._errors.transport(
                            exc, started=clock.last is not None
                        ) from exc
                    if not answering:
                        self._prompts.answered(req)  # the server has read this prompt
                    answering = True
                    data = sse.data.strip()
                    if not data:
                        continue
                    if data == "[DONE]":
                        assembler.done = True  # keep reading: the stream ends by itself
                        continue
                    chunk = self._decode_chunk(data, sse.event)
                    for event in assembler.feed(chunk):
                        yield event
            self._hold.observe(None)
            for event in assembler.finish():
                yield event
            _check_ended(assembler, self._errors)
            result = assembler.result(response.headers.get("x-request-id"))
            found = self._text_calls.read(req, result)
            if found is not result:
                for index, call in enumerate(found.message.tool_calls):
                    yield ToolCallDelta(index=index, id=call.id, name=call.name)
            await self._report_usage(req.purpose, found.usage)
            yield found
        finally:
            await response.aclose()

    async def _whole_answer(
        self, req: ChatRequest, response: httpx.Response
    ) -> AsyncGenerator[StreamEvent, None]:
        """A server that ignored ``stream`` (or a gateway's JSON error with 200): the one
        body it sent, read as the non-streamed path reads it, as stream events."""
        await response.aread()
        result = self._parse_answer(response, streamed=True)
        self._hold.observe(None)
        self._prompts.answered(req)
        result = self._text_calls.read(req, result)
        if result.message.text:
            yield TextDelta(result.message.text)
        for index, call in enumerate(result.message.tool_calls):
            yield ToolCallDelta(index=index, id=call.id, name=call.name)
        await self._report_usage(req.purpose, result.usage)
        yield result

    def _decode_chunk(self, data: str, event: str = "") -> dict[str, Any]:
        try:
            chunk = msgspec.json.decode(data)
        except (msgspec.DecodeError, RecursionError):  # nested past what decodes safely
            raise self._errors.error(
                "protocol",
                f"The model endpoint {self._base_url} sent a stream event that is not "
                f"JSON ({one_line(data, 80)}).",
            ) from None
        if not isinstance(chunk, dict):
            raise self._errors.error(
                "protocol",
                f"The model endpoint {self._base_url} sent a stream event that is not "
                "a JSON object.",
            )
        # OpenRouter, Ollama: {"error": …}; Anthropic-style: event: error, "type": "error";
        # vLLM: {"object": "error", "message": …, "code": 400}.
        if (
            chunk.get("error")
            or event == "error"
            or chunk.get("type") == "error"
            or chunk.get("object") == "error"
        ):
            raise self._errors.reported(chunk, in_stream=True)
        return chunk

    def _parse_answer(self, response: httpx.Response, *, streamed: bool = False) -> ChatResult:
        """The result of a non-streamed answer (``streamed``: to a request for a stream);
        an error it carries is raised."""
        try:
            payload = msgspec.json.decode(response.content)
        except msgspec.DecodeError:
            payload = None
        if payload is None and streamed:
            kind = one_line(response.headers.get("content-type", ""), 60)
            raise self._errors.error(
                "protocol",
                f"The model endpoint {self._base_url} did not answer with an event stream "
                f"(it sent {kind} that is not JSON).",
            )
        if isinstance(payload, dict) and (payload.get("error") or payload.get("type") == "error"):
            raise self._errors.reported(payload, in_stream=False)
        try:
            if payload is None:
                raise ValueError("it is not JSON")
            return parse_completion(payload, response.headers.get("x-request-id"))
        except ValueError as exc:
            raise self._errors.error(
                "protocol",
                f"The model endpoint {self._base_url} sent an answer that could not be "
                f"read ({one_line(str(exc), 80)}).",
            ) from None

    async def chat(self, req: ChatRequest, on_event: EventCallback | None = None) -> ChatResult:
        """Stream ``req`` to its end, passing each delta (and each :class:`RetryWait`) to
        ``on_event``; the result."""
        result: ChatResult | None = None
        async with aclosing(self.stream(req)) as events:
            async for event in events:
                if isinstance(event, ChatResult):
                    result = event
                elif on_event is not None:
                    outcome = on_event(event)
                    if outcome is not None:
                        await outcome
        assert result is not None  # stream() always ends with the result or raises
        return result

    async def complete(self, req: ChatRequest, on_wait: WaitCallback | None = None) -> ChatResult:
        """One non-streamed request; ``on_wait`` is told of each wait for a retry."""
        url = f"{self._base_url}/chat/completions"
        content = encode_body(self.build_body(req, stream=False))
        headers = self._headers(req.purpose, stream=False)
        log.debug("model request purpose=%s model=%s stream=false", req.purpose, req.model)
        deadline = self._deadline()
        # Nothing comes before the whole answer: the wait is the prompt's and the answer's.
        unread = self._prompts.unread_tokens(req)
        wait_s = first_byte_s(self.options, unread) + self._timeout_s
        response = await self._send(
            "POST",
            url,
            content,
            headers,
            purpose=req.purpose,
            deadline=deadline,
            on_wait=on_wait,
            first_byte=(wait_s, unread),
        )
        self._prompts.answered(req)
        result = self._text_calls.read(req, self._parse_answer(response))
        await self._report_usage(req.purpose, result.usage)
        return result

    async def list_models(self) -> list[str]:
        """The model ids the endpoint offers (``GET {base_url}/models``)."""
        headers = self._headers("main", stream=False)
        headers.pop(DASHSCOPE_CACHE_HEADER, None)
        url = f"{self._base_url}/models"
        deadline = self._deadline()
        response = await self._send(
            "GET", url, None, headers, purpose="main", deadline=deadline, on_wait=None
        )
        try:
            payload = msgspec.json.decode(response.content)
        except msgspec.DecodeError:
            payload = None
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise self._errors.error(
                "protocol",
                f"The model endpoint {self._base_url} answered the model list with "
                "something other than an OpenAI model list.",
            )
        return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]

    async def context_window(self, model: str, timeout_s: float = 3.0) -> int | None:
        """The context window (tokens) the endpoint reports for ``model``, or None.

        Asks, in order, what servers publish: the OpenAI model list's ``max_model_len``
        (vLLM), ``context_length`` or ``max_context_length`` (LM Studio's listing,
        OpenRouter), ``meta.n_ctx`` (llama.cpp's listing: one slot's window); then
        llama.cpp's ``GET /props`` (``default_generation_settings.n_ctx``, per slot: a
        server started with ``-c 16384 -np 2`` gives each request 8,192); then Ollama's
        ``POST /api/show`` (the model's ``num_ctx`` parameter when it sets one, which is
        the window Ollama runs it with, else ``model_info.<arch>.context_length``). Hosted
        APIs that
        publish none of it (OpenAI, DashScope) get one request. Never raises: a server
        that answers none of these gives None."""
        headers = self._headers("main", stream=False)
        headers.pop(DASHSCOPE_CACHE_HEADER, None)
        headers.pop(PURPOSE_HEADER)  # not a request of the chat: counted as none
        root = self._base_url.removesuffix("/v1")
        hosted = self.dashscope or self._thinking_style == "omit"
        probes: list[tuple[str, str, Any]] = [("GET", f"{self._base_url}/models", None)]
        if not hosted:
            probes += [("GET", f"{root}/props", None), ("POST", f"{root}/api/show", model)]
        for method, url, name in probes:
            try:
                # Ollama reads `model` (older versions `name`).
                body = {"model": name, "name": name}
                content = msgspec.json.encode(body) if name is not None else None
                response = await self._http.request(
                    method, url, headers=headers, content=content, timeout=timeout_s
                )
                if response.status_code != 200:
                    continue
                payload = msgspec.json.decode(response.content)
            except (httpx.HTTPError, msgspec.DecodeError):
                continue
            window = _reported_window(payload, model)
            if window is not None:
                return window
        return None


def _check_ended(assembler: StreamAssembler, errors: EndpointErrors) -> None:
    """A stream that ended must have said it was finished, and have answered."""
    if not assembler.complete:
        raise errors.error(
            "protocol",
            f"The model endpoint {errors.base_url} ended the stream before the answer was "
            "complete.",
        )
    if not assembler.answered:
        raise errors.error(
            "protocol",
            f"The model endpoint {errors.base_url} ended the stream without an answer (no "
            "choices).",
        )


def _earlier(first: float | None, second: float) -> float:
    return second if first is None else min(first, second)


def _is_event_stream(response: httpx.Response) -> bool:
    kind = response.headers.get("content-type", "").lower()
    # No content type at all is read as a stream, as before: some servers send none.
    return not kind or "text/event-stream" in kind or "json" not in kind


def _positive_int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _reported_window(payload: Any, model: str) -> int | None:
    """A context window in a model list, a llama.cpp ``/props`` or an Ollama
    ``/api/show`` answer."""
    if not isinstance(payload, dict):
        return None
    listed = payload.get("data")
    if isinstance(listed, list):
        entries = [m for m in listed if isinstance(m, dict)]
        matching = [m for m in entries if m.get("id") == model] or entries[:1]
        for entry in matching:
            for key in ("max_model_len", "context_length", "max_context_length"):
                if (found := _positive_int(entry.get(key))) is not None:
                    return found
            meta = entry.get("meta")  # llama.cpp; its n_ctx_train is not what it runs
            if isinstance(meta, dict) and (found := _positive_int(meta.get("n_ctx"))):
                return found
        return None
    settings = payload.get("default_generation_settings")
    for holder in (settings, payload):
        if isinstance(holder, dict) and (found := _positive_int(holder.get("n_ctx"))):
            return found
    parameters = payload.get("parameters")  # Ollama: "num_ctx 8192\nstop ..." lines
    if isinstance(parameters, str):
        for line in parameters.splitlines():
            key, _, value = line.strip().partition(" ")
            if key == "num_ctx" and value.strip().isdigit() and int(value) > 0:
                return int(value)
    info = payload.get("model_info")
    if isinstance(info, dict):
        for key, value in info.items():
            if key.endswith(".context_length") and (found := _positive_int(value)):
                return found
    return None
