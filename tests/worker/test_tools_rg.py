"""ripgrep as the file finder of grep_search and glob: it is really used, it gives the walk's
answers (overlay shadowing, symlinks, size cap, gitignore), and it steps aside when it would
read a pattern or the ignore rules differently."""

from __future__ import annotations

import dataclasses
import os
import random
import subprocess
from pathlib import Path

import psutil
import pytest

from overlay import Overlay
from tests.support import wait_until
from tests.worker.tool_calls import body, make_tree, ok
from worker.tools import DirectAccess, OverlayAccess, ToolContext
from worker.tools.rg import find_files, name_glob, rg_binary, rust_pattern, start_search
from worker.tools.tree import TreeView


@pytest.fixture(autouse=True)
def _rg_allowed(tmp_path: Path) -> None:
    assert rg_binary(tmp_path) is not None, "the ripgrep dependency is not installed"


def _both(ctx: ToolContext, tool: str, **args: str) -> str:
    """The tool's output with rg and with the walk; fails when they differ."""
    fast = ok(ctx, tool, **args)
    slow = ok(dataclasses.replace(ctx, use_ripgrep=False), tool, **args)
    assert fast == slow
    return fast


def _found(access: DirectAccess | OverlayAccess, path: str = ".", **kw: object) -> list[str] | None:
    view = TreeView(access)
    start = view.node(access.logical_path(path))
    assert start is not None
    got = find_files(view, start, **kw)  # type: ignore[arg-type]
    return None if got is None else [hit.rel for hit in got]


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    make_tree(
        root,
        {
            ".git/HEAD": "ref: refs/heads/main\n",
            ".gitignore": "__pycache__/\n*.log\n",
            "a.py": "needle = 1\n",
            "b/c.py": "x = 'needle'\n",
            "b/__pycache__/c.pyc": "needle\n",
            "b/z.txt": "nothing\n",
            "debug.log": "needle\n",
            "bin.dat": b"needle\0needle\n",
            "big.txt": "needle\n" + "x" * 200 + "\n",
        },
    )
    return root


def test_rg_is_used_and_lists_in_walk_order(proj: Path) -> None:
    access = DirectAccess(proj)
    assert _found(access) == [".gitignore", "a.py", "b/c.py", "b/z.txt", "big.txt", "bin.dat"]
    assert _found(access, pattern="needle", max_filesize=100) == ["a.py", "b/c.py", "big.txt"]
    assert _found(access, name="*.py") == ["a.py", "b/c.py"]
    assert _found(access, max_depth=1) == [".gitignore", "a.py", "big.txt", "bin.dat"]
    ctx = ToolContext(access=access, search_max_file_bytes=100)
    out = _both(ctx, "grep_search", pattern="needle")
    assert body(out) == ["a.py:1:needle = 1", "b/c.py:1:x = 'needle'"]
    assert out.endswith("[Not searched, over 9.53674e-05 MiB: big.txt]")


def test_overlay_files_shadow_the_real_ones(proj: Path, tmp_path: Path) -> None:
    overlay = Overlay(proj, tmp_path / "ovl" / "1" / "s")
    ctx = ToolContext(access=OverlayAccess(overlay))
    ok(ctx, "edit", file_path="a.py", old_string="needle = 1", new_string="changed = 1")
    ok(ctx, "edit", file_path="b/z.txt", old_string="nothing", new_string="needle now")
    ok(ctx, "write_file", file_path="n/new.py", content="needle new\n")
    ok(ctx, "write_file", file_path="n/__pycache__/x.pyc", content="needle cache\n")
    try:
        # every overlay file is a candidate (grep_search reads it), a shadowed one only once
        assert _found(ctx.access, pattern="needle", max_filesize=100) == [
            "a.py",
            "b/c.py",
            "b/z.txt",
            "big.txt",
            "n/new.py",
        ]
        assert body(_both(ctx, "grep_search", pattern="needle")) == [
            "b/c.py:1:x = 'needle'",
            "b/z.txt:1:needle now",
            "big.txt:1:needle",
            "n/new.py:1:needle new",
        ]
        assert body(_both(ctx, "grep_search", pattern="changed")) == ["a.py:1:changed = 1"]
        assert _both(ctx, "grep_search", pattern="needle", path="n").count("needle") == 2
        assert sorted(body(_both(ctx, "glob", pattern="**/*.py"))) == [
            "a.py",
            "b/c.py",
            "n/new.py",
        ]
        # a .gitignore written in the overlay changes the rules: rg steps aside
        ok(ctx, "write_file", file_path=".gitignore", content="b/\n")
        assert _found(ctx.access) is None
        assert body(_both(ctx, "grep_search", pattern="needle")) == [
            "big.txt:1:needle",
            "debug.log:1:needle",
            "n/__pycache__/x.pyc:1:needle cache",
            "n/new.py:1:needle new",
        ]
    finally:
        overlay.cleanup()


