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
