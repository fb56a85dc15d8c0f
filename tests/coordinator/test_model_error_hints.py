"""What the CLI tells a person to do about a model error, for the sentences the model
client really writes (``protocol/model/endpoint_errors.py``)."""

from __future__ import annotations

import httpx
import pytest

from coordinator.cli.render import explain_model_error
from protocol.model.endpoint_errors import EndpointErrors

ERRORS = EndpointErrors("http://127.0.0.1:8000/v1", None, timeout_s=120.0,
                        connect_timeout_s=10.0, total_timeout_s=600.0)
SERVER_HINT = "Check that the model server is running"


@pytest.mark.parametrize("message", [
    str(ERRORS.transport(httpx.ReadTimeout("read"), started=False)),  # sent nothing
    str(ERRORS.transport(httpx.ReadTimeout("read"), started=True)),  # stopped sending
    str(ERRORS.transport(httpx.ConnectTimeout("connect"), started=False)),
    str(ERRORS.total_timeout()),
])
def test_a_slow_or_silent_endpoint_points_at_the_server(message: str) -> None:
    """A slow local model was told only "See `specrun logs` for details"."""
    shown, hint = explain_model_error(message)
    assert shown == message
    assert hint.startswith(SERVER_HINT), (message, hint)


def _status(status: int, body: bytes, kind: str = "application/json") -> str:
    response = httpx.Response(status, headers={"content-type": kind}, content=body)
    return str(ERRORS.status(response))


@pytest.mark.parametrize(("message", "start"), [
    # a proxy's HTML 403 is not a key problem: it was told to set OPENAI_API_KEY
    (_status(403, b"<!DOCTYPE html><html><title>Attention Required!</title></html>",
             "text/html"), "Check baseUrl and the network"),
    # OpenAI's exhausted quota is a 429: it was told to wait a moment
    (_status(429, b'{"error": {"code": "insufficient_quota", "message": "You exceeded '
                  b'your current quota."}}'), "Add credit or raise the quota"),
    (_status(402, b'{"error": {"message": "Insufficient Balance"}}'),
     "Add credit or raise the quota"),
    (_status(400, b'{"error": {"code": "content_filter", "message": "filtered"}}'),
     "Rephrase the request"),
])
def test_a_billing_filter_or_proxy_answer_gets_its_own_advice(message: str, start: str) -> None:
    shown, hint = explain_model_error(message)
    assert shown == message
    assert hint.startswith(start), (message, hint)
