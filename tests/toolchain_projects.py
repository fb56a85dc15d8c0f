"""Small real projects, one per ecosystem on this machine, whose test suites do what real
suites do to a sandbox: fork many processes (one after another and some at once), run git
fixtures (init, commit, clone through ``file://`` and a plain path), and create, rename
and delete build directories beside the project's own. Used by the toolchain tests
(``tests/worker/test_captured_builds.py``) and ``scripts/bench_toolchains.py``.

Each builder makes the project in a fresh directory (a git repository with one commit)
and returns a :class:`Project`: the command that runs its suite in the project root, and
how to read the number of passed tests from its output. Nothing needs the network: the
Python project uses ``unittest`` in a venv made from the default ``python3`` (or pytest,
when the caller installs it), the Rust project has no dependencies and builds with
``--offline``, the Node project needs nothing beyond ``node``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "fixture",
    "GIT_AUTHOR_EMAIL": "fixture@example.com",
    "GIT_COMMITTER_NAME": "fixture",
    "GIT_COMMITTER_EMAIL": "fixture@example.com",
}


@dataclass(frozen=True)
class Project:
    name: str
    root: Path
    command: str
    passed: Callable[[str], int | None]
    """The number of tests the output says passed, or None (a failed run)."""
    expected: int


def _git_commit_all(root: Path) -> None:
    env = {**os.environ, **GIT_IDENTITY}
    (root / ".gitignore").write_text(".venv/\ntarget/\nnode_modules/\n__pycache__/\nbuild/\n")
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        subprocess.run(argv, cwd=root, env=env, check=True, capture_output=True)


# --- Python --------------------------------------------------------------------------------

_PY_SUITE = '''\
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SEQUENTIAL = @SEQUENTIAL@
CONCURRENT = @CONCURRENT@


def git(*args, cwd=None):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


class Processes(unittest.TestCase):
    def test_many_processes_one_after_another(self):
        for _ in range(SEQUENTIAL):
            subprocess.run(["true"], check=True)

    def test_processes_at_once(self):
        procs = [subprocess.Popen(["sleep", "0.2"]) for _ in range(CONCURRENT)]
        self.assertEqual([p.wait() for p in procs], [0] * CONCURRENT)

    def test_interpreters(self):
        for _ in range(5):
            out = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True)
            self.assertEqual(out.stdout.strip(), b"42")


class GitFixtures(unittest.TestCase):
    def test_init_commit_clone(self):
        with tempfile.TemporaryDirectory() as tmp:
            origin = os.path.join(tmp, "origin")
            git("init", "-q", origin)
            with open(os.path.join(origin, "a.txt"), "w") as fh:
                fh.write("one\\n")
            git("add", "a.txt", cwd=origin)
            git("commit", "-qm", "first", cwd=origin)
            for name, source in (("by-url", "file://" + origin), ("by-path", origin)):
                clone = os.path.join(tmp, name)
                git("clone", "-q", source, clone)
                with open(os.path.join(clone, "b.txt"), "w") as fh:
                    fh.write("two\\n")
                git("add", "b.txt", cwd=clone)
                git("commit", "-qm", "second", cwd=clone)
                log = git("log", "--format=%s", cwd=clone).stdout.split()
                self.assertEqual(log, ["second", "first"])


class BuildDirectories(unittest.TestCase):
    def test_a_new_directory_is_renamed_into_place(self):
        # what pytest does for .pytest_cache and cargo for target/: build it aside, rename
        staging = tempfile.mkdtemp(prefix="cache-", dir=".")
        with open(os.path.join(staging, "data"), "w") as fh:
            fh.write("cached\\n")
        os.rename(staging, "build")
        os.rename(os.path.join("build"), "build-done")
        self.assertTrue(os.path.isfile("build-done/data"))
        shutil.rmtree("build-done")

    def test_a_project_directory_is_deleted(self):
        shutil.rmtree("fixtures")
        self.assertFalse(os.path.exists("fixtures"))


if __name__ == "__main__":
    unittest.main()
'''


def _python3() -> str | None:
    return shutil.which("python3")


def python_project(
    dest: Path, *, sequential: int = 50, concurrent: int = 10, pytest: bool = False
) -> Project:
    """A venv made from the default ``python3`` (``python3 -m venv .venv``) and a unittest
    suite; with ``pytest`` the suite runs under pytest (installed by the caller), which
    also builds its ``.pytest_cache`` beside the project's directories."""
    dest.mkdir(parents=True)
    (dest / "tests").mkdir()
    (dest / "tests" / "__init__.py").write_text("")
    suite = _fill(_PY_SUITE, sequential, concurrent)
    (dest / "tests" / "test_suite.py").write_text(suite)
    (dest / "fixtures").mkdir()
    for i in range(5):
        (dest / "fixtures" / f"f{i}.txt").write_text(f"{i}\n")
    python = _python3()
    if python is None:
        raise RuntimeError("python3 is not on PATH")
    subprocess.run([python, "-m", "venv", "--without-pip", ".venv"], cwd=dest, check=True)
    _git_commit_all(dest)
    if pytest:
        return Project(
            "python (pytest)", dest, ".venv/bin/python -m pytest -q -W error tests",
            _pytest_passed, 6,
        )
    return Project(
        "python (unittest)", dest, ".venv/bin/python -m unittest -v", _unittest_passed, 6
    )