def test_symlinked_files_are_searched_and_symlinked_dirs_are_not(proj: Path) -> None:
    os.symlink("a.py", proj / "link.py")
    os.symlink("b", proj / "linkdir")
    os.symlink("missing", proj / "dangling.py")
    ctx = ToolContext(access=DirectAccess(proj))
    assert body(_both(ctx, "grep_search", pattern="needle =")) == [
        "a.py:1:needle = 1",
        "link.py:1:needle = 1",
    ]
    assert sorted(body(_both(ctx, "glob", pattern="**/*.py"))) == [
        "a.py",
        "b/c.py",
        "dangling.py",
        "link.py",
    ]


@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")
@pytest.mark.parametrize(
    ("pattern", "lines"),
    [
        (r"\<b\>", ["t.txt:2:<b>"]),  # literal brackets to Python, word boundaries to rg
        (r"[[]x", ["t.txt:3:[x"]),  # a nested class to rg
        (r"(?<=a)b", ["t.txt:1:ab"]),  # look-behind: rg cannot compile it
        (r"a{,1}b$", ["t.txt:1:ab"]),
        (r"b\Z", ["t.txt:1:ab"]),
        (r"^ab$", ["t.txt:1:ab"]),  # CRLF line end
    ],
)
def test_patterns_rg_reads_differently_fall_back(
    tmp_path: Path, pattern: str, lines: list[str]
) -> None:
    make_tree(tmp_path / "p", {"t.txt": b"ab\r\n<b>\n[x\n"})
    ctx = ToolContext(access=DirectAccess(tmp_path / "p"))
    assert body(_both(ctx, "grep_search", pattern=pattern)) == lines


def test_rust_pattern_and_name_glob() -> None:
    assert rust_pattern(r"\<a\>[\]]") == r"<a>[\]]"
    assert rust_pattern(r"[^]a]x--y") == r"[^]a]x--y"
    assert rust_pattern("[a--b]") is None
    assert rust_pattern("[a&&b]") is None
    assert name_glob("**/*.py") == "*.py"
    assert name_glob("src/*.{ts,tsx}") == "*.{ts,tsx}"
    assert name_glob("{a,b/c}/*.py") is None
    assert name_glob("**") is None
    assert name_glob("*") is None
    assert name_glob("[ab].py") is None
    # rg's "?" is one byte: a looser "*" lets glob_regex decide on names like "é.py"
    assert name_glob("?.py") == "*.py"
    assert name_glob("src/a??b.md") == "a*b.md"
    assert name_glob("?") is None


def test_a_question_mark_matches_one_non_ascii_character_with_rg_too(tmp_path: Path) -> None:
    make_tree(tmp_path / "p", {"é.md": "needle\n", "ab.md": "needle\n", "x.md": "needle\n"})
    ctx = ToolContext(access=DirectAccess(tmp_path / "p"))
    assert sorted(body(_both(ctx, "glob", pattern="?.md"))) == ["x.md", "é.md"]
    assert body(_both(ctx, "grep_search", pattern="needle", include="?.md")) == [
        "x.md:1:needle",
        "é.md:1:needle",
    ]


def test_a_search_lists_rg_files_first_and_the_rest_after(proj: Path, tmp_path: Path) -> None:
    os.symlink("a.py", proj / "link.py")
    os.symlink("b/c.py", proj / "b" / "deeper.py")
    overlay = Overlay(proj, tmp_path / "ovl" / "1" / "s")
    access = OverlayAccess(overlay)
    ok(ToolContext(access=access), "write_file", file_path="a.py", content="written\n")
    ok(ToolContext(access=access), "write_file", file_path="new.py", content="new\n")
    try:
        view = TreeView(access)
        start = view.node(proj)
        assert start is not None
        search = start_search(view, start, name="*.py", max_depth=1)
        assert search is not None
        with search:
            # rg's own list (no symlinks; the overlay's a.py shadows the real one) ...
            assert search.listed() == []
            assert search.plain
            # ... then what the walk adds: the top-level symlink and the overlay's files,
            # not b/deeper.py (find goes no deeper than rg)
            extra = sorted((hit.rel, hit.physical) for hit in search.extra() or [])
        assert extra == [
            ("a.py", str(overlay.resolve_read(str(proj / "a.py")))),
            ("link.py", str(proj / "link.py")),
            ("new.py", str(overlay.resolve_read(str(proj / "new.py")))),
        ]
        glob_out = _both(ToolContext(access=access), "glob", pattern="*.py")
        assert sorted(body(glob_out)) == ["a.py", "link.py", "new.py"]
        assert sorted(body(_both(ToolContext(access=access), "glob", pattern="**/*.py"))) == [
            "a.py",
            "b/c.py",
            "b/deeper.py",
            "link.py",
            "new.py",
        ]
    finally:
        overlay.cleanup()


