"""glob's one-walk listing (worker/tools/listing_walk.py, rg.plain_listing): taken when
every ignore file is plain, it answers exactly as the walk does (ignore files at every
level, symlinks in and out of the project, the overlay, specrun's state, odd names), starts
no process, and steps aside for anything else."""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path

import psutil
import pytest

from overlay import Overlay
from tests.worker.tool_calls import body, make_tree, ok
from worker.tools import DirectAccess, OverlayAccess, ToolContext
from worker.tools.access import FileAccess
from worker.tools.listing_walk import NameTest, walk_listing
from worker.tools.plain_ignore import RuleChain
from worker.tools.rg import plain_listing
from worker.tools.tree import TreeView


def _both(ctx: ToolContext, **args: str) -> str:
    """glob's output on the fast path and on the walk; fails when they differ."""
    fast = ok(ctx, "glob", **args)
    assert fast == ok(dataclasses.replace(ctx, use_ripgrep=False), "glob", **args)
    return fast


def _plain(access: FileAccess, path: str = ".", name: str | None = None) -> bool:
    """Whether a listing of ``path`` takes the one-walk path."""
    view = TreeView(access)
    start = view.node(access.logical_path(path))
    assert start is not None
    search = plain_listing(view, start, name=name)
    if search is None:
        return False
    search.close()
    return True


def _random_tree(root: Path, rng: random.Random) -> None:
    rules = ["*.tmp", "build/", "/top.md", "x?.py", "*.py[co]", "cache", ".*", "/sub/", "d*"]
    dirs = ["a", "b", "build", "sub", "cache", "déjà", ".hid", "data"]
    names = ["m.py", "x1.py", "n.pyc", "t.tmp", "top.md", "r.md", "dd.txt", ".env", "k.py"]
    files: dict[str, str | bytes] = {
        ".git/HEAD": "ref: refs/heads/main\n",
        ".git/info/exclude": "\n".join(rng.sample(rules, 1)) + "\n",
        ".gitignore": "# generated\n" + "\n".join(rng.sample(rules, 3)) + "\n",
    }
    for _ in range(120):
        depth = rng.randint(0, 3)
        rel = "/".join([*(rng.choice(dirs) for _ in range(depth)), rng.choice(names)])
        files[rel] = f"{rel}\n"
    for directory in ["a", "b/a", "data", "déjà/b"]:
        files[f"{directory}/.gitignore"] = "\n".join(rng.sample(rules, rng.randint(0, 2)))
    for rel, content in files.items():
        path = root / rel
        if any(p.exists() and not p.is_dir() for p in path.parents) or path.is_dir():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    (root / "a").mkdir(exist_ok=True)
    (root / "b").mkdir(exist_ok=True)
    os.symlink("../m.py", root / "a" / "inside.py")
    os.symlink("/etc/hostname", root / "b" / "outside.py")
    os.symlink("../b", root / "a" / "dirlink")
    os.symlink("nowhere.py", root / "dangling.py")
    os.symlink("m.py", root / "b" / "x2.py")  # a link whose name a rule may ignore
    (root / "m.py").write_text("m\n")
    (root / "b" / "bad\udcff.py").write_bytes(b"not UTF-8 in its name\n")
    for i, rel in enumerate(sorted(p for p in files if (root / p).is_file())):
        os.utime(root / rel, ns=(10**18 + i * 10**9, 10**18 + (i % 7) * 10**9))


@pytest.mark.parametrize("seed", range(6))
def test_plain_trees_list_as_the_walk_does(tmp_path: Path, seed: int) -> None:
    root = tmp_path / "p"
    _random_tree(root, random.Random(seed))
    ctx = ToolContext(access=DirectAccess(root), list_max_entries=15)
    assert _plain(ctx.access) and _plain(ctx.access, "a")
    for pattern in ["**/*.py", "*", "a/*", "**/*.{md,py}", "**/x?.py", "b/**", "**/*"]:
        _both(ctx, pattern=pattern)
    _both(ctx, pattern="**/*.py", path="a")


