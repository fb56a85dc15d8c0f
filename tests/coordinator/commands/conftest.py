"""The command tests share the service tests' place: a project directory, its own HOME,
a private temp dir."""

from __future__ import annotations

from tests.coordinator.service.conftest import place

__all__ = ["place"]
