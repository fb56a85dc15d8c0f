"""The memory store: parsing topic files, the MEMORY.md index, list/show/add."""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from coordinator.memory.store import (
    INDEX_MAX_CHARS,
    INDEX_MAX_LINES,
    MemoryNotFound,
    MemoryStore,
    parse_memory_file,
    read_index,
)


def topic(
    name: str = "Deploy",
    description: str = "How we deploy",
    type_: str = "project",
    body: str = "Run make deploy.",
) -> str:
    return f"---\nname: {name}\ndescription: {description}\ntype: {type_}\n---\n\n{body}\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".specrun" / "memory").mkdir(parents=True)
    return root


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def mem(project: Path) -> Path:
    return project / ".specrun" / "memory"


def store(project: Path, home: Path, **kw: object) -> MemoryStore:
    return MemoryStore(project, home=home, **kw)  # type: ignore[arg-type]


def test_valid_topic_file_parses(project: Path, home: Path) -> None:
    f = mem(project) / "deploy.md"
    f.write_text(topic(body="Line one.\n\nLine two."))
    [doc] = store(project, home).scan()
    assert doc.path == str(f.resolve()) and os.path.isabs(doc.path)
    assert (doc.name, doc.description, doc.type) == ("Deploy", "How we deploy", "project")
    assert doc.body == "Line one.\n\nLine two."
    assert doc.mtime == pytest.approx(f.stat().st_mtime)
    assert doc.scope == "project" and doc.relative_path == "deploy.md"


def test_scan_is_recursive_skips_index_and_hidden_dirs(project: Path, home: Path) -> None:
    (mem(project) / "a" / "b").mkdir(parents=True)
    (mem(project) / "a" / "b" / "deep.md").write_text(topic(name="Deep"))
    (mem(project) / ".git").mkdir()
    (mem(project) / ".git" / "hidden.md").write_text(topic(name="Hidden"))
    (mem(project) / "MEMORY.md").write_text(topic(name="Index itself"))
    (mem(project) / "notes.txt").write_text(topic(name="Not markdown"))
    names = [d.name for d in store(project, home).scan()]
    assert names == ["Deep"]


def test_user_and_project_roots_newest_first(project: Path, home: Path) -> None:
    user_root = home / ".specrun" / "memories"
    user_root.mkdir(parents=True)
    (user_root / "style.md").write_text(topic(name="Style", type_="user"))
    (mem(project) / "old.md").write_text(topic(name="Old"))
    os.utime(mem(project) / "old.md", (1_000_000, 1_000_000))
    docs = store(project, home).scan()
    assert [(d.name, d.scope) for d in docs] == [("Style", "user"), ("Old", "project")]
    assert [d.name for d in store(project, home).list_memories("project")] == ["Old"]
    assert [d.name for d in store(project, home, include_user=False).scan()] == ["Old"]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("just text, no front matter\n", "no front matter"),
        ("---\nname: [unclosed\ndescription: x\ntype: user\n---\nbody", "bad YAML"),
        ("---\ndescription: d\ntype: user\n---\nbody", "has no 'name'"),
        ("---\nname: n\ntype: user\n---\nbody", "has no 'description'"),
        ("---\nname: n\ndescription: d\n---\nbody", "has no 'type'"),
        ("---\nname: n\ndescription: d\ntype: diary\n---\nbody", "type 'diary'"),
        ("---\nname: 42\ndescription: d\ntype: user\n---\nbody", "'name' is not"),
        ("---\nname: ''\ndescription: d\ntype: user\n---\nbody", "'name' is not"),
        ("---\n- a\n- b\n---\nbody", "empty or not a mapping"),
        ("---\n---\nbody", "empty or not a mapping"),
        ("+++\nname = 'toml'\n+++\nbody", "no front matter"),
    ],
)
def test_invalid_front_matter_is_skipped_with_reason(
    project: Path, home: Path, caplog: pytest.LogCaptureFixture, content: str, why: str
) -> None:
    (mem(project) / "bad.md").write_text(content)
    (mem(project) / "good.md").write_text(topic(name="Good"))
    with caplog.at_level(logging.DEBUG, logger="coordinator.memory.store"):
        docs = store(project, home).scan()
    assert [d.name for d in docs] == ["Good"]
    assert any("bad.md" in r.getMessage() and why in r.getMessage() for r in caplog.records)
    skipped: list[tuple[Path, str]] = []
    store(project, home).scan(skipped=skipped)  # what `memory list` shows a person
    [(path, reason)] = skipped
    assert path.name == "bad.md" and why in reason


