"""A password in a URL never reaches what is shown; everything else of the URL does."""

from __future__ import annotations

import pytest

from protocol.text.secret_text import without_password


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pw@host:8000/v1", "http://user:***@host:8000/v1"),
        ("https://gw:s3cr%40t@example.com/v1", "https://gw:***@example.com/v1"),
        ("http://:onlypass@host/v1", "http://:***@host/v1"),  # no user name, a password
        ("http://v1:v1@host/v1", "http://v1:***@host/v1"),  # the path keeps its own 'v1'
        ("http://a:b:c@host/v1", "http://a:***@host/v1"),  # ':' inside the password
        ("http://user@host/v1", "http://user@host/v1"),  # a user name alone is no secret
        ("http://host:8000/v1", "http://host:8000/v1"),
        ("http://[::1:8000/v1", "http://[::1:8000/v1"),  # does not parse: as it is
        ("", ""),
    ],
)
def test_without_password(url: str, shown: str) -> None:
    assert without_password(url) == shown
