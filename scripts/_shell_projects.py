"""Small real projects whose work comes in two commands, "build it" then "run the tests",
for the benchmarks of a speculation's shell (``bench_shell_session.py``,
``bench_git_layers.py``).

Each project is made fresh in a directory of its own and names its two commands. A
toolchain this machine lacks gives ``None`` and the reason, so the benchmark can say so
in one line and go on.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PairProject:
    name: str
    root: Path
    build: str
    test: str
    # the direct baseline for the second command is a warm run (jest: its cache)
    warm_note: str = ""


Maker = Callable[[Path], PairProject]


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def _commit_all(root: Path) -> None:
    """A git repository, so Tab's "ignored by git" rules apply as on a real project."""
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=bench", "-c", "user.email=bench@example.com",
         "commit", "-qm", "initial")


def make_project(base: Path, sources: int = 40) -> PairProject:
    """zlib's shape: many objects, a shared library with its version links, a test program
    that links against it; ``make`` then ``make check``."""
    root = base / "make-project"
    (root / "src").mkdir(parents=True)
    for n in range(sources):
        (root / "src" / f"part{n}.c").write_text(
            f"int part{n}(int x) {{ int s = 0; for (int i = 0; i < x; i++) s += i ^ {n}; "
            f"return s; }}\n"
        )
    calls = " + ".join(f"part{n}(1000)" for n in range(sources))
    decls = "".join(f"int part{n}(int);\n" for n in range(sources))
    (root / "src" / "check.c").write_text(
        f"#include <stdio.h>\n{decls}int main(void) {{ long t = 0;"
        f" for (int r = 0; r < 2000; r++) t += {calls};"
        f" printf(\"checked %ld\\n\", t); return 0; }}\n"
    )
    objects = " ".join(f"src/part{n}.o" for n in range(sources))
    (root / "Makefile").write_text(
        "CFLAGS = -O1 -fPIC\n"
        f"OBJS = {objects}\n"
        "all: libparts.so\n"
        "libparts.so.1.0: $(OBJS)\n"
        "\t$(CC) -shared -Wl,-soname,libparts.so.1 -o $@ $(OBJS)\n"
        "libparts.so: libparts.so.1.0\n"
        "\tln -sf libparts.so.1.0 libparts.so.1\n"
        "\tln -sf libparts.so.1.0 libparts.so\n"
        "check_parts: src/check.o libparts.so\n"
        "\t$(CC) -o $@ src/check.o -L. -lparts\n"
        "check: check_parts\n"
        "\tLD_LIBRARY_PATH=. ./check_parts\n"
        ".PHONY: all check\n"
    )
    (root / ".gitignore").write_text("*.o\n*.so*\ncheck_parts\n")
    _commit_all(root)
    return PairProject("make", root, "make -j2", "make check")


def cargo_project(base: Path, modules: int = 12) -> PairProject:
    root = base / "cargo-project"
    (root / "src").mkdir(parents=True)
    (root / "Cargo.toml").write_text(
        '[package]\nname = "pairs"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n'
    )
    lines = []
    for n in range(modules):
        (root / "src" / f"m{n}.rs").write_text(
            f"pub fn value(x: u64) -> u64 {{ (0..x).map(|i| i ^ {n}).sum() }}\n"
            "#[cfg(test)]\nmod tests {\n"
            "    #[test]\n    fn adds() { assert!(super::value(10) > 0); }\n}\n"
        )
        lines.append(f"pub mod m{n};")
    (root / "src" / "lib.rs").write_text("\n".join(lines) + "\n")
    (root / ".gitignore").write_text("/target\nCargo.lock\n")
    _commit_all(root)
    return PairProject("cargo", root, "cargo build --tests --offline", "cargo test --offline")


