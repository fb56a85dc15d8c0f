"""Opening below a directory with no symlink followed: openat2 and the fallback walk."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from overlay.kernel import beneath


@pytest.fixture(params=["openat2", "walk"])
def opener(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "walk":
        monkeypatch.setattr(beneath, "_openat2_works", False)
    return str(request.param)


def test_a_plain_file_opens(tmp_path: Path, opener: str) -> None:
    (tmp_path / "a/b").mkdir(parents=True)
    (tmp_path / "a/b/c.txt").write_text("ok")
    fd = beneath.open_beneath(str(tmp_path), "a/b/c.txt")
    try:
        assert os.read(fd, 10) == b"ok"
    finally:
        os.close(fd)
    if opener == "openat2":
        assert beneath.openat2_available()


@pytest.mark.parametrize(
    "rel", ["link.txt", "dirlink/secret", "a/dirlink/secret", "../outside", "/etc/passwd", "a//x"]
)
def test_symlinks_and_escapes_are_refused(tmp_path: Path, opener: str, rel: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("secret")
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "link.txt").symlink_to(outside / "secret")
    (root / "dirlink").symlink_to(outside)
    (root / "a/dirlink").symlink_to("../../outside")
    with pytest.raises(OSError) as refused:
        os.close(beneath.open_beneath(str(root), rel))
    assert refused.value.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV, errno.EINVAL)