def test_a_search_given_up_half_way_leaves_no_process(tmp_path: Path) -> None:
    make_tree(tmp_path / "p", {f"d{i // 100}/f{i}.txt": "x\n" for i in range(4000)})
    view = TreeView(DirectAccess(tmp_path / "p"))
    start = view.node(tmp_path / "p")
    assert start is not None
    others = {p.pid for p in psutil.Process().children()}
    search = start_search(view, start)
    assert search is not None
    with search:
        assert next(search.batches())  # rg lists tens of KiB, a block at a time
    # rg and find killed and reaped
    assert {p.pid for p in psutil.Process().children()} == others
    again = start_search(view, start)
    assert again is not None
    with again:
        assert len(again.listed() or []) == 4000
        assert again.extra() == []


def test_rg_lists_a_big_tree_without_waiting_for_its_reader(tmp_path: Path) -> None:
    """rg's list goes through a pipe big enough for it: rg ends while nobody reads yet (the
    reader stats each block as it comes; with a 64 KiB pipe rg would stall on the reader)."""
    name = "a_module_with_a_rather_long_name_like_real_ones_have_"
    files = {f"pkg{i // 100}/{name}{i}.py": "" for i in range(3000)}  # about 250 KB listed
    make_tree(tmp_path / "p", files)
    view = TreeView(DirectAccess(tmp_path / "p"))
    start = view.node(tmp_path / "p")
    assert start is not None
    search = start_search(view, start, name="*.py")
    assert search is not None
    with search:
        def rg_ended() -> bool:
            children = psutil.Process().children()
            rg = [c for c in children if c.name() == "rg"]
            return bool(rg) and all(c.status() == psutil.STATUS_ZOMBIE for c in rg)

        assert wait_until(rg_ended, timeout=30), "rg waited for its reader"
        assert len(search.listed() or []) == 3000


def test_glob_quotes_a_start_directory_with_a_newline(tmp_path: Path) -> None:
    make_tree(tmp_path / "p", {"odd\ndir/a.py": "x\n", "odd\ndir/b.py": "y\n"})
    ctx = ToolContext(access=DirectAccess(tmp_path / "p"))
    assert sorted(body(_both(ctx, "glob", pattern="odd\ndir/*.py"))) == [
        '"odd\\ndir/a.py"',
        '"odd\\ndir/b.py"',
    ]


def test_ignore_files_above_a_project_without_git(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    make_tree(outer, {".gitignore": "*.py\n", "proj/a.py": "needle\n"})
    access = DirectAccess(outer / "proj")
    assert _found(access) is None  # rg would apply outer/.gitignore, the walk does not
    assert body(_both(ToolContext(access=access), "grep_search", pattern="needle")) == [
        "a.py:1:needle"
    ]
    (outer / "proj" / ".git").mkdir()  # a repository: rg stops at its root
    assert _found(access) == ["a.py"]


def test_random_trees_agree(tmp_path: Path) -> None:
    rng = random.Random(15)
    root = tmp_path / "r"
    files: dict[str, str | bytes] = {".gitignore": "*.tmp\nskip/\n!keep.tmp\n"}
    dirs = ["a", "b", "skip", "c d", "é", "x.tmp", "m.py"]
    names = [*dirs, "keep.tmp", "n.txt"]
    # (not "keep.tmp" as a directory: pathspec lets "!keep.tmp" re-include files below an
    # excluded directory inside it, git and rg do not)
    for _ in range(150):
        depth = rng.randint(0, 3)
        rel = "/".join([*(rng.choice(dirs) for _ in range(depth)), rng.choice(names)])
        words = [rng.choice(["foo", "bar", "needle", "Needle", "x\r"]) for _ in range(4)]
        files[rel + rng.choice(["", ".py", ".md"])] = "\n".join(words) + "\n"
    for rel, content in files.items():
        path = root / rel
        if any(p.exists() and not p.is_dir() for p in path.parents):
            continue
        if path.is_dir():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, newline="")
    ctx = ToolContext(access=DirectAccess(root), search_max_matches=40)
    for pattern in ["needle", "(?i)needle", "^x$", "o+$", "zzz"]:
        _both(ctx, "grep_search", pattern=pattern)
        _both(ctx, "grep_search", pattern=pattern, include="*.py")
        _both(ctx, "grep_search", pattern=pattern, path="a", include="**/b*")
    for pattern in ["**/*.py", "*", "a/*", "**/keep.tmp", "**/*.{md,py}", "a/**/b"]:
        _both(ctx, "glob", pattern=pattern)


