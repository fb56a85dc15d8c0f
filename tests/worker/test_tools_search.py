"""grep_search, glob and list_directory: gitignore, caps, odd names (main chat access)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.worker.tool_calls import body, err, make_tree, ok
from worker.tools import DirectAccess, ToolContext
from worker.tools.tree import glob_regex, split_glob

# Every test runs with ripgrep choosing the files and with the pure-Python walk.
pytestmark = pytest.mark.usefixtures("search_engine")


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "proj"
    root.mkdir()
    make_tree(
        root,
        {
            ".gitignore": "build/\n*.log\n!keep.log\n/top_only.txt\n",
            ".git/config": "needle in git\n",
            ".git/info/exclude": "excluded.txt\n",
            "excluded.txt": "needle excluded\n",
            "src/app.py": "import os\n\ndef needle():\n    return 'needle'\n",
            "src/util.py": "# no match here\n",
            "src/.gitignore": "generated.py\n",
            "src/generated.py": "needle generated\n",
            "src/deep/more.ts": "const needle = 1;\n",
            "src/deep/top_only.txt": "needle kept (anchored rule is for the root only)\n",
            "top_only.txt": "needle top\n",
            "build/out.py": "needle built\n",
            "debug.log": "needle log\n",
            "keep.log": "needle kept log\n",
            "image.png": b"\x89PNG\0\0needle\0",
            "README.md": "Needle in caps\n",
        },
    )
    return ToolContext(access=DirectAccess(root))


# --- grep_search ------------------------------------------------------------------------------


def test_grep_respects_gitignore_git_and_binary(ctx: ToolContext) -> None:
    out = ok(ctx, "grep_search", pattern="needle")
    assert out.splitlines()[0] == "Found 5 matches for 'needle' in . in 4 files:"
    assert body(out) == [
        "keep.log:1:needle kept log",
        "src/app.py:3:def needle():",
        "src/app.py:4:    return 'needle'",
        "src/deep/more.ts:1:const needle = 1;",
        "src/deep/top_only.txt:1:needle kept (anchored rule is for the root only)",
    ]


def test_grep_path_include_and_regex(ctx: ToolContext) -> None:
    out = ok(ctx, "grep_search", pattern=r"def \w+\(", path="src")
    assert body(out) == ["src/app.py:3:def needle():"]
    assert "in src in 1 file" in out.splitlines()[0]
    out = ok(ctx, "grep_search", pattern="needle", include="*.ts")
    assert body(out) == ["src/deep/more.ts:1:const needle = 1;"]
    out = ok(ctx, "grep_search", pattern="needle", include="*.{py,ts}")
    assert [line.split(":")[0] for line in body(out)] == [
        "src/app.py",
        "src/app.py",
        "src/deep/more.ts",
    ]
    out = ok(ctx, "grep_search", pattern="needle", include="src/deep/*")
    assert len(body(out)) == 2
    out = ok(ctx, "grep_search", pattern="(?i)needle", path="README.md")
    assert body(out) == ["README.md:1:Needle in caps"]
    assert ok(ctx, "grep_search", pattern="zzz") == "No matches for 'zzz' in ."
    assert ok(ctx, "grep_search", pattern="zzz", include="*.py") == (
        "No matches for 'zzz' in . (include '*.py')"
    )


def test_grep_explicit_ignored_dir_is_searched(ctx: ToolContext) -> None:
    out = ok(ctx, "grep_search", pattern="needle", path="build")
    assert body(out) == ["build/out.py:1:needle built"]
    out = ok(ctx, "grep_search", pattern="needle", path="debug.log")
    assert body(out) == ["debug.log:1:needle log"]


def test_grep_errors(ctx: ToolContext) -> None:
    assert err(ctx, "grep_search", pattern="(unclosed").startswith(
        "Invalid regular expression '(unclosed'"
    )
    assert err(ctx, "grep_search", pattern="x", path="nowhere") == "Path not found: nowhere"
    assert err(ctx, "grep_search") == "Invalid arguments for grep_search: 'pattern' is required"


def test_grep_caps(ctx: ToolContext) -> None:
    root = ctx.access.root
    (root / "many.txt").write_text("hit\n" * 50 + "hit " + "w" * 900 + "\n")
    small = ToolContext(access=ctx.access, search_max_matches=10)
    out = ok(small, "grep_search", pattern="hit", path="many.txt")
    assert len(body(out)) == 10
    assert out.splitlines()[0].startswith("Showing the first 10 matches")
    assert "narrow the pattern" in out.splitlines()[0]
    out = ok(ctx, "grep_search", pattern="w{10}", path="many.txt")
    (line,) = body(out)
    assert line == "many.txt:51:hit " + "w" * 496 + " [line cut]"
    tight = ToolContext(access=ctx.access, output_cap=300)
    out = ok(tight, "grep_search", pattern="hit", path="many.txt")
    assert len(out) < 400
    assert out.endswith("characters.]")
    assert "[Output truncated: showing 300 of" in out


def test_grep_skips_files_over_the_size_cap(ctx: ToolContext) -> None:
    capped = ToolContext(access=ctx.access, search_max_file_bytes=20)
    out = ok(capped, "grep_search", pattern="needle", path="src")
    assert body(out) == ["src/deep/more.ts:1:const needle = 1;"]
    note = out.splitlines()[-1]
    assert note.startswith("[Not searched, over") and "src/" in note  # says what it skipped


def test_grep_line_numbers_agree_with_read_file(ctx: ToolContext) -> None:
    root = ctx.access.root
    # form feed and U+2028 are line breaks for str.splitlines but not for the tools
    (root / "odd.txt").write_text("a\x0cb\r\nc\u2028d\nfind me\n", newline="")
    out = ok(ctx, "grep_search", pattern="find me", path="odd.txt")
    (line,) = body(out)
    number = int(line.split(":")[1])
    assert number == 3
    read = ok(ctx, "read_file", file_path="odd.txt", offset=number, limit=1)
    assert read.startswith(f"{number:>6}\tfind me")


# --- glob -------------------------------------------------------------------------------------


def test_glob_gitignore_and_patterns(ctx: ToolContext) -> None:
    out = ok(ctx, "glob", pattern="**/*.py")
    assert sorted(body(out)) == ["src/app.py", "src/util.py"]
    assert out.splitlines()[0] == "Found 2 files matching '**/*.py' in ., newest first:"
    assert sorted(body(ok(ctx, "glob", pattern="*.log"))) == ["keep.log"]
    assert ok(ctx, "glob", pattern="*.py") == "No files match '*.py' in ."
    assert sorted(body(ok(ctx, "glob", pattern="src/**/*.{ts,txt}"))) == [
        "src/deep/more.ts",
        "src/deep/top_only.txt",
    ]
    assert sorted(body(ok(ctx, "glob", pattern="*.ts", path="src/deep"))) == ["src/deep/more.ts"]
    assert body(ok(ctx, "glob", pattern="./src/?pp.py")) == ["src/app.py"]
    assert body(ok(ctx, "glob", pattern="src/[a-b]*.py")) == ["src/app.py"]
    assert body(ok(ctx, "glob", pattern="src/[!a]*.py")) == ["src/util.py"]
    absolute = str(ctx.access.root / "src" / "*.py")
    assert sorted(body(ok(ctx, "glob", pattern=absolute))) == ["src/app.py", "src/util.py"]
    assert sorted(body(ok(ctx, "glob", pattern="build/**"))) == ["build/out.py"]
    assert ".git/config" not in ok(ctx, "glob", pattern="**")
    assert ".gitignore" in body(ok(ctx, "glob", pattern="**"))


def test_glob_sorts_newest_first(ctx: ToolContext) -> None:
    root = ctx.access.root
    for i, name in enumerate(["b.md", "c.md", "a.md"]):
        (root / name).write_text(name)
        os.utime(root / name, ns=(10**18 + i * 10**9, 10**18 + i * 10**9))
    (root / "d.md").write_text("same time as a")
    os.utime(root / "d.md", ns=(10**18 + 2 * 10**9, 10**18 + 2 * 10**9))
    # newest first; equal times by path
    assert body(ok(ctx, "glob", pattern="?.md")) == ["a.md", "d.md", "c.md", "b.md"]


def test_glob_cap_and_errors(ctx: ToolContext) -> None:
    root = ctx.access.root
    for i in range(30):
        (root / "many" / f"f{i:02}.txt").parent.mkdir(exist_ok=True)
        (root / "many" / f"f{i:02}.txt").write_text("x")
    small = ToolContext(access=ctx.access, list_max_entries=5)
    out = ok(small, "glob", pattern="many/*.txt")
    assert len(body(out)) == 5
    assert out.splitlines()[0].startswith("Found 30 files")
    assert out.splitlines()[-1] == "[25 more not shown; use a narrower pattern or path.]"
    assert err(ctx, "glob", pattern="*", path="nowhere") == "Path not found: nowhere"
    assert err(ctx, "glob", pattern="*", path="README.md") == "README.md is not a directory"
    assert err(ctx, "glob", pattern="  ") == "pattern is empty"
    assert ok(ctx, "glob", pattern="nowhere/*.py") == "No files match 'nowhere/*.py' in ."


# --- list_directory ---------------------------------------------------------------------------


def test_list_directory(ctx: ToolContext) -> None:
    out = ok(ctx, "list_directory", path=".")
    assert out.splitlines() == [
        "Directory .:",
        "src/",
        ".gitignore",
        "README.md",
        "image.png",
        "keep.log",
        "[4 gitignored entries not shown.]",
    ]
    assert ok(ctx, "list_directory") == out
    assert ok(ctx, "list_directory", path="src").splitlines() == [
        "Directory src:",
        "deep/",
        ".gitignore",
        "app.py",
        "util.py",
        "[1 gitignored entry not shown.]",
    ]
    assert ok(ctx, "list_directory", path="build").splitlines() == ["Directory build:", "out.py"]
    (ctx.access.root / "empty").mkdir()
    assert ok(ctx, "list_directory", path="empty") == "Directory empty is empty."


def test_list_directory_errors_and_cap(ctx: ToolContext) -> None:
    assert err(ctx, "list_directory", path="nope") == "Directory not found: nope"
    assert "is a file, not a directory" in err(ctx, "list_directory", path="README.md")
    small = ToolContext(access=ctx.access, list_max_entries=2)
    out = ok(small, "list_directory", path="src")
    assert out.splitlines()[1:] == [
        "deep/",
        ".gitignore",
        "[2 more entries not shown.]",
        "[1 gitignored entry not shown.]",
    ]


def test_list_outside_root(ctx: ToolContext, tmp_path: Path) -> None:
    other = tmp_path / "other"
    (other / "x").mkdir(parents=True)
    (other / "y.txt").write_text("y")
    assert ok(ctx, "list_directory", path=str(other)).splitlines() == [
        f"Directory {other}:",
        "x/",
        "y.txt",
    ]


# --- odd names --------------------------------------------------------------------------------


def test_unicode_and_newline_names_in_search_tools(ctx: ToolContext) -> None:
    root = ctx.access.root
    (root / "ünï").mkdir()
    (root / "ünï" / "新しい.md").write_text("needle unicode\n")
    (root / "ünï" / "two\nlines.md").write_text("needle newline\n")
    out = ok(ctx, "glob", pattern="ünï/*.md")
    quoted = json.dumps("ünï/two\nlines.md", ensure_ascii=False)
    assert sorted(body(out)) == sorted(["ünï/新しい.md", quoted])
    out = ok(ctx, "grep_search", pattern="needle", path="ünï")
    assert sorted(body(out)) == sorted(
        [
            "ünï/新しい.md:1:needle unicode",
            json.dumps("ünï/two\nlines.md", ensure_ascii=False) + ":1:needle newline",
        ]
    )
    out = ok(ctx, "list_directory", path="ünï")
    assert body(out) == [json.dumps("two\nlines.md", ensure_ascii=False), "新しい.md"]


def test_nested_gitignore_negation_and_precedence(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_tree(
        root,
        {
            ".gitignore": "*.tmp\n",
            "a/.gitignore": "!important.tmp\n",
            "a/important.tmp": "x",
            "a/other.tmp": "x",
            "b/important.tmp": "x",
            "logs/.gitignore": "*\n!.gitignore\n",
            "logs/today.txt": "x",
        },
    )
    ctx = ToolContext(access=DirectAccess(root))
    assert sorted(body(ok(ctx, "glob", pattern="**/*"))) == [
        ".gitignore",
        "a/.gitignore",
        "a/important.tmp",
        "logs/.gitignore",
    ]
    assert body(ok(ctx, "list_directory", path="logs")) == [".gitignore"]


# --- glob translation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "d/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "d/e/a.py", True),
        ("d/**", "d/e/f", True),
        ("d/**/f", "d/f", True),
        ("d/**/f", "d/x/y/f", True),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("[ab].txt", "b.txt", True),
        ("[!ab].txt", "b.txt", False),
        ("*.{js,jsx}", "x.jsx", True),
        ("*.{js,jsx}", "x.ts", False),
        ("{src,lib}/**/*.{c,h}", "lib/x/y.h", True),
        ("a+b(c).txt", "a+b(c).txt", True),
        ("[unclosed", "[unclosed", True),
        ("*", ".hidden", True),
    ],
)
def test_glob_regex(pattern: str, path: str, matches: bool) -> None:
    assert bool(glob_regex(pattern).match(path)) is matches


def test_split_glob() -> None:
    assert split_glob("src/app/**/*.py") == ("src/app", "**/*.py")
    assert split_glob("./src/*.py") == ("src", "*.py")
    assert split_glob("*.py") == ("", "*.py")
    assert split_glob("/abs/dir/*.py") == ("/abs/dir", "*.py")
    assert split_glob("/*.py") == ("/", "*.py")
    assert split_glob("a/{b,c}/d") == ("a", "{b,c}/d")
