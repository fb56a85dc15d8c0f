"""The commands the command line runs itself (no one control request each): one module
per command, named after it (``explain-shell`` in ``explain_shell.py``), holding its click
command under that name. Found by name like the declared commands (``app.py``), so
adding one is adding its module."""

from __future__ import annotations
