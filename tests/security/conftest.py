"""Fixtures the security tests share with the service unit tests."""

from tests.coordinator.service.conftest import place

__all__ = ["place"]
