"""Property: no path, however built, lets a write land outside the project root."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from overlay import Overlay, OverlayError
from tests.overlay.helpers import journal_of, snapshot

NAMES = [
    ".",
    "..",
    "",
    "sub",
    "deeper",
    "inner.txt",
    "link_in",
    "link_out",
    "file_out",
    "dangling_out",
    "up",
    "abs_out",
    "loop",
    "..foo",
    "project",
    "project2",
    "outside",
    "secret.txt",
    "new.txt",
    "..",
    "..",
]

ODD = ["\ud800", "a\udcffb", "é", "ファイル", "x" * 300, " ", "~", "$HOME", "*"]

component = st.one_of(
    st.sampled_from(NAMES),
    st.sampled_from(ODD),
    st.text(
        alphabet=st.characters(blacklist_characters="/\x00"),
        min_size=1,
        max_size=12,
    ),
)
prefix = st.sampled_from(["", "{root}", "{base}", "{outside}", "{sibling}", "/", "//"])
path_spec = st.tuples(prefix, st.lists(component, max_size=7), st.booleans())


def _build(base: Path) -> tuple[Path, Path]:
    root = base / "project"
    outside = base / "outside"
    sibling = base / "project2"  # shares the root's name as a prefix
    for d in (root / "sub" / "deeper", outside, sibling):
        d.mkdir(parents=True)
    (root / "sub" / "inner.txt").write_text("inner")
    (root / "..foo").write_text("dots")
    (outside / "secret.txt").write_text("secret")
    (sibling / "new.txt").write_text("sibling")
    (root / "link_in").symlink_to("sub")
    (root / "link_out").symlink_to("../outside")
    (root / "file_out").symlink_to(outside / "secret.txt")
    (root / "dangling_out").symlink_to(outside / "missing.txt")
    (root / "up").symlink_to("..")
    (root / "abs_out").symlink_to(outside)
    (root / "loop").symlink_to("loop")
    (root / "sub" / "back").symlink_to("../../outside")
    return root, outside


def _render(spec: tuple[str, list[str], bool], base: Path) -> str:
    head, parts, trailing = spec
    head = head.format(
        root=base / "project", base=base, outside=base / "outside", sibling=base / "project2"
    )
    text = "/".join(parts)
    if head:
        text = head.rstrip("/") + "/" + text if head not in ("/", "//") else head + text
    if trailing and text:
        text += "/"
    return text


def _outside_state(base: Path) -> dict[str, object]:
    state = snapshot(base)
    return {rel: v for rel, v in state.items() if not rel.startswith("project/")}


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(path_spec, min_size=1, max_size=6))
def test_no_write_lands_outside_the_root(specs: list[tuple[str, list[str], bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(os.path.realpath(tmp))
        root, _outside = _build(base)
        ovdir = base / "overlay-area" / "1" / "s"
        journals = journal_of(root)  # beside the root, as specrun's state directory is
        before_outside = _outside_state(base)
        ov = Overlay(root, ovdir)
        for spec in specs:
            raw = _render(spec, base)
            try:
                target = ov.redirect_write(raw)
            except OverlayError as exc:
                assert str(exc)  # a message, never an empty error
                continue
            # The overlay path is inside the overlay dir and maps to a real path inside root.
            rel = target.relative_to(ovdir)
            assert ".." not in rel.parts
            real = root / rel
            assert os.path.realpath(real) == str(real)
            assert os.path.realpath(target.parent).startswith(str(ovdir) + os.sep) or (
                os.path.realpath(target.parent) == str(ovdir)
            )
            target.write_bytes(b"speculative write")
        result = ov.apply_to_real(journal_dir=journals, durable=False)
        for rel in result.applied:
            assert (root / rel).read_bytes() == b"speculative write"
            assert os.path.realpath(root / rel).startswith(str(root) + os.sep)
        ov.cleanup()
        after_outside = _outside_state(base)
        after_outside.pop("overlay-area", None)
        before_outside.pop("overlay-area", None)
        assert after_outside == before_outside


@settings(max_examples=200, deadline=None)
@given(path_spec)
def test_reads_resolve_to_the_overlay_or_pass_through(spec: tuple[str, list[str], bool]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(os.path.realpath(tmp))
        root, _outside = _build(base)
        ovdir = base / "ov" / "1" / "s"
        ov = Overlay(root, ovdir)
        raw = _render(spec, base)
        try:
            target = ov.redirect_write(raw)
        except OverlayError:
            got = ov.resolve_read(raw)
            assert got == (Path(raw) if os.path.isabs(raw) else root / raw)
        else:
            assert ov.resolve_read(raw) == target
