"""apply_to_real: all-or-nothing, conflict-checked, rolled back on failure."""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import overlay.kernel.fs
from overlay import ApplyError, ConflictError, Overlay
from tests.overlay.helpers import applied, journal_of, snapshot, strays


def _speculate(root: Path, ovdir: Path) -> Overlay:
    """An overlay that modifies two files, creates two (one in new dirs), leaves one unwritten."""
    ov = Overlay(root, ovdir)
    ov.redirect_write("src/app.py").write_text("print('speculated')\n")
    ov.redirect_write("README.md").write_text("# demo, improved\n")
    ov.redirect_write("src/new.py").write_text("NEW = True\n")
    ov.redirect_write("docs/guide/intro.md").write_text("hello\n")
    ov.redirect_write("never/written.txt")
    return ov


EXPECTED = {
    "src/app.py": "print('speculated')\n",
    "README.md": "# demo, improved\n",
    "src/new.py": "NEW = True\n",
    "docs/guide/intro.md": "hello\n",
}


def test_the_journal_directory_has_no_default(root: Path, ovdir: Path, tmp_path: Path) -> None:
    # A journal in the project could be shipped by a repository; the caller names one
    # outside (specrun's state directory), and a link there is refused.
    ov = _speculate(root, ovdir)
    before = snapshot(root)
    with pytest.raises(TypeError, match="journal_dir"):
        ov.apply_to_real()  # type: ignore[call-arg]
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ApplyError, match="not a directory of specrun's"):
        ov.apply_to_real(journal_dir=str(tmp_path / "linked"))
    assert snapshot(root) == before
    assert not (root / ".specrun").exists()


@pytest.mark.parametrize("durable", [True, False])
def test_apply_writes_every_file(root: Path, ovdir: Path, durable: bool) -> None:
    ov = _speculate(root, ovdir)
    result = ov.apply_to_real(journal_dir=journal_of(ov), durable=durable)
    assert result.applied == ["src/app.py", "README.md", "src/new.py", "docs/guide/intro.md"]
    assert result.skipped == ["never/written.txt"]
    assert result.elapsed_s > 0
    for rel, text in EXPECTED.items():
        assert (root / rel).read_text() == text
    assert not (root / "never").exists()
    assert not (root / ".specrun").exists()
    assert strays(root) == []


def test_apply_keeps_mode_bits(root: Path, ovdir: Path) -> None:
    script = root / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    ov = Overlay(root, ovdir)
    ov.redirect_write("run.sh").write_text("#!/bin/sh\necho new\n")
    new_tool = ov.redirect_write("bin/tool")
    new_tool.write_text("#!/bin/sh\n")
    new_tool.chmod(0o755)
    ov.apply_to_real(journal_dir=journal_of(ov))
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert stat.S_IMODE((root / "bin" / "tool").stat().st_mode) == 0o755


def test_apply_never_carries_a_set_uid_set_gid_or_sticky_bit(root: Path, ovdir: Path) -> None:
    """Only a forged overlay holds one (no tool sets it, a captured command's are dropped);
    the listing says what is applied: the exec bits, nothing more."""
    ov = Overlay(root, ovdir)
    planted = ov.redirect_write("bin/su-helper")
    planted.write_text("#!/bin/sh\n")
    planted.chmod(0o6755)
    sticky = ov.redirect_write("src/app.py")
    sticky.write_text("changed\n")
    sticky.chmod(0o1644)
    result = ov.apply_to_real(journal_dir=journal_of(ov))
    assert stat.S_IMODE((root / "bin" / "su-helper").stat().st_mode) == 0o755
    assert stat.S_IMODE((root / "src" / "app.py").stat().st_mode) == 0o644
    modes = {c.rel: c.mode_after for c in result.changes}
    assert modes == {"bin/su-helper": 0o755, "src/app.py": 0o644}
    assert all("setuid" not in c.mode_change and "sticky" not in c.mode_change
               for c in result.changes)


