"""The service log without the endpoint's password."""

from __future__ import annotations

import logging

from protocol.text.secret_text import url_password


class PasswordLogFilter(logging.Filter):
    """Takes the password of ``url`` out of every log record it passes, as
    :func:`without_password` shows it (``user:***@host``). The HTTP client logs each
    request's whole URL (``HTTP Request: POST http://user:pw@host/v1/...``), credentials
    included, and ``specrun logs`` prints the log."""

    def __init__(self, url: str) -> None:
        super().__init__()
        password = url_password(url)
        self._spelled = f":{password}@" if password else None

    def filter(self, record: logging.LogRecord) -> bool:
        if self._spelled is not None:
            message = record.getMessage()
            if self._spelled in message:
                record.msg = message.replace(self._spelled, ":***@")
                record.args = None
        return True