def _unittest_passed(output: str) -> int | None:
    ran = re.search(r"^Ran (\d+) tests? in", output, re.M)
    if ran is None or re.search(r"^OK\b", output, re.M) is None:
        return None
    return int(ran.group(1))


def _pytest_passed(output: str) -> int | None:
    if re.search(r"\b(failed|error)", output):
        return None
    found = re.search(r"(\d+) passed", output)
    return int(found.group(1)) if found else None


def _fill(template: str, sequential: int, concurrent: int) -> str:
    return template.replace("@SEQUENTIAL@", str(sequential)).replace(
        "@CONCURRENT@", str(concurrent)
    )


# --- Node ----------------------------------------------------------------------------------

_NODE_SUITE = """\
const { test } = require("node:test");
const assert = require("node:assert");
const { spawn, spawnSync, execFileSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const git = (args, cwd) => execFileSync("git", args, { cwd, encoding: "utf8" });

test("many processes one after another", () => {
  for (let i = 0; i < @SEQUENTIAL@; i++) assert.strictEqual(spawnSync("true").status, 0);
});

test("processes at once", async () => {
  const codes = await Promise.all(Array.from({ length: @CONCURRENT@ }, () =>
    new Promise((done) => spawn("sleep", ["0.2"]).on("exit", done))));
  assert.deepStrictEqual(codes, Array(@CONCURRENT@).fill(0));
});

test("git fixture: init, commit, clone", () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "fixture-"));
  const origin = path.join(tmp, "origin");
  git(["init", "-q", origin]);
  fs.writeFileSync(path.join(origin, "a.txt"), "one\\n");
  git(["add", "a.txt"], origin);
  git(["commit", "-qm", "first"], origin);
  for (const [name, source] of [["by-url", "file://" + origin], ["by-path", origin]]) {
    const clone = path.join(tmp, name);
    git(["clone", "-q", source, clone]);
    fs.writeFileSync(path.join(clone, "b.txt"), "two\\n");
    git(["add", "b.txt"], clone);
    git(["commit", "-qm", "second"], clone);
    assert.deepStrictEqual(git(["log", "--format=%s"], clone).split("\\n").filter(Boolean),
      ["second", "first"]);
  }
  fs.rmSync(tmp, { recursive: true });
});

test("a new directory is renamed into place, a project directory deleted", () => {
  const staging = fs.mkdtempSync("cache-");
  fs.writeFileSync(path.join(staging, "data"), "cached\\n");
  fs.renameSync(staging, "build");
  fs.renameSync("build", "build-done");
  assert.ok(fs.existsSync("build-done/data"));
  fs.rmSync("build-done", { recursive: true });
  fs.rmSync("fixtures", { recursive: true });
  assert.ok(!fs.existsSync("fixtures"));
});
"""


def node_project(dest: Path, *, sequential: int = 50, concurrent: int = 10) -> Project:
    """A package whose ``npm test`` (``node --test`` without npm) runs a node:test suite."""
    dest.mkdir(parents=True)
    (dest / "test").mkdir()
    suite = _fill(_NODE_SUITE, sequential, concurrent)
    (dest / "test" / "suite.test.js").write_text(suite)
    (dest / "fixtures").mkdir()
    (dest / "fixtures" / "f.txt").write_text("f\n")
    package = {"name": "fixture", "version": "1.0.0", "private": True,
               "scripts": {"test": "node --test test/"}}
    (dest / "package.json").write_text(json.dumps(package, indent=2) + "\n")
    _git_commit_all(dest)
    command = "npm test" if shutil.which("npm") else "node --test test/"
    return Project("node", dest, command, _node_passed, 4)


def _node_passed(output: str) -> int | None:
    fail = re.search(r"^# fail (\d+)", output, re.M)
    passed = re.search(r"^# pass (\d+)", output, re.M)
    if passed is None or fail is None or fail.group(1) != "0":
        return None
    return int(passed.group(1))


# --- Rust ----------------------------------------------------------------------------------