def test_binary_non_utf8_directory_and_huge_files_are_skipped(
    project: Path, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (mem(project) / "bin.md").write_bytes(b"---\nname: x\x00\n---\n")
    (mem(project) / "latin1.md").write_bytes(topic().encode("utf-8") + b"\xff\xfe caf\xe9")
    (mem(project) / "dir.md").mkdir()
    (mem(project) / "huge.md").write_text(topic(body="x" * (1 << 20)))
    with caplog.at_level(logging.DEBUG, logger="coordinator.memory.store"):
        assert store(project, home).scan() == []
    text = caplog.text
    assert "binary" in text and "not UTF-8" in text and "too large" in text


def test_bom_crlf_and_case_of_type_are_tolerated(project: Path, home: Path) -> None:
    raw = "\ufeff---\r\nname: Win\r\ndescription: crlf file\r\ntype: Feedback\r\n---\r\nbody\r\n"
    (mem(project) / "win.md").write_bytes(raw.encode())
    [doc] = store(project, home).scan()
    assert (doc.name, doc.type) == ("Win", "feedback")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_skipped(project: Path, home: Path) -> None:
    f = mem(project) / "secret.md"
    f.write_text(topic())
    f.chmod(0)
    try:
        assert store(project, home).scan() == []
    finally:
        f.chmod(0o644)


def test_read_error_is_skipped(
    project: Path, home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (mem(project) / "eio.md").write_text(topic(name="Broken disk"))
    (mem(project) / "fine.md").write_text(topic(name="Fine"))
    real = os.open

    def flaky(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path).endswith("eio.md"):
            raise PermissionError(13, "Permission denied")
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", flaky)
    with caplog.at_level(logging.DEBUG, logger="coordinator.memory.store"):
        assert [d.name for d in store(project, home).scan()] == ["Fine"]
    assert "unreadable" in caplog.text


def test_symlink_loop_and_dangling_link_do_not_crash(project: Path, home: Path) -> None:
    (mem(project) / "loop").symlink_to(mem(project), target_is_directory=True)
    (mem(project) / "dangling.md").symlink_to(mem(project) / "nowhere.md")
    (mem(project) / "ok.md").write_text(topic(name="Ok"))
    assert [d.name for d in store(project, home).scan()] == ["Ok"]


def test_missing_roots_mean_no_memories(tmp_path: Path) -> None:
    assert MemoryStore(tmp_path / "nope", home=tmp_path / "nohome").scan() == []


def test_memory_dir_override_reads_a_qwen_directory(project: Path, home: Path) -> None:
    qwen = project / ".qwen" / "memory"
    qwen.mkdir(parents=True)
    (qwen / "q.md").write_text(topic(name="From qwen"))
    s = store(project, home, memory_dir=".qwen/memory")
    assert s.project_dir == qwen.resolve()
    assert [d.name for d in s.scan()] == ["From qwen"]


# --------------------------------------------------------------------------- index


def test_index_short_is_kept_whole(project: Path) -> None:
    (mem(project) / "MEMORY.md").write_text("- [Deploy](deploy.md) — how\n")
    idx = read_index(mem(project))
    assert idx is not None and not idx.truncated
    assert idx.text == "- [Deploy](deploy.md) — how"
    assert read_index(project / "missing") is None


def test_index_cut_to_200_lines_with_warning(project: Path) -> None:
    lines = [f"- line {i}" for i in range(250)]
    (mem(project) / "MEMORY.md").write_text("\n".join(lines) + "\n")
    idx = read_index(mem(project))
    assert idx is not None and idx.truncated
    body, warning = idx.text.split("\n\n> WARNING:")
    assert body.splitlines() == lines[:INDEX_MAX_LINES]
    assert "250 lines" in warning


def test_index_cut_to_25000_chars_at_a_line_boundary(project: Path) -> None:
    lines = ["x" * 999 for _ in range(40)]  # 40,000 chars in 40 lines
    (mem(project) / "MEMORY.md").write_text("\n".join(lines))
    idx = read_index(mem(project))
    assert idx is not None and idx.truncated
    body = idx.text.split("\n\n> WARNING:")[0]
    assert len(body) <= INDEX_MAX_CHARS
    kept = body.splitlines()
    assert len(kept) == (INDEX_MAX_CHARS + 1) // 1000  # as many whole lines as fit
    assert all(line == "x" * 999 for line in kept)


def test_index_prompt_has_both_roots(project: Path, home: Path) -> None:
    (mem(project) / "MEMORY.md").write_text("- project entry\n")
    (home / ".specrun" / "memories").mkdir(parents=True)
    (home / ".specrun" / "memories" / "MEMORY.md").write_text("- user entry\n")
    prompt = store(project, home).index_prompt()
    assert prompt.index("user entry") < prompt.index("project entry")


# --------------------------------------------------------------------------- show / add


def test_add_memory_writes_topic_and_index_line(project: Path, home: Path) -> None:
    s = store(project, home)
    doc = s.add_memory("Release steps", "How to cut a release: tag", "project", "1. tag\n2. push")
    assert Path(doc.path) == mem(project) / "release-steps.md"
    assert (doc.name, doc.description, doc.type, doc.body) == (
        "Release steps",
        "How to cut a release: tag",
        "project",
        "1. tag\n2. push",
    )
    index = (mem(project) / "MEMORY.md").read_text()
    assert index == "- [Release steps](release-steps.md) — How to cut a release: tag\n"
    assert not [p for p in mem(project).iterdir() if p.name.startswith(".tmp-")]
    assert s.show_memory("release steps") == doc


def test_add_memory_user_scope_goes_to_home(project: Path, home: Path) -> None:
    doc = store(project, home).add_memory("Tabs", "Prefers tabs", "user", "tabs", scope="user")
    assert Path(doc.path).parent == home / ".specrun" / "memories"
    assert doc.scope == "user"


def test_add_memory_never_overwrites(project: Path, home: Path) -> None:
    s = store(project, home)
    s.add_memory("Deploy", "first", "project", "a")
    with pytest.raises(ValueError, match="already exists"):
        s.add_memory("deploy", "second", "project", "b")
    other = s.add_memory("Deploy!", "same slug, other name", "project", "c")
    assert Path(other.path).name == "deploy-2.md"
    assert (mem(project) / "deploy.md").read_text().endswith("a\n")


def test_add_memory_validates(project: Path, home: Path) -> None:
    s = store(project, home)
    with pytest.raises(ValueError, match="type"):
        s.add_memory("x", "d", "diary", "b")
    with pytest.raises(ValueError, match="scope"):
        s.add_memory("x", "d", "user", "b", scope="global")
    with pytest.raises(ValueError, match="name"):
        s.add_memory("  ", "d", "user", "b")
    with pytest.raises(ValueError, match="description"):
        s.add_memory("x", "\n", "user", "b")


def test_add_memory_yaml_special_characters_round_trip(project: Path, home: Path) -> None:
    s = store(project, home)
    doc = s.add_memory("key: value # not a comment", "quotes ' \" and: colons", "reference", "b")
    assert s.show_memory(doc.path).name == "key: value # not a comment"
    assert doc.description == "quotes ' \" and: colons"
    cjk = s.add_memory("部署流程", "如何部署", "project", "运行 make")
    assert Path(cjk.path).name == "部署流程.md"


def test_concurrent_adds_keep_every_index_line(project: Path, home: Path) -> None:
    s = store(project, home)
    errors: list[BaseException] = []

    def add(i: int) -> None:
        try:
            s.add_memory(f"Note {i}", f"note number {i}", "project", "b")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    lines = (mem(project) / "MEMORY.md").read_text().splitlines()
    assert sorted(lines) == sorted(
        f"- [Note {i}](note-{i}.md) — note number {i}" for i in range(12)
    )


def test_show_memory_by_path_stem_and_errors(project: Path, home: Path) -> None:
    (mem(project) / "sub").mkdir()
    (mem(project) / "sub" / "db.md").write_text(topic(name="Database"))
    (mem(project) / "x.md").write_text(topic(name="Twin"))
    (mem(project) / "y.md").write_text(topic(name="Twin"))
    s = store(project, home)
    by_name = s.show_memory("database")
    assert s.show_memory(by_name.path) == by_name
    assert s.show_memory("sub/db.md") == by_name  # relative to the memory root
    assert s.show_memory(".specrun/memory/sub/db.md") == by_name  # relative to the project
    assert s.show_memory("db") == by_name  # file stem
    with pytest.raises(MemoryNotFound, match="several"):
        s.show_memory("twin")
    with pytest.raises(MemoryNotFound):
        s.show_memory("nothing like it")


def test_parse_memory_file_on_missing_path_returns_none(tmp_path: Path) -> None:
    assert parse_memory_file(tmp_path / "gone.md") is None


def test_links_in_the_memory_directory_are_never_followed(
    project: Path, home: Path, tmp_path: Path
) -> None:
    """A repository's ``MEMORY.md -> /proc/self/environ`` put the service's environment in
    the system prompt: neither the index nor a topic file is read through a link, and the
    topic is named as skipped; a memory directory reached through a link is not read."""
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-ENV=1\n" + topic(name="Leak"))
    (mem(project) / "MEMORY.md").symlink_to(secret)
    (mem(project) / "leak.md").symlink_to(secret)
    (mem(project) / "fine.md").write_text(topic(name="Fine"))
    skipped: list[tuple[Path, str]] = []
    assert [d.name for d in store(project, home).scan(skipped=skipped)] == ["Fine"]
    assert [(p.name, why) for p, why in skipped] == [
        ("leak.md", "not a regular file (a symbolic link)")]
    assert "SECRET" not in store(project, home).index_prompt()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "MEMORY.md").write_text("SECRET index\n")
    (elsewhere / "other.md").write_text(topic(name="Other"))
    shutil.rmtree(mem(project))
    mem(project).symlink_to(elsewhere)
    skipped = []
    assert store(project, home).scan(skipped=skipped) == []
    assert skipped and skipped[0][0] == mem(project)
    assert "SECRET" not in store(project, home).index_prompt()