def tsc_project(base: Path, modules: int = 30) -> PairProject:
    """An incremental TypeScript build (``tsc -b`` writes ``.tsbuildinfo``): the second
    build has nothing to do when the outputs' times say so, then the compiled tests run."""
    root = base / "tsc-project"
    (root / "src").mkdir(parents=True)
    for n in range(modules):
        (root / "src" / f"m{n}.ts").write_text(
            f"export function value{n}(x: number): number {{ let s = 0; "
            f"for (let i = 0; i < x; i++) {{ s += i ^ {n}; }} return s; }}\n"
        )
    imports = "".join(f"import {{ value{n} }} from './m{n}';\n" for n in range(modules))
    checks = "".join(f"if (value{n}(10) < 0) throw new Error('m{n}');\n" for n in range(modules))
    (root / "src" / "test.ts").write_text(f"{imports}{checks}console.log('tests passed');\n")
    (root / "tsconfig.json").write_text(json.dumps({
        "compilerOptions": {
            "incremental": True, "outDir": "dist", "rootDir": "src", "module": "commonjs",
            "target": "es2020", "strict": True,
        },
        "include": ["src"],
    }))
    (root / ".gitignore").write_text("dist/\n*.tsbuildinfo\n")
    _commit_all(root)
    return PairProject("tsc", root, "tsc -b", "tsc -b && node dist/test.js")


def jest_project(base: Path, files: int = 12) -> PairProject:
    """jest keeps its transform cache in ``/tmp/jest_<uid>``: a second run is warm."""
    root = base / "jest-project"
    (root / "src").mkdir(parents=True)
    for n in range(files):
        (root / "src" / f"m{n}.js").write_text(
            f"exports.value = (x) => {{ let s = 0; for (let i = 0; i < x; i++) s += i ^ {n}; "
            f"return s; }};\n"
        )
        (root / "src" / f"m{n}.test.js").write_text(
            f"const {{ value }} = require('./m{n}');\n"
            f"test('m{n}', () => {{ expect(value(10)).toBeGreaterThan(0); }});\n"
        )
    (root / "package.json").write_text(json.dumps({"name": "pairs", "version": "1.0.0"}))
    _commit_all(root)
    return PairProject("jest", root, "jest --ci", "jest --ci", warm_note="second run")


GIT_SUITE = '''import os, subprocess, tempfile, unittest

def git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)

class GitFixtures(unittest.TestCase):
    pass

def _case(n):
    def test(self):
        with tempfile.TemporaryDirectory() as tmp:
            repo = os.path.join(tmp, "repo")
            git(tmp, "init", "-q", repo)
            for c in range(COMMITS):
                with open(os.path.join(repo, f"f{c}.txt"), "w") as fh:
                    fh.write(f"{n} {c}\\n")
                git(repo, "add", "-A")
                git(repo, "commit", "-qm", f"c{c}")
            git(repo, "tag", f"v1.{n}")
            git(repo, "checkout", "-qb", "topic")
            clone = os.path.join(tmp, "clone")
            git(tmp, "clone", "-q", f"file://{repo}", clone)
            out = git(clone, "describe", "--tags").stdout
            self.assertTrue(out.startswith(f"v1.{n}"))
            git(clone, "status", "--porcelain")
            git(clone, "log", "--oneline")
    return test

for _n in range(TESTS):
    setattr(GitFixtures, f"test_repo_{_n}", _case(_n))

if __name__ == "__main__":
    unittest.main()
'''


def git_project(base: Path, tests: int = 30, commits: int = 5) -> PairProject:
    """setuptools-scm's shape: every test makes repositories in a temporary directory,
    commits, tags, clones through ``file://`` and asks git about them."""
    root = base / "git-project"
    root.mkdir(parents=True)
    suite = GIT_SUITE.replace("COMMITS", str(commits)).replace("TESTS", str(tests))
    (root / "test_git.py").write_text(suite)
    _commit_all(root)
    command = "python3 -m unittest -q test_git"
    return PairProject("git suite", root, command, command)


def available(base: Path) -> list[tuple[str, PairProject | None, str]]:
    """(name, project or None, why it is absent) for every toolchain."""
    found: list[tuple[str, PairProject | None, str]] = []
    needs: list[tuple[str, tuple[str, ...], Maker]] = [
        ("make", ("make", "cc"), make_project),
        ("cargo", ("cargo",), cargo_project),
        ("tsc", ("tsc", "node"), tsc_project),
        ("jest", ("jest", "node"), jest_project),
        ("git suite", ("git", "python3"), git_project),
    ]
    for name, programs, maker in needs:
        missing = [p for p in programs if shutil.which(p) is None]
        if missing:
            found.append((name, None, f"{', '.join(missing)} not found on PATH"))
        else:
            found.append((name, maker(base), ""))
    return found