@pytest.mark.parametrize("include", ["*.py", "*.{md,py}", "{big,link}*", "*.{py}", "b*"])
def test_a_name_filter_keeps_the_symlinks_and_big_files_it_names(
    proj: Path, include: str
) -> None:
    """With an include, ``find`` looks only at names the include can match (the size test,
    a stat, only for those): the symlinks and big files the walk names must still come."""
    os.symlink("a.py", proj / "link.py")
    os.symlink("b/z.txt", proj / "link.md")
    os.symlink("a.py", proj / "other.txt")
    (proj / "big.py").write_text("needle = 2\n" * 40)
    (proj / "big.md").write_text("needle = 3\n" * 40)
    ctx = ToolContext(access=DirectAccess(proj), search_max_file_bytes=300)
    out = _both(ctx, "grep_search", pattern="needle", include=include)
    if include == "*.py":
        assert "link.py:1:needle = 1" in out and "big.py" in out and "big.md" not in out
    if include == "*.{md,py}":
        assert "big.md" in out and "big.py" in out and "other.txt" not in out
    _both(ctx, "glob", pattern=f"**/{include}")


def test_find_names_expand_braces_and_give_up_on_too_many() -> None:
    from worker.tools.rg import _find_names

    assert _find_names(None) == []
    assert _find_names("*.py") == ["(", "-name", "*.py", ")"]
    assert _find_names("*.{ts,tsx}") == ["(", "-name", "*.ts", "-o", "-name", "*.tsx", ")"]
    assert _find_names("{a,b}{c,d}").count("-name") == 4
    assert _find_names("{a,b,c,d}{e,f,g,h}{i,j,k}") == []  # 48 alternatives: no filter


def test_find_skips_the_directories_the_top_gitignore_names(proj: Path) -> None:
    from worker.tools.rg import _ignored_dir_names

    (proj / ".gitignore").write_text("__pycache__/\n*.log\nnode_modules\n/build/\n.venv/\n")
    assert _ignored_dir_names(proj) == ["__pycache__", "node_modules", ".venv"]
    (proj / "node_modules" / "m").mkdir(parents=True)
    (proj / "node_modules" / "m" / "big.js").write_text("x" * 1000)
    os.symlink("../../a.py", proj / "node_modules" / "m" / "link.py")
    (proj / "src").mkdir()
    (proj / "src" / "big.js").write_text("x" * 1000)
    ctx = ToolContext(access=DirectAccess(proj), search_max_file_bytes=300)
    out = _both(ctx, "grep_search", pattern="needle")
    assert "src/big.js" in out and "node_modules" not in out
    _both(ctx, "glob", pattern="**/*.py")
    (proj / ".gitignore").write_text("node_modules/\n!node_modules/keep/\n")
    assert _ignored_dir_names(proj) == []  # a negation: nothing pruned


def _find_links(root: Path, where: str, max_depth: int | None, name: str | None) -> set[str]:
    """What the ``find`` a search starts beside rg prints, for a listing (no size cap)."""
    from worker.tools.rg import _find_argv, _find_binary, _ignored_dir_names

    finder = _find_binary(root)
    assert finder is not None
    argv = _find_argv(finder, where, None, max_depth, name, _ignored_dir_names(root))
    out = subprocess.run(argv, cwd=root, capture_output=True, check=False).stdout
    return {os.path.normpath(root / os.fsdecode(raw)) for raw in out.split(b"\0") if raw}