def test_a_plain_listing_starts_no_process_and_names_links_out(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_tree(root, {".gitignore": "__pycache__/\n", "a.py": "", "b/c.py": "", "b/d.txt": ""})
    os.symlink("/etc/hostname", root / "b" / "out.py")
    os.symlink("../a.py", root / "b" / "in.py")
    ctx = ToolContext(access=DirectAccess(root))
    view = TreeView(ctx.access)
    start = view.node(root)
    assert start is not None
    others = {p.pid for p in psutil.Process().children()}
    search = plain_listing(view, start, name="*.py")
    assert search is not None
    with search:
        assert {p.pid for p in psutil.Process().children()} == others  # no rg, no find
        assert sorted(search.listed() or []) == ["a.py", "b/c.py"]
        assert sorted(search.times()) == ["a.py", "b/c.py"]
        assert [hit.rel for hit in search.extra() or []] == ["b/in.py"]
    out = _both(ctx, pattern="**/*.py")
    assert sorted(body(out)) == ["a.py", "b/c.py", "b/in.py"]
    assert "[Skipped 1 link that points outside the project: b/out.py]" in out


@pytest.mark.parametrize(
    "files",
    [
        {".gitignore": "*.log\n!keep.log\n"},  # a negation at the top
        {".gitignore": "*.log\n", "deep/er/.gitignore": "docs/_build\n"},  # a path, deep down
        {".git/info/exclude": "**/gen\n"},
        {".gitignore": "*.log\n", "odd\nname/x.py": ""},  # a newline, where rules apply
    ],
)
def test_anything_but_plain_rules_leaves_the_fast_path(
    tmp_path: Path, files: dict[str, str]
) -> None:
    root = tmp_path / "p"
    make_tree(
        root,
        {".git/HEAD": "x\n", "a.py": "", "keep.log": "", "deep/er/docs/_build/b.py": "", **files},
    )
    ctx = ToolContext(access=DirectAccess(root))
    assert not _plain(ctx.access)  # (opens the root once, for the reads below it)
    descriptors = len(os.listdir("/proc/self/fd"))
    assert not _plain(ctx.access)
    assert len(os.listdir("/proc/self/fd")) == descriptors  # a walk given up closes all
    _both(ctx, pattern="**/*")


def test_the_overlay_and_specruns_state(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_tree(
        root,
        {".gitignore": "*.log\n", "a.py": "old\n", "b/c.py": "", ".specrun/state.py": ""},
    )
    overlay = Overlay(root, tmp_path / "ovl" / "1" / "s")
    ctx = ToolContext(access=OverlayAccess(overlay))
    ok(ctx, "write_file", file_path="a.py", content="new\n")
    ok(ctx, "write_file", file_path="b/new.py", content="x\n")
    ok(ctx, "write_file", file_path="only/here.py", content="x\n")
    assert _plain(ctx.access)
    assert sorted(body(_both(ctx, pattern="**/*.py"))) == [
        "a.py", "b/c.py", "b/new.py", "only/here.py",
    ]  # fmt: skip
    ok(ctx, "write_file", file_path=".gitignore", content="*.py\n")  # rules only it knows
    assert not _plain(ctx.access)
    assert body(_both(ctx, pattern="**/*")) == [".gitignore"]


class _Vanishing(NameTest):
    """Deletes a file when asked about its name: after its directory was read, before its
    ``stat``, as another process would."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def __call__(self, name: str) -> bool:
        if name == self.path.name:
            self.path.unlink(missing_ok=True)
        return True


def test_a_file_gone_before_its_stat_is_listed_without_a_time(tmp_path: Path) -> None:
    make_tree(tmp_path, {"a.py": "", "d/gone.py": ""})
    found = walk_listing(
        str(tmp_path),
        RuleChain((), None),
        lambda _: None,
        wanted=_Vanishing(tmp_path / "d" / "gone.py"),
    )
    assert found is not None and not found.failed
    assert not (tmp_path / "d" / "gone.py").exists()
    assert found.files["d/gone.py"] == 0  # listed, as the walk lists it, with no time
    assert found.files["a.py"] > 0
