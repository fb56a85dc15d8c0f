"""Copy-on-write behaviour of Overlay: redirect_write, resolve_read, records, cleanup."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from overlay import (
    Fingerprint,
    InvalidTargetError,
    Overlay,
    OverlayError,
    OverlayEscapeError,
    overlay_dir_for,
    speculation_base_dir,
)
from tests.overlay.helpers import (
    applied,
    journal_of,
    record_from_report,
    reported_record,
    snapshot,
    strays,
)

# ----------------------------------------------------------------------------- copy-up


def test_overlay_dir_is_created_lazily(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    assert not ovdir.exists()
    ov.redirect_write("src/app.py")
    assert ovdir.is_dir()
    assert stat.S_IMODE(ovdir.parent.stat().st_mode) == 0o700


def test_first_write_copies_content_mode_and_fingerprint(root: Path, ovdir: Path) -> None:
    script = root / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o751)
    st = script.stat()
    ov = Overlay(root, ovdir)

    path = ov.redirect_write("run.sh")

    assert path == ovdir / "run.sh"
    assert path.read_text() == "#!/bin/sh\necho hi\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    fp = ov.fingerprints()["run.sh"]
    assert fp == Fingerprint(
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        sha256=hashlib.sha256(b"#!/bin/sh\necho hi\n").hexdigest(),
    )


def test_later_writes_return_the_same_path_without_copying_again(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    first = ov.redirect_write("src/app.py")
    first.write_text("speculative\n")
    spellings = [
        "src/app.py",
        "./src/app.py",
        "src//app.py",
        "src/../src/app.py",
        str(root / "src" / "app.py"),
        root / "src" / "app.py",
    ]
    for spelling in spellings:
        assert ov.redirect_write(spelling) == first
    assert first.read_text() == "speculative\n"
    assert list(ov.written_files()) == ["src/app.py"]


def test_an_overlay_path_given_back_is_returned_unchanged(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    path = ov.redirect_write("src/app.py")
    assert ov.redirect_write(path) == path
    assert ov.redirect_write(str(path)) == path
    assert ov.resolve_read(path) == path
    with pytest.raises(OverlayEscapeError):  # not an entry of this overlay
        ov.redirect_write(ovdir / "src" / "util.py")
    with pytest.raises(OverlayEscapeError):
        ov.redirect_write(str(ovdir / "src" / ".." / ".." / "elsewhere.txt"))


def test_new_file_only_gets_its_parent_dir(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    path = ov.redirect_write("pkg/deep/new_module.py")
    assert path == ovdir / "pkg" / "deep" / "new_module.py"
    assert path.parent.is_dir()
    assert not path.exists()
    assert ov.fingerprints() == {"pkg/deep/new_module.py": None}
    assert not (root / "pkg").exists()


def test_written_files_is_ordered_and_a_copy(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    for rel in ["tests/test_app.py", "README.md", "new.txt", "src/app.py"]:
        ov.redirect_write(rel)
    files = ov.written_files()
    assert list(files) == ["tests/test_app.py", "README.md", "new.txt", "src/app.py"]
    assert files["README.md"] == ovdir / "README.md"
    files.clear()
    assert len(ov.written_files()) == 4


def test_symlink_inside_root_maps_to_its_target(root: Path, ovdir: Path) -> None:
    (root / "link.py").symlink_to("src/app.py")
    (root / "srclink").symlink_to("src")
    ov = Overlay(root, ovdir)
    path = ov.redirect_write("link.py")
    assert path == ovdir / "src" / "app.py"
    assert ov.redirect_write("srclink/app.py") == path
    assert list(ov.written_files()) == ["src/app.py"]


def test_dotdot_prefixed_names_are_legal(root: Path, ovdir: Path) -> None:
    (root / "..foo").write_text("dots\n")
    ov = Overlay(root, ovdir)
    assert ov.redirect_write("..foo").read_text() == "dots\n"
    assert ov.redirect_write("src/..bar") == ovdir / "src" / "..bar"
    assert ov.redirect_write("...") == ovdir / "..."
    assert set(ov.written_files()) == {"..foo", "src/..bar", "..."}


def test_unicode_names(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    path = ov.redirect_write("données/ファイル.txt")
    path.write_text("ok")
    assert ov.resolve_read("données/ファイル.txt") == path


# ----------------------------------------------------------------------------- boundaries


@pytest.mark.parametrize("spelling", ["../outside.txt", "src/../../outside.txt", "src/../.."])
def test_dotdot_escape_is_refused(root: Path, ovdir: Path, spelling: str) -> None:
    ov = Overlay(root, ovdir)
    with pytest.raises(OverlayEscapeError, match="outside the project root") as info:
        ov.redirect_write(spelling)
    assert spelling in str(info.value)
    assert not ovdir.exists()


def test_absolute_path_outside_is_refused(root: Path, ovdir: Path, tmp_path: Path) -> None:
    ov = Overlay(root, ovdir)
    with pytest.raises(OverlayEscapeError, match="/etc/passwd"):
        ov.redirect_write("/etc/passwd")
    # A sibling whose name merely starts with the root's name is outside too.
    sibling = tmp_path / (root.name + "2")
    sibling.mkdir()
    with pytest.raises(OverlayEscapeError):
        ov.redirect_write(str(sibling / "file.txt"))
    assert isinstance(OverlayEscapeError("x", "y"), ValueError)


def test_symlink_pointing_outside_is_refused(root: Path, ovdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (root / "innocent.txt").symlink_to(outside / "secret.txt")
    (root / "dangling.txt").symlink_to(outside / "missing.txt")
    (root / "up").symlink_to("..")
    ov = Overlay(root, ovdir)
    for spelling in ["innocent.txt", "dangling.txt", "up/outside/secret.txt", "up/x.txt"]:
        with pytest.raises(OverlayEscapeError, match="outside the project root"):
            ov.redirect_write(spelling)
    assert ov.written_files() == {}


def test_symlinked_parent_dir_pointing_outside_is_refused(
    root: Path, ovdir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "src" / "vendor").symlink_to(outside, target_is_directory=True)
    ov = Overlay(root, ovdir)
    with pytest.raises(OverlayEscapeError, match=r"src/vendor/lib\.py"):
        ov.redirect_write("src/vendor/lib.py")
    with pytest.raises(OverlayEscapeError):
        ov.redirect_write("src/vendor/new/dir/file.py")
    assert list(outside.iterdir()) == []


def test_reads_outside_pass_through(root: Path, ovdir: Path, tmp_path: Path) -> None:
    ov = Overlay(root, ovdir)
    assert ov.resolve_read("/etc/hostname") == Path("/etc/hostname")
    assert ov.resolve_read(tmp_path / "x") == tmp_path / "x"


@pytest.mark.parametrize(
    ("spelling", "reason"),
    [
        (".", "project root"),
        ("", "empty"),
        ("src", "directory"),
        ("src/", "directory"),
        ("newdir/", "directory"),
        ("README.md/inner.txt", "not a directory"),
        ("a\x00b", "NUL"),
        ("bad\ud800", "cannot be encoded"),
        ("new/" + "x" * 256, "longer than 255 bytes"),
        (".specrun/journal/x.json", "journal"),
    ],
)
def test_targets_that_cannot_be_files(root: Path, ovdir: Path, spelling: str, reason: str) -> None:
    ov = Overlay(root, ovdir)
    with pytest.raises(InvalidTargetError, match=reason):
        ov.redirect_write(spelling)


def test_root_itself_by_absolute_path(root: Path, ovdir: Path) -> None:
    with pytest.raises(InvalidTargetError, match="project root"):
        Overlay(root, ovdir).redirect_write(str(root))


def test_special_files_are_refused(root: Path, ovdir: Path) -> None:
    os.mkfifo(root / "pipe")
    with pytest.raises(InvalidTargetError, match="not a regular file"):
        Overlay(root, ovdir).redirect_write("pipe")


def test_file_and_directory_cannot_share_a_path(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("gen/out.txt")
    with pytest.raises(InvalidTargetError, match="files below it"):
        ov.redirect_write("gen")
    ov.redirect_write("made")
    with pytest.raises(InvalidTargetError, match="already written as a file"):
        ov.redirect_write("made/inner.txt")


def test_symlink_loop_is_refused(root: Path, ovdir: Path) -> None:
    (root / "loop").symlink_to("loop")
    ov = Overlay(root, ovdir)
    with pytest.raises(OverlayError):
        ov.redirect_write("loop")
    with pytest.raises(OverlayError):
        ov.redirect_write("loop/x.txt")


def test_missing_root_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(OverlayError, match="not an existing directory"):
        Overlay(tmp_path / "nope", tmp_path / "ov")


# ----------------------------------------------------------------------------- reads


def test_resolve_read(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    assert ov.resolve_read("src/app.py") == root / "src" / "app.py"
    assert ov.resolve_read(str(root / "src" / "app.py")) == root / "src" / "app.py"
    written = ov.redirect_write("src/app.py")
    assert ov.resolve_read("src/app.py") == written
    assert ov.resolve_read(str(root / "src/./app.py")) == written
    assert ov.resolve_read("README.md") == root / "README.md"
    (root / "alias.py").symlink_to("src/app.py")
    assert ov.resolve_read("alias.py") == written


# ----------------------------------------------------------------------------- records


def test_record_round_trip(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("src/app.py").write_text("changed\n")
    ov.redirect_write("new/file.txt").write_text("new\n")
    ov.redirect_write("never.txt")
    record = json.loads(json.dumps(reported_record(ov)))  # plain data
    assert record["new/file.txt"] == {
        "overlay_path": str(ovdir / "new" / "file.txt"),
        "size": None,
        "mtime_ns": None,
        "sha256": None,
        "deleted": False,
        "by_command": False,
    }
    again = Overlay.from_record(root, ovdir, record)
    assert again.written_files() == ov.written_files()
    assert again.fingerprints() == ov.fingerprints()
    assert list(again.written_files()) == ["src/app.py", "new/file.txt", "never.txt"]


def test_fingerprint_dict_round_trip() -> None:
    fp = Fingerprint(size=3, mtime_ns=123, sha256="ab" * 32)
    assert Fingerprint.from_dict(fp.to_dict()) == fp
    with pytest.raises(dataclasses.FrozenInstanceError):
        fp.size = 4  # type: ignore[misc]
    for bad in [
        {},
        {"size": "3", "mtime_ns": 1, "sha256": "ab" * 32},
        {**fp.to_dict(), "sha256": "zz"},
    ]:
        with pytest.raises(ValueError):
            Fingerprint.from_dict(bad)


@pytest.mark.parametrize(
    "entries",
    [
        {"../escape.txt": {"overlay_path": "X", "size": None, "mtime_ns": None, "sha256": None}},
        {"a.txt": {"overlay_path": "/etc/passwd", "size": None, "mtime_ns": None, "sha256": None}},
        {"src/../a.txt": {"overlay_path": "X", "size": None, "mtime_ns": None, "sha256": None}},
        {"a.txt": {"overlay_path": "X", "size": 1, "mtime_ns": None, "sha256": None}},
        {"a.txt": "not a mapping"},
    ],
)
def test_from_record_rejects_untrusted_entries(
    root: Path, ovdir: Path, entries: dict[str, object]
) -> None:
    fixed = {
        rel: {**data, "overlay_path": str(ovdir / rel)}
        if isinstance(data, dict) and data["overlay_path"] == "X"
        else data
        for rel, data in entries.items()
    }
    with pytest.raises(OverlayError):
        Overlay.from_record(root, ovdir, fixed)  # type: ignore[arg-type]


_CHILD = """
import sys
from overlay import Overlay
from tests.overlay.helpers import worker_report
ov = Overlay(sys.argv[1], sys.argv[2])
ov.redirect_write("src/app.py").write_text("from the worker\\n")
ov.redirect_write("src/new_mod.py").write_text("NEW = 1\\n")
ov.redirect_write("unused.txt")
sys.stdout.buffer.write(worker_report(ov))
"""


def test_record_crosses_a_real_process_boundary(root: Path, ovdir: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), str(ovdir)],
        capture_output=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],  # where `tests` imports from
    )
    ov = Overlay.from_record(root, ovdir, record_from_report(out.stdout))
    result = ov.apply_to_real(journal_dir=journal_of(ov))
    assert result.applied == ["src/app.py", "src/new_mod.py"]
    assert result.skipped == ["unused.txt"]
    assert (root / "src" / "app.py").read_text() == "from the worker\n"
    assert (root / "src" / "new_mod.py").read_text() == "NEW = 1\n"
    ov.cleanup()
    assert not ovdir.exists()
    assert strays(root) == []


# ----------------------------------------------------------------------------- cleanup


def test_cleanup_removes_overlay_and_empty_pid_dir(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("src/app.py")
    ov.redirect_write("a/b/c.txt").write_text("x")
    before = snapshot(root)
    ov.cleanup()
    assert not ovdir.exists()
    assert not ovdir.parent.exists()  # the per-pid dir became empty
    assert ovdir.parent.parent.exists()
    assert ov.written_files() == {}
    ov.cleanup()  # idempotent
    assert snapshot(root) == before


def test_cleanup_keeps_a_pid_dir_still_in_use(root: Path, ovdir: Path) -> None:
    other = Overlay(root, ovdir.parent / "spec-2")
    other.redirect_write("README.md")
    ov = Overlay(root, ovdir)
    ov.redirect_write("src/app.py")
    ov.cleanup()
    assert not ovdir.exists()
    assert (ovdir.parent / "spec-2" / "README.md").exists()
    other.cleanup()
    assert not ovdir.parent.exists()


def test_cleanup_never_raises(root: Path, tmp_path: Path) -> None:
    Overlay(root, tmp_path / "never-created").cleanup()
    with Overlay(root, tmp_path / "ctx" / "7" / "s") as ov:
        ov.redirect_write("README.md")
    assert not (tmp_path / "ctx" / "7").exists()
    assert (tmp_path / "ctx").exists()


def test_overlay_usable_again_after_cleanup(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("README.md").write_text("one")
    ov.cleanup()
    path = ov.redirect_write("README.md")
    assert path.read_text() == "# demo\n"


# ----------------------------------------------------------------------------- paths helpers


def test_path_helpers() -> None:
    base = speculation_base_dir()
    assert base == Path(tempfile.gettempdir()) / f"specrun-speculation-{os.geteuid()}"
    assert overlay_dir_for(1234, "abc") == base / "1234" / "abc"
    for bad in ["", ".", "..", "a/b"]:
        with pytest.raises(OverlayError):
            overlay_dir_for(1234, bad)
    with pytest.raises(OverlayError):
        overlay_dir_for(0, "abc")


def test_overlay_dir_may_not_contain_the_root(root: Path) -> None:
    with pytest.raises(OverlayError, match="contains the project root"):
        Overlay(root, root.parent)


# ----------------------------------------------------------------------------- times at Tab


def test_what_a_command_wrote_keeps_its_time_at_tab(root: Path, ovdir: Path) -> None:
    """make compares times: a build output applied at Tab keeps the time the command gave
    it, also across the record the coordinator rebuilds the overlay from; a file tool's
    write gets the time of the apply (the user may have built since)."""
    dated = 981173106_000_000_000
    ov = Overlay(root, ovdir)
    built = ov.redirect_write("build/out.o", by_command=True)
    built.write_text("object\n")
    os.utime(built, ns=(dated, dated))
    edited = ov.redirect_write("notes.md")
    edited.write_text("notes\n")
    os.utime(edited, ns=(dated, dated))
    record = {
        rel: {**(fp.to_dict() if fp else dict.fromkeys(("size", "mtime_ns", "sha256"))),
              "overlay_path": str(ov.written_files()[rel]), "by_command": rel == "build/out.o"}
        for rel, fp in ov.fingerprints().items()
    }
    applied(Overlay.from_record(root, ovdir, record), durable=False)
    assert (root / "build/out.o").stat().st_mtime_ns == dated
    assert (root / "notes.md").stat().st_mtime_ns > dated
