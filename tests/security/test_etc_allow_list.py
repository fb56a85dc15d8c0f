"""``/etc`` inside the profile is an allow-list of what toolchains read, not a mask list:
a file that is not on it is not there at all, and one that other users may not read is
never there, whatever its name (as root, a mask list left e.g. a database's access rules
readable)."""

from __future__ import annotations

import contextlib
import fnmatch
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.conftest import run_in, start_bypassed_helper
from worker.contain.helper import SandboxHelper
from worker.contain.mounts import ETC_ALLOWED


@contextlib.contextmanager
def planted(path: Path, mode: int) -> Iterator[Path]:
    path.write_text(f"PLANTED-{secrets.token_hex(4)}\n")
    os.chmod(path, mode)
    try:
        yield path
    finally:
        path.unlink()


def allowed(rel: str) -> bool:
    return any(
        rel == p or rel.startswith(p + "/") or fnmatch.fnmatchcase(rel.split("/")[0], p)
        for p in ETC_ALLOWED
    ) or any(p.startswith(rel + "/") for p in ETC_ALLOWED)  # a parent made for an entry


def test_only_allowed_entries_and_only_world_readable_files_are_there(
    bypassed_helper: SandboxHelper, tmp_path: Path
) -> None:
    result = run_in(
        bypassed_helper, tmp_path, "cd /etc && find . -readable -type f -o -readable -type d"
    )
    seen = [line[2:] for line in result.stdout.splitlines() if line.startswith("./")]
    assert "passwd" in seen and "ld.so.cache" in seen, seen[:20]
    for rel in seen:
        assert allowed(rel), rel
        info = os.stat(f"/etc/{rel}")
        assert info.st_mode & stat.S_IROTH, f"/etc/{rel} is not world-readable but visible"


def test_a_root_only_file_is_never_visible_even_where_its_directory_is(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("planting a file in /etc needs root")
    certs = Path("/etc/ssl/certs")
    with (
        planted(Path(f"/etc/specrun-{secrets.token_hex(4)}.conf"), 0o600) as top,
        planted(Path(f"/etc/specrun-{secrets.token_hex(4)}.conf"), 0o644) as unlisted,
        contextlib.ExitStack() as stack,
    ):
        inner = None
        if certs.is_dir():
            pem = certs / f"specrun-{secrets.token_hex(4)}.pem"
            inner = stack.enter_context(planted(pem, 0o600))
        helper = start_bypassed_helper()
        try:
            paths = [p for p in (top, unlisted, inner) if p is not None]
            result = run_in(helper, tmp_path, " ; ".join(f"cat {p}" for p in paths))
        finally:
            helper.close()
    assert "PLANTED" not in result.stdout, result


def test_toolchains_still_find_what_they_read(
    bypassed_helper: SandboxHelper, tmp_path: Path
) -> None:
    result = run_in(
        bypassed_helper,
        tmp_path,
        "getent passwd root | cut -d: -f1; "
        "python3 -c 'import ssl; print(len(ssl.create_default_context().get_ca_certs()) > 0)'; "
        "ldconfig -p | head -1 | cut -c1-9",
    )
    assert result.stdout.split()[:2] == ["root", "True"], result