def test_apply_with_zero_files(root: Path, ovdir: Path) -> None:
    before = snapshot(root)
    result = applied(Overlay(root, ovdir))
    assert (result.applied, result.skipped) == ([], [])
    assert snapshot(root) == before


def test_unwritten_entries_only(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("a/b/new.txt")
    ov.redirect_write("other.txt")
    before = snapshot(root)
    result = ov.apply_to_real(journal_dir=journal_of(ov))
    assert result.applied == []
    assert result.skipped == ["a/b/new.txt", "other.txt"]
    assert snapshot(root) == before


def test_copied_up_but_unchanged_file_is_not_a_conflict(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("src/util.py")  # copied up, never changed
    ov.redirect_write("src/app.py").write_text("changed\n")
    (root / "src" / "util.py").write_text("the user's edit\n")
    result = ov.apply_to_real(journal_dir=journal_of(ov))
    assert result.applied == ["src/app.py"]
    assert result.unchanged == ["src/util.py"]
    assert (root / "src" / "util.py").read_text() == "the user's edit\n"


def test_identical_resave_is_not_a_conflict(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("src/app.py").write_text("changed\n")
    real = root / "src" / "app.py"
    real.write_bytes(real.read_bytes())  # same bytes, new mtime
    os.utime(real, ns=(1, 1))
    assert ov.apply_to_real(journal_dir=journal_of(ov)).applied == ["src/app.py"]
    assert real.read_text() == "changed\n"


# ----------------------------------------------------------------------------- conflicts


def test_conflicts_are_all_named_and_nothing_is_applied(root: Path, ovdir: Path) -> None:
    ov = _speculate(root, ovdir)
    ov.redirect_write("tests/test_app.py").write_text("changed too\n")
    (root / "src" / "app.py").write_text("the user edited this\n")  # modified
    (root / "src" / "new.py").write_text("the user created this\n")  # created
    (root / "tests" / "test_app.py").unlink()  # deleted
    before = snapshot(root)
    with pytest.raises(ConflictError) as info:
        ov.apply_to_real(journal_dir=journal_of(ov))
    err = info.value
    assert err.paths == ["src/app.py", "src/new.py", "tests/test_app.py"]
    assert err.reasons == {
        "src/app.py": "modified",
        "src/new.py": "created",
        "tests/test_app.py": "deleted",
    }
    for rel in err.paths:
        assert rel in str(err)
    assert snapshot(root) == before
    assert strays(root) == []
    # The overlay is intact: after the user reverts, the same overlay applies.
    (root / "src" / "app.py").write_text("print('app')\n")
    (root / "src" / "new.py").unlink()
    (root / "tests" / "test_app.py").write_text("def test_app():\n    assert True\n")
    ov.apply_to_real(journal_dir=journal_of(ov))
    assert (root / "src" / "new.py").read_text() == "NEW = True\n"


def test_same_size_modification_is_detected(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("README.md").write_text("speculated\n")
    real = root / "README.md"
    st = real.stat()
    real.write_text("# DEMO\n")  # same size
    os.utime(real, ns=(st.st_atime_ns, st.st_mtime_ns))  # and same mtime
    with pytest.raises(ConflictError, match=r"README\.md \(modified\)"):
        ov.apply_to_real(journal_dir=journal_of(ov))


def test_file_replaced_by_symlink_is_a_conflict(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("README.md").write_text("speculated\n")
    (root / "README.md").unlink()
    (root / "README.md").symlink_to("src/app.py")
    with pytest.raises(ConflictError, match="replaced"):
        ov.apply_to_real(journal_dir=journal_of(ov))


def test_parent_dir_swapped_for_a_symlink_is_a_conflict(
    root: Path, ovdir: Path, tmp_path: Path
) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("gen/out/file.txt").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "gen").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConflictError, match=r"gen/out/file\.txt"):
        ov.apply_to_real(journal_dir=journal_of(ov))
    assert list(outside.iterdir()) == []


def test_existing_parent_reached_through_a_new_symlink_is_a_conflict(
    root: Path, ovdir: Path, tmp_path: Path
) -> None:
    (root / "gen" / "out").mkdir(parents=True)
    (root / "gen" / "out" / "file.txt").write_text("old")
    ov = Overlay(root, ovdir)
    ov.redirect_write("gen/out/file.txt").write_text("new")
    ov.redirect_write("gen/out/other.txt").write_text("new")
    # The user moves gen away and puts a symlink to an identical tree outside in its place.
    outside = tmp_path / "outside"
    (root / "gen").rename(outside)
    (root / "gen").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConflictError) as info:
        ov.apply_to_real(journal_dir=journal_of(ov))
    assert info.value.paths == ["gen/out/file.txt", "gen/out/other.txt"]
    assert (outside / "out" / "file.txt").read_text() == "old"
    assert not (outside / "out" / "other.txt").exists()


def test_parent_dir_replaced_by_a_file_is_a_conflict(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("gen/out.txt").write_text("x")
    (root / "gen").write_text("a file now")
    with pytest.raises(ConflictError, match=r"gen/out\.txt"):
        ov.apply_to_real(journal_dir=journal_of(ov))


# ----------------------------------------------------------------------------- rollback


def _fail_on_call(real: Callable[..., Any], n: int, exc: OSError) -> Callable[..., Any]:
    calls = 0

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == n:
            raise exc
        return real(*args, **kwargs)

    return wrapper


# os.replace calls: 1 intent journal, 2 commit journal, 3.. one per file renamed into place.
@pytest.mark.parametrize("nth", [1, 2, 3, 4, 5, 6])
def test_failure_part_way_through_renames_rolls_back(
    root: Path, ovdir: Path, monkeypatch: pytest.MonkeyPatch, nth: int
) -> None:
    ov = _speculate(root, ovdir)
    before = snapshot(root)
    monkeypatch.setattr(os, "replace", _fail_on_call(os.replace, nth, OSError(errno.EIO, "EIO")))
    with pytest.raises(ApplyError, match="input/output error") as info:
        ov.apply_to_real(journal_dir=journal_of(ov))
    monkeypatch.undo()
    assert info.value.rolled_back
    assert info.value.paths == list(EXPECTED)
    assert snapshot(root) == before
    assert strays(root) == []
    # Nothing was lost: the overlay can be applied once the problem is gone.
    ov.apply_to_real(journal_dir=journal_of(ov))
    for rel, text in EXPECTED.items():
        assert (root / rel).read_text() == text


def test_disk_full_while_staging_rolls_back(
    root: Path, ovdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ov = _speculate(root, ovdir)
    before = snapshot(root)
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    kernel_fs = overlay.kernel.fs
    monkeypatch.setattr(kernel_fs, "copy_fd", _fail_on_call(kernel_fs.copy_fd, 3, full))
    with pytest.raises(ApplyError) as info:
        ov.apply_to_real(journal_dir=journal_of(ov))
    message = str(info.value)
    assert "disk full" in message
    assert "src/new.py" in message  # the file being staged
    assert all(rel in message for rel in EXPECTED)
    assert info.value.cause is full
    assert snapshot(root) == before
    assert strays(root) == []


def test_failure_making_a_backup_rolls_back(
    root: Path, ovdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ov = _speculate(root, ovdir)
    before = snapshot(root)
    # The second backup link fails with an error that the rename fallback also meets.
    calls = 0
    real_link = os.link

    def link(src: Any, dst: Any, **kw: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise FileNotFoundError(errno.ENOENT, "gone", src)
        real_link(src, dst, **kw)

    monkeypatch.setattr(os, "link", link)
    with pytest.raises(ApplyError, match=r"README\.md"):
        ov.apply_to_real(journal_dir=journal_of(ov))
    assert snapshot(root) == before
    assert strays(root) == []


def test_without_hard_links_backups_are_renames(
    root: Path, ovdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(*_args: Any, **_kw: Any) -> None:
        raise OSError(errno.EPERM, "hard links not supported")

    monkeypatch.setattr(os, "link", no_links)
    ov = _speculate(root, ovdir)
    before = snapshot(root)
    # Fail the 2nd rename into place: the 1st file was moved aside and replaced already.
    monkeypatch.setattr(os, "replace", _fail_on_call(os.replace, 6, OSError(errno.EIO, "EIO")))
    with pytest.raises(ApplyError):
        ov.apply_to_real(journal_dir=journal_of(ov))
    monkeypatch.undo()
    assert snapshot(root) == before
    assert strays(root) == []
    monkeypatch.setattr(os, "link", no_links)
    ov.apply_to_real(journal_dir=journal_of(ov))
    assert (root / "README.md").read_text() == EXPECTED["README.md"]
    assert strays(root) == []


# os.mkdir calls: 1 docs, 2 docs/guide (the journal directory is the caller's, made before).
@pytest.mark.parametrize("nth", [1, 2])
def test_failure_creating_a_directory_rolls_back(
    root: Path, ovdir: Path, monkeypatch: pytest.MonkeyPatch, nth: int
) -> None:
    ov = _speculate(root, ovdir)
    before = snapshot(root)
    journals = journal_of(ov)
    denied = PermissionError(errno.EACCES, "no")
    monkeypatch.setattr(os, "mkdir", _fail_on_call(os.mkdir, nth, denied))
    with pytest.raises(ApplyError, match="permission denied"):
        ov.apply_to_real(journal_dir=journals)
    monkeypatch.undo()
    assert snapshot(root) == before
    assert strays(root) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_target_dir_rolls_back(root: Path, ovdir: Path) -> None:
    ov = _speculate(root, ovdir)
    before = snapshot(root)
    (root / "src").chmod(0o555)
    try:
        with pytest.raises(ApplyError, match="permission denied"):
            ov.apply_to_real(journal_dir=journal_of(ov))
    finally:
        (root / "src").chmod(0o755)
    assert snapshot(root) == before
    assert strays(root) == []


def test_existing_specrun_dir_is_kept(root: Path, ovdir: Path) -> None:
    (root / ".specrun").mkdir()
    (root / ".specrun" / "settings.json").write_text("{}")
    ov = _speculate(root, ovdir)
    ov.apply_to_real(journal_dir=journal_of(ov))
    assert sorted(p.name for p in (root / ".specrun").iterdir()) == ["settings.json"]


def test_long_file_names(root: Path, ovdir: Path) -> None:
    name = "n" * 250
    (root / name).write_text("old")
    ov = Overlay(root, ovdir)
    ov.redirect_write(name).write_text("new")
    ov.redirect_write("é" * 120).write_text("new too")  # 240 bytes
    ov.apply_to_real(journal_dir=journal_of(ov))
    assert (root / name).read_text() == "new"
    assert (root / ("é" * 120)).read_text() == "new too"
    assert strays(root) == []


def test_large_file(root: Path, ovdir: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    (root / "blob.bin").write_bytes(b"x" * 10)
    ov = Overlay(root, ovdir)
    ov.redirect_write("blob.bin").write_bytes(data)
    ov.apply_to_real(journal_dir=journal_of(ov))
    assert (root / "blob.bin").read_bytes() == data


def test_concurrent_applies_are_serialized(root: Path, tmp_path: Path) -> None:
    overlays = []
    for i in range(4):
        ov = Overlay(root, tmp_path / "spec" / str(os.getpid()) / f"s{i}")
        ov.redirect_write("src/app.py").write_text(f"version {i}\n")
        ov.redirect_write(f"only_{i}.txt").write_text(f"{i}\n")
        overlays.append(ov)
    outcomes: list[str] = []

    def run(ov: Overlay) -> None:
        try:
            ov.apply_to_real(journal_dir=journal_of(ov))
            outcomes.append("applied")
        except ConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=run, args=(ov,)) for ov in overlays]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["applied", "conflict", "conflict", "conflict"]
    winner = int((root / "src" / "app.py").read_text().split()[1])
    assert [p.name for p in root.glob("only_*.txt")] == [f"only_{winner}.txt"]
    assert strays(root) == []