_RUST_TEST = """\
use std::fs;
use std::path::Path;
use std::process::Command;

fn git(args: &[&str], cwd: &Path) -> String {
    let out = Command::new("git").args(args).current_dir(cwd).output().expect("git runs");
    assert!(out.status.success(), "git {:?}: {}", args, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn many_processes_one_after_another() {
    for _ in 0..@SEQUENTIAL@ {
        assert!(Command::new("true").status().unwrap().success());
    }
}

#[test]
fn processes_at_once() {
    let children: Vec<_> = (0..@CONCURRENT@)
        .map(|_| Command::new("sleep").arg("0.2").spawn().unwrap())
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
}

#[test]
fn git_fixture_init_commit_clone() {
    let tmp = std::env::temp_dir().join(format!("fixture-{}", std::process::id()));
    let origin = tmp.join("origin");
    fs::create_dir_all(&origin).unwrap();
    git(&["init", "-q"], &origin);
    fs::write(origin.join("a.txt"), "one\\n").unwrap();
    git(&["add", "a.txt"], &origin);
    git(&["commit", "-qm", "first"], &origin);
    let url = format!("file://{}", origin.display());
    for (name, source) in [("by-url", url.as_str()), ("by-path", origin.to_str().unwrap())] {
        let clone = tmp.join(name);
        git(&["clone", "-q", source, clone.to_str().unwrap()], &tmp);
        fs::write(clone.join("b.txt"), "two\\n").unwrap();
        git(&["add", "b.txt"], &clone);
        git(&["commit", "-qm", "second"], &clone);
        let log = git(&["log", "--format=%s"], &clone);
        assert_eq!(log.split_whitespace().collect::<Vec<_>>(), ["second", "first"]);
    }
    fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn build_directories() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let staging = root.join(format!("cache-{}", std::process::id()));
    fs::create_dir(&staging).unwrap();
    fs::write(staging.join("data"), "cached\\n").unwrap();
    fs::rename(&staging, root.join("build")).unwrap();
    fs::rename(root.join("build"), root.join("build-done")).unwrap();
    assert!(root.join("build-done/data").is_file());
    fs::remove_dir_all(root.join("build-done")).unwrap();
    fs::remove_dir_all(root.join("fixtures")).unwrap();
    assert!(!root.join("fixtures").exists());
}
"""


def rust_project(dest: Path, *, sequential: int = 50, concurrent: int = 10) -> Project:
    """A crate without dependencies; ``cargo test --offline`` builds ``target/`` (a new
    directory renamed into place) and runs an integration test suite."""
    dest.mkdir(parents=True)
    (dest / "src").mkdir()
    (dest / "tests").mkdir()
    (dest / "Cargo.toml").write_text(
        '[package]\nname = "fixture"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n'
    )
    (dest / "src" / "lib.rs").write_text(
        "pub fn answer() -> u32 {\n    42\n}\n\n#[cfg(test)]\nmod tests {\n"
        "    #[test]\n    fn answer() {\n        assert_eq!(super::answer(), 42);\n    }\n}\n"
    )
    suite = _fill(_RUST_TEST, sequential, concurrent)
    (dest / "tests" / "suite.rs").write_text(suite)
    (dest / "fixtures").mkdir()
    (dest / "fixtures" / "f.txt").write_text("f\n")
    _git_commit_all(dest)
    return Project("rust", dest, "cargo test --offline", _cargo_passed, 5)


def _cargo_passed(output: str) -> int | None:
    results = re.findall(r"test result: (\w+)\. (\d+) passed; (\d+) failed", output)
    if not results or any(kind != "ok" or failed != "0" for kind, _p, failed in results):
        return None
    return sum(int(passed) for _k, passed, _f in results)


# --- which ones this machine has -----------------------------------------------------------

Builder = Callable[..., Project]


def available() -> dict[str, Builder]:
    """The ecosystems whose toolchain is on this machine's PATH, by name."""
    found: dict[str, Builder] = {}
    if _python3() is not None:
        found["python"] = python_project
    if shutil.which("node") is not None:
        found["node"] = node_project
    if shutil.which("cargo") is not None:
        found["rust"] = rust_project
    return found


def reset(project: Project) -> None:
    """Back to the committed tree (build output removed; the venv and specrun's state kept)."""
    subprocess.run(
        ["git", "clean", "-fdxq", "-e", ".venv", "-e", ".specrun"], cwd=project.root, check=True,
        capture_output=True,
    )
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=project.root, check=True)


def run_directly(project: Project, timeout_s: float = 600) -> tuple[int, str, float]:
    """The suite in the user's own environment: (exit code, output, seconds)."""
    import time

    start = time.monotonic()
    proc = subprocess.run(
        ["bash", "-c", project.command], cwd=project.root, capture_output=True, text=True,
        timeout=timeout_s, stdin=subprocess.DEVNULL,
    )
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start