def test_the_in_process_symlink_scan_finds_what_find_finds(tmp_path: Path) -> None:
    """A listing (glob) learns the symlinks rg skips from one ``os.scandir`` pass instead of
    ``find``: same links, same depth bound, same name filter, same pruned directories."""
    from worker.tools.rg import _ignored_dir_names, _name_regex, _scan_symlinks

    root = tmp_path / "p"
    make_tree(
        root,
        {
            ".gitignore": "node_modules/\n__pycache__\n",
            ".git/HEAD": "x\n",
            "a.py": "",
            "d/e/f/g.py": "",
            "node_modules/m/x.py": "",
            "d/__pycache__/c.pyc": "",
            "w/x.md": "",
        },
    )
    links = {
        "top.py": "a.py",
        "d/one.py": "../a.py",
        "d/e/two.py": "../../a.py",
        "d/e/f/three.pyc": "g.py",
        "d/e/f/deep.ts": "g.py",
        "d/dirlink": "e",
        "d/dirlink.py": "e",
        "dangling.py": "nowhere",
        ".hidden.py": "a.py",
        "node_modules/m/pruned.py": "x.py",
        "d/__pycache__/pruned.py": "c.pyc",
        ".git/inside.py": "HEAD",
        "w/.git": "x.md",  # a link named .git is not a directory: find prints it
        "w/new\nline.py": "x.md",
        "w/caf\u00e9.py": "x.md",
        "w/x.{py}": "x.md",
    }
    for rel, target in links.items():
        os.symlink(target, root / rel)
    os.symlink("x.md", os.fsencode(root / "w") + b"/bad\xff.py")
    pruned = _ignored_dir_names(root)
    assert pruned == ["node_modules", "__pycache__"]
    for where in [".", "./d", "./d/e", "./node_modules", "./w"]:
        for max_depth in [None, 1, 2]:
            for name in [None, "*.py", "*.{py,ts}", "*.{py}", "*", "t*", "caf\u00e9*"]:
                top = os.path.normpath(root / where)
                got = _scan_symlinks(top, where, max_depth, _name_regex(name), pruned)
                assert got is not None
                expected = _find_links(root, where, max_depth, name)
                assert {os.path.normpath(p) for p in got} == expected, (where, max_depth, name)
    assert _scan_symlinks(str(root / "gone"), "./gone", None, None, pruned) == []


def test_a_listing_runs_rg_alone(proj: Path) -> None:
    """glob's listing walks the tree once in another process (rg); the symlinks come from
    reading the directories in this one, not from a second walk by ``find``."""
    os.symlink("a.py", proj / "b" / "link.py")
    view = TreeView(DirectAccess(proj))
    start = view.node(proj)
    assert start is not None
    others = {p.pid for p in psutil.Process().children()}
    search = start_search(view, start, name="*.py")
    assert search is not None
    with search:
        started = [p.name() for p in psutil.Process().children() if p.pid not in others]
        assert started == ["rg"]
        assert sorted(search.listed() or []) == ["a.py", "b/c.py"]
        assert [hit.rel for hit in search.extra() or []] == ["b/link.py"]


def test_glob_quotes_a_name_that_is_not_utf8_as_the_walk_does(proj: Path) -> None:
    """rg's list of a name with a byte that is not UTF-8: quoted (its escape must not read
    as a backslash in a name), as the walk shows it; the negation keeps glob on rg."""
    (proj / ".gitignore").write_text("__pycache__/\n*.log\n!keep.log\n")
    (proj / "b" / "bad\udcff.py").write_bytes(b"x\n")
    out = _both(ToolContext(access=DirectAccess(proj)), "glob", pattern="**/*.py")
    assert '"b/bad\\xff.py"' in body(out)


def test_glob_lists_a_file_rg_listed_and_that_is_gone_before_its_stat(proj: Path) -> None:
    """rg's list is read whole, then the file goes: glob still lists it, as the walk lists a
    file gone between reading its directory and its ``stat``, with no time (last)."""
    from worker.tools.glob import _from_search
    from worker.tools.tree import glob_regex

    view = TreeView(DirectAccess(proj))
    start = view.node(proj)
    assert start is not None
    search = start_search(view, start, name="*.py")
    assert search is not None
    with search:
        assert sorted(search.listed() or []) == ["a.py", "b/c.py"]  # rg has ended
        (proj / "b" / "c.py").unlink()
        found = _from_search(search, glob_regex("**/*.py"), str(proj))
    assert found is not None
    assert sorted(found)[-1] == (0, "b/c.py") and len(found) == 2
