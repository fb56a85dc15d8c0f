"""The overlay package may import only the standard library, psutil and itself (its
``libc`` module is the project's one C library handle; design §2)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import overlay

ALLOWED = set(sys.stdlib_module_names) | {"psutil", "overlay", "__future__"}


def test_overlay_imports_only_stdlib_and_psutil() -> None:
    package = Path(overlay.__file__).parent
    bad = []
    for source in sorted(package.glob("*.py")):
        tree = ast.parse(source.read_text(), filename=str(source))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            bad += [f"{source.name}: {n}" for n in names if n.split(".")[0] not in ALLOWED]
    assert bad == []


def test_public_api() -> None:
    for name in [
        "Overlay",
        "ApplyResult",
        "RecoveryResult",
        "Fingerprint",
        "OverlayError",
        "OverlayEscapeError",
        "ConflictError",
        "ApplyError",
        "recover",
        "sweep",
        "speculation_base_dir",
        "overlay_dir_for",
    ]:
        assert name in overlay.__all__
        assert hasattr(overlay, name)
