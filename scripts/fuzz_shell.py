#!/usr/bin/env python3
"""Differential check of the shell read-only classifier: run what it allows and watch (issue 13).

For each generated command:

1. classify it; commands refused are only counted;
2. a read-only command must parse in bash itself (``bash -n``): a command bash rejects is a
   parser differential (bashlex accepted something bash reads differently);
3. for a read-only command made of simple commands whose words the classifier takes as
   literals, bash's own expansion of each word (``printf '%s\\0' WORDS``, run isolated) must equal
   the classifier's derived text: a difference is a word differential;
4. the command runs in a throwaway copy of a small project (a copy of the demo sample project
   made a git repository, plus files with odd names such as ``-ofoo``), with a clean
   environment, stdin from /dev/null, a timeout, in new user, network and mount namespaces
   (``unshare``), under ``strace -ff``. Every syscall that could change something is a finding:

   * ``execve`` of a program that is not one of the command names the classifier saw (git may
     exec its own helpers from its exec path, see ``_allowed_exec``);
   * an open for writing (``O_WRONLY``/``O_RDWR``/``O_CREAT``/``O_TRUNC``) of anything but
     ``/dev/null``, ``/dev/tty`` (bash probes it; there is no terminal) and the scratch dir,
     whether it succeeds or not (the project copy is mounted read-only, as in the containment
     profile). One exception: git's opportunistic index refresh (``git diff``, ``describe
     --dirty`` take ``.git/index.lock`` when they can, to update the stat cache, without
     honouring ``GIT_OPTIONAL_LOCKS``); on the read-only project that open fails with EROFS
     and git goes on, so a *failed* lock of ``.git/index.lock`` by git is not a finding;
   * ``connect``, ``bind``, ``unlink``, ``rename``, ``chmod``, ``chown``, ``utime``,
     ``mknod``, ``mount``, ``mkdir``, ``rmdir``, ``link``, ``symlink``, ``truncate`` (any
     variant), and a signal sent to a process outside the traced tree.

The runner is :func:`run_traced` (one small function: it may be replaced by the containment
runner). ``--json`` prints one JSON object; otherwise a table. Exit status 1 on findings, 2 when
the tools are missing (strace, unshare, bash, git).

Usage: ``scripts/fuzz_shell.py [--count N] [--seed S] [--seconds T] [--jobs J] [--json]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bashlex  # noqa: E402

from worker.shell import classify  # noqa: E402
from worker.shell.git_config import GIT_ENV_TO_REMOVE, HARDENED_GIT_ENV  # noqa: E402
from worker.shell.lexer import analyze_word, scan  # noqa: E402

TOOLS = ("strace", "unshare", "bash", "git")
RUN_TIMEOUT = 5.0
SAMPLE_PROJECT = ROOT / "coordinator" / "cli" / "demo" / "sample_project"

# --------------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------------

FILES = [
    "README.md", "src/app.py", "notes.txt", "'a b.txt'", '"a b.txt"', "a\\ b.txt", "src",
    "tests", ".", "..", "/etc/hostname", "*.txt", "src/*.py", "'*.txt'", "-", "--", "~",
    "~/x", "$HOME", "${HOME}", '"$HOME"', "${x:-notes.txt}", "${#x}", "$'notes.txt'",
    "{notes,README}.txt", "not-there", "./-ofoo", "'-ofoo'", "-ofoo", "--output=x",
    "$(id)", "`id`", "$((1+1))", "<(ls)", ">(cat)", "\\$(id)", "'$(id)'", '"a$(id)b"',
]
PATTERNS = ["foo", "'^#'", '"def "', "-e x", "'a|b'", "x.*y", "'\\$'", "'\"'", "'#'"]

AWK_PROGRAMS = [
    "{print $1}", "{ n = /#/; print n }", "{ n = /#/; print n | \"sh\" }", "$1 ~ /[/]#/",
    "{ print $1 / 2 }", "{ x = 1 ? /\"/ : 2; print x }", "{ if (x) /#/; print | \"cat\" }",
    "END { print NR }", "{ s += $1 } END { print s / NR }", "!/^#/", "/a|b/",
    "{ print > \"/dev/null\" }", "{ print $0 > \"out\" }", "BEGIN { system(\"id\") }",
    "{ \"id\" | getline x; print x }", "{ printf \"%s\\n\", $1 }", "{ gsub(/#.*/, \"\"); print }",
    "{ x = $2 /3/ 4 }", "function f() { return /#/ } { print f() | \"sh\" }",
    "{ a[$1]++ } END { for (k in a) print k, a[k] / NR }", "BEGIN { getline < \"x\" }",
    "{ print /#/ ; print | \"sh\" }", "{ x = 1 /\n#/; print | \"sh\" }",
]
SED_SCRIPTS = [
    "p", "1,5p", "s/a/b/g", "s/a/b/w out", "s/a/b/e", "1e id", "w out", "r /etc/passwd",
    "s/[/]/x/w out", "s/[/]/w out/", "y/abc/xyz/", "$!N;P;D", ":a;N;$!ba;s/\\n/ /g",
    "1a hello; w x", "s|/|x|g", "s[a[b[", "/#/d", "s/#/\"/", "=", "l", "q", "n;d",
]
SEPARATORS = [" ; ", " && ", " || ", " | ", " & ", "\n", " |& ", ";\n"]
REDIRECTS = [
    "2>/dev/null", ">/dev/null", "2>&1", ">&2", "< notes.txt", "<<< word", "<<< \"$HOME\"",
    "&>/dev/null", ">&-", "2>&-", "< '/dev/null'", "1>&2-",
    # hostile: all must be refused
    "> out", ">> out", "2> err", "</dev/${v:-tcp}/127.0.0.1/9", "1<&0", "0>&1", ">&3",
    "3>/dev/null", "</dev/\"tcp\"/127.0.0.1/9", "< $f", "<~/x", "< /dev/fd/0", ">/dev/null$x",
    "{fd}>/dev/null", "<> notes.txt", "> >(cat)",
]
WRAPPERS = ["{}", "{}", "{}", "( {} )", "{{ {}; }}", "! {}", "x=1; {}", "FOO=bar {}", "{} #c"]


def _quote(rng: random.Random, word: str) -> str:
    """Re-quote a plain word in one of bash's ways (or leave it)."""
    if not re.fullmatch(r"[A-Za-z0-9_./-]+", word):
        return word
    how = rng.randrange(6)
    if how == 1:
        return f"'{word}'"
    if how == 2:
        return f'"{word}"'
    if how == 3 and len(word) > 1:
        cut = rng.randrange(1, len(word))
        return f"{word[:cut]}'{word[cut:]}'"
    if how == 4:
        return "".join("\\" + c if c.isalpha() and rng.random() < 0.3 else c for c in word)
    return word


def _simple(rng: random.Random) -> str:
    files = lambda k: " ".join(_quote(rng, rng.choice(FILES)) for _ in range(k))  # noqa: E731
    kind = rng.randrange(14)
    if kind == 0:
        prog = rng.choice(AWK_PROGRAMS)
        opt = rng.choice(["", "-F: ", "-v x=1 ", "-e ", "--source="])
        quoted = "'" + prog.replace("'", "'\\''") + "'"
        if opt == "--source=":
            return f"awk --source={quoted} {files(1)}"
        return f"awk {opt}{quoted} {files(rng.randrange(2))}"
    if kind == 1:
        script = rng.choice(SED_SCRIPTS)
        if rng.random() < 0.3:
            script += rng.choice([";", "\n"]) + rng.choice(SED_SCRIPTS)
        opt = rng.choice(["", "-n ", "-E ", "-e ", "-i ", "--posix "])
        return f"sed {opt}'{script}' {files(1)}"
    if kind == 2:
        sub = rng.choice([
            "status", "status --porcelain", "log --oneline -3", "log -p -1", "diff", "diff HEAD",
            "show --stat HEAD", "blame README.md", "branch", "branch -a", "rev-parse HEAD",
            "ls-files", "ls-files -m", "grep -n def", "describe --always --dirty",
            "cat-file -p HEAD", "ls-tree HEAD", "shortlog -sn HEAD", "rev-list --count HEAD",
            "for-each-ref", "count-objects -v", "remote -v", "diff --ext-diff", "push",
            "log --output=x", "-c core.pager=sh log", "-C src status", "-C /tmp status",
            "branch newbranch", "config x.y z", "show HEAD:README.md", "log --format=%H -- src",
        ])
        return f"git {sub}"
    if kind == 3:
        return f"find {rng.choice(['.', 'src', '-L .'])} " + rng.choice([
            "-name '*.py'", "-type f", "-maxdepth 1", "-newer notes.txt", "-print0",
            "-exec id \\;", "-delete", "-fprint out", "-name *.txt", "-empty -print",
        ])
    if kind == 4:
        opt = rng.choice(["", "-n ", "-r ", "-c ", "-l "])
        return f"grep {opt}{rng.choice(PATTERNS)} " + files(rng.randrange(1, 3))
    if kind == 5:
        return f"sort {rng.choice(['', '-rn ', '-u ', '-k2 ', '-o out ', '-t, -k1,1 '])}" + files(1)
    if kind == 6:
        return "echo " + " ".join(_quote(rng, rng.choice(FILES + PATTERNS)) for _ in range(3))
    if kind == 7:
        fmt = rng.choice(["%s", "'%s\\n'", '"%d\\n"', "-v x y"])
        return f"printf {fmt} " + files(2)
    if kind == 8:
        return rng.choice(["cd src", "cd ..", "cd /tmp", "cd", "cd -", "cd tests"])
    if kind == 9:
        return rng.choice([
            "uniq -c notes.txt", "uniq notes.txt out", "tree -L 1", "tree -o out",
            "xxd -l 8 notes.txt",
            "xxd notes.txt out", "base64 notes.txt", "file README.md", "date +%s", "hostname",
            "test -f notes.txt", "[ -d src ]", "jq . data.json", "wc -l", "stat -c %s notes.txt",
            "du -s .", "nl notes.txt", "cut -d: -f1 notes.txt", "tr a-z A-Z", "rev notes.txt",
            "od -c notes.txt", "seq 3", "id", "whoami", "pwd", "true", "false", "which ls",
            "type ls", "realpath .", "readlink -f .", "md5sum notes.txt",
            "diff notes.txt README.md",
        ])
    if kind == 10:
        return rng.choice(["rm notes.txt", "touch x", "curl x", "env", "bash -c id", "tee out"])
    if kind == 11:
        return f"cat {files(rng.randrange(1, 3))}"
    if kind == 12:
        return f"head -n {rng.choice(['2', '$N', '1'])} {files(1)}"
    return f"ls {rng.choice(['', '-la ', '-1 ', '-R '])}{files(rng.randrange(3))}"


def generate(rng: random.Random) -> str:
    """One command from the grammar: wrapped, redirected simple commands joined by separators."""
    parts = []
    for _ in range(1 + (rng.random() < 0.4) + (rng.random() < 0.15)):
        cmd = _simple(rng)
        if rng.random() < 0.35:
            cmd += " " + rng.choice(REDIRECTS)
        parts.append(rng.choice(WRAPPERS).format(cmd))
    text = parts[0]
    for part in parts[1:]:
        text += rng.choice(SEPARATORS) + part
    if rng.random() < 0.08:
        text += "\ncat <<EOF\nplain $HOME ${x:-y} " + rng.choice(["", "$(id)", "`id`"]) + "\nEOF\n"
    return text


def load_corpus() -> list[str]:
    """Every command string of the classifier's test tables (the mutation seeds)."""
    path = ROOT / "tests" / "worker" / "test_shell_classify.py"
    spec = importlib.util.spec_from_file_location("_shell_corpus", path)
    if spec is None or spec.loader is None:
        return []
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    corpus: list[str] = []
    for value in vars(module).values():
        if isinstance(value, list):
            for item in value:
                text = item[0] if isinstance(item, tuple) else item
                if isinstance(text, str) and text.strip():
                    corpus.append(text)
    return corpus


MUTATION_TOKENS = [
    " ", ";", "&", "|", "<", ">", "(", ")", "{", "}", "$", "`", "'", '"', "\\", "#", "\n", "=",
    "*", "~", "/", "-", "&&", "2>&1", "1<&0", "$x", "${x:-tcp}", "$(id)", "/#/", "| \"sh\"",
    "/dev/tcp/", "<<<", "<<EOF\n", "\nEOF\n", "--output=x", "-o", "w x", "e", "| sh",
]


def mutate(rng: random.Random, corpus: list[str]) -> str:
    text = rng.choice(corpus)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(5)
        pos = rng.randrange(len(text) + 1)
        if op == 0:
            text = text[:pos] + rng.choice(MUTATION_TOKENS) + text[pos:]
        elif op == 1 and text:
            text = text[:pos] + text[pos + 1 :]
        elif op == 2 and text:
            end = min(len(text), pos + rng.randrange(1, 8))
            text = text[:end] + text[pos:end] + text[end:]
        elif op == 3:
            text = text + rng.choice(SEPARATORS) + rng.choice(corpus)
        else:
            text = text.replace(rng.choice("'\""), rng.choice("'\""), 1)
    return text


def commands(seed: int, corpus: list[str]) -> Iterator[str]:
    rng = random.Random(seed)
    while True:
        yield mutate(rng, corpus) if corpus and rng.random() < 0.35 else generate(rng)


# --------------------------------------------------------------------------------------------
# Sandbox and runner
# --------------------------------------------------------------------------------------------


def make_template(base: Path) -> Path:
    """The small project every command runs in a fresh copy of (a git repository)."""
    tpl = base / "template"
    if SAMPLE_PROJECT.is_dir():
        shutil.copytree(SAMPLE_PROJECT, tpl, symlinks=True)
    else:  # pragma: no cover - the sample project ships with the repo
        (tpl / "src").mkdir(parents=True)
        (tpl / "src" / "app.py").write_text("def main():\n    return 1\n")
    (tpl / "src").mkdir(exist_ok=True)
    (tpl / "src" / "app.py").write_text("def main():  # a # comment\n    return 1 / 2\n")
    (tpl / "notes.txt").write_text("b 2\na 1\n# c 3\nfoo\"bar\n")
    (tpl / "data.json").write_text('{"a": [1, 2]}\n')
    (tpl / "a b.txt").write_text("spaced\n")
    (tpl / "-ofoo").write_text("dash\n")
    (tpl / "--output=x").write_text("dash\n")
    env = _clean_env(base)
    git = ["git", "-c", "user.name=fuzz", "-c", "user.email=fuzz@invalid",
           "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=tpl, env=env, check=True)
    subprocess.run([*git, "add", "-A"], cwd=tpl, env=env, check=True)
    subprocess.run([*git, "commit", "-qm", "fuzz"], cwd=tpl, env=env, check=True)
    (tpl / "notes.txt").write_text("b 2\na 1\n# c 3\nchanged\n")  # a dirty tree for diff/status
    return tpl


def _clean_env(scratch: Path) -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "LANG": "C.UTF-8",
           "TMPDIR": str(scratch), "TERM": "dumb", **HARDENED_GIT_ENV}
    for key in GIT_ENV_TO_REMOVE:
        env.pop(key, None)
    return env


# Inside the new mount namespace: make the project copy read-only, as the containment profile
# does ("the project read-only, always"), then exec the rest of the argv in it.
_READ_ONLY_PROJECT = [
    "sh", "-c",
    'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && cd "$0" && exec "$@"',
]


@dataclass
class RunResult:
    traces: dict[int, str]  # pid -> strace lines of that process
    returncode: int | None  # None: timed out (killed)


def run_traced(command: str, workdir: Path, scratch: Path, timeout: float) -> RunResult:
    """Run ``command`` with bash in ``workdir``, isolated and traced; the swappable runner."""
    prefix = scratch / "trace"
    argv = [
        "unshare", "--user", "--map-root-user", "--net", "--mount", *_READ_ONLY_PROJECT,
        str(workdir), "strace", "-ff", "-qq", "-o", str(prefix),
        "-e", "trace=%process,%file,%network,%signal,chmod,fchmod,chown,fchown,lchown,"
              "utime,utimes,utimensat,futimesat,truncate,ftruncate,mknod,mknodat,mount",
        "-e", "signal=none",
        "bash", "--noprofile", "--norc", "-c", command,
    ]
    try:
        proc = subprocess.run(argv, cwd=workdir, env=_clean_env(scratch),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=timeout,
                              start_new_session=True)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        rc = None
    traces: dict[int, str] = {}
    for path in scratch.glob("trace.*"):
        try:
            traces[int(path.suffix[1:])] = path.read_text(errors="replace")
        except ValueError:
            continue
    return RunResult(traces, rc)


# --------------------------------------------------------------------------------------------
# Trace analysis
# --------------------------------------------------------------------------------------------

_SYSCALL_RE = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\d+|\?|0x[0-9a-f]+)(.*)$")
_STR_RE = re.compile(r'"((?:[^"\\]|\\.)*)"')
_MODIFYING = (
    "connect", "bind", "unlink", "unlinkat", "rename", "renameat", "renameat2", "chmod",
    "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
    "utimensat", "futimesat", "mknod", "mknodat", "mount", "umount2", "mkdir", "mkdirat",
    "rmdir", "link", "linkat", "symlink", "symlinkat", "truncate", "ftruncate", "listen",
    "sendto", "sendmsg", "pivot_root", "chroot", "setxattr", "lsetxattr", "fsetxattr",
    "removexattr", "lremovexattr", "fremovexattr",
)
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")
_OK_WRITE_PATHS = ("/dev/null", "/dev/tty")
_GIT_EXEC_DIRS = ("/usr/lib/git-core/", "/usr/libexec/git-core/")


@dataclass
class Finding:
    command: str
    kind: str
    detail: str


def _allowed_exec(path: str, argv0: str, commands: list[str], first: bool) -> bool:
    """Is this execve one the classifier's verdict accounts for?

    The first exec is bash itself. Every other exec must be a program whose name is one of the
    command names the classifier saw, found on PATH (a relative or odd path is never allowed).
    git may exec its own builtins and helpers from its exec path (``git-core``) when the
    command uses git: they are git itself, run with the same hardened environment.
    """
    if first:
        return os.path.basename(path) == "bash"
    name = os.path.basename(path)
    on_path = path.startswith(("/usr/bin/", "/bin/", "/usr/local/bin/"))
    if on_path and name in commands:
        return True
    return "git" in commands and path.startswith(_GIT_EXEC_DIRS) and name.startswith("git")


def analyse(command: str, commands: list[str], result: RunResult, scratch: Path,
            workdir: Path) -> list[Finding]:
    findings: list[Finding] = []
    pids = set(result.traces)
    # The traced bash is the process whose first syscall execs bash with our flags (not the
    # lowest pid: pids wrap around, which made a run report bash itself once).
    first_pid = next(
        (pid for pid, text in result.traces.items()
         if text.lstrip().startswith("execve(") and '"--noprofile", "--norc", "-c"' in
         text.split("\n", 1)[0]),
        -1,
    )
    for pid, text in sorted(result.traces.items()):
        cwd = str(workdir)
        for line in text.splitlines():
            m = _SYSCALL_RE.match(line)
            if m is None:
                continue
            name, args, ret = m.group(1), m.group(2), m.group(3)
            strings = _STR_RE.findall(args)
            if name in ("execve", "execveat"):
                path = strings[0] if strings else "?"
                if (ret != "0" and "ENOENT" in m.group(4)
                        and os.path.basename(path) in commands):
                    continue  # PATH search of an allowed name
                first = pid == first_pid and path.endswith("/bash")
                if not _allowed_exec(path, strings[1] if len(strings) > 1 else "", commands,
                                     first):
                    findings.append(Finding(command, "execve", f"pid {pid}: {path}"))
            elif name == "chdir" and ret == "0" and strings:
                cwd = os.path.normpath(os.path.join(cwd, strings[0]))
            elif name in ("open", "openat", "creat", "open_by_handle_at", "openat2"):
                flags = args
                if name == "creat" or any(flag in flags for flag in _WRITE_FLAGS):
                    path = strings[0] if strings else "?"
                    full = os.path.normpath(os.path.join(cwd, path))
                    if full in _OK_WRITE_PATHS or full.startswith(str(scratch) + "/"):
                        continue
                    if (ret.startswith("-") and "EROFS" in m.group(4)
                            and full.endswith("/.git/index.lock") and "git" in commands):
                        # git diff/describe refresh the index's stat cache when they can take
                        # its lock; on the read-only project they cannot and go on reading.
                        continue
                    findings.append(Finding(command, "open-write", f"{line.strip()[:160]}"))
            elif name in _MODIFYING:
                if name in ("connect", "sendto", "sendmsg") and _nss_probe(args):
                    continue
                findings.append(Finding(command, name, line.strip()[:160]))
            elif name in ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "pidfd_send_signal"):
                target = args.split(",", 1)[0].strip()
                try:
                    target_pid = int(target)
                except ValueError:
                    findings.append(Finding(command, name, line.strip()[:160]))
                    continue
                if target_pid not in pids and target_pid != 0:
                    findings.append(Finding(command, name, line.strip()[:160]))
    return findings


def _nss_probe(args: str) -> bool:
    """glibc's name-service lookups (id, whoami, ls -l) try nscd's local socket: not a finding."""
    return "AF_UNIX" in args and "/var/run/nscd/socket" in args


# --------------------------------------------------------------------------------------------
# Parser and word differentials
# --------------------------------------------------------------------------------------------


def bash_parses(command: str) -> bool:
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-n", "-c", command],
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    return proc.returncode == 0 and not proc.stderr


def literal_commands(command: str) -> list[tuple[list[str], list[str]]] | None:
    """(source words, classifier's derived values) of each simple command, all words literal.

    None when some word is not a literal (an expansion, glob or brace: bash decides it later,
    so there is nothing to compare) or the command is not made only of simple commands.
    """
    lexed = scan(command)
    if lexed.error is not None:
        return None
    found: list[tuple[list[str], list[str]]] = []
    for statement in lexed.statements:
        try:
            trees = bashlex.parse(statement)
        except Exception:
            return None
        stack = list(trees)
        while stack:
            node = stack.pop()
            kind = node.kind
            if kind == "command":
                raws: list[str] = []
                values: list[str] = []
                for part in node.parts:
                    if part.kind == "redirect" and part.type in ("<<", "<<-"):
                        return None
                    if part.kind != "word":
                        continue
                    raw = statement[part.pos[0] : part.pos[1]]
                    value = analyze_word(raw).literal_value()
                    if value is None:
                        return None
                    raws.append(raw)
                    values.append(value)
                if raws:  # a bare assignment has no words to compare
                    found.append((raws, values))
            elif kind in ("list", "pipeline"):
                stack.extend(p for p in node.parts if p.kind not in ("operator", "pipe"))
            elif kind == "compound":
                stack.extend(p for p in node.list if p.kind not in ("reservedword", "operator"))
            elif kind not in ("operator", "pipe", "reservedword"):
                return None
    return found


def word_differential(command: str, workdir: Path, scratch: Path) -> str | None:
    """Compare bash's expansion of each word with the classifier's derived text."""
    cmds = literal_commands(command)
    if not cmds:
        return None
    script = "\n".join("printf '%s\\0' " + " ".join(raws) + "; printf '\\1'"
                       for raws, _ in cmds)
    argv = ["unshare", "--user", "--map-root-user", "--net", "--mount",
            "bash", "--noprofile", "--norc", "-c", script]
    try:
        proc = subprocess.run(argv, cwd=workdir, env=_clean_env(scratch),
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        return "word harness timed out"
    groups = proc.stdout.decode("utf-8", "surrogateescape").split("\1")
    for (raws, values), group in zip(cmds, groups, strict=False):
        got = group.split("\0")[:-1]
        if got != values:
            return f"bash expands {raws!r} to {got!r}, classifier derived {values!r}"
    return None


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


@dataclass
class Report:
    seed: int
    tried: int = 0
    read_only: int = 0
    executed: int = 0
    timeouts: int = 0
    word_checked: int = 0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)


def check_one(
    command: str, template: Path, base: Path, index: int
) -> tuple[bool, list[Finding], bool]:
    """(word-checked, findings, timed out) for one read-only command."""
    findings: list[Finding] = []
    verdict = classify(command)
    if not bash_parses(command):
        return False, [Finding(command, "parse-differential", "bash -n rejects it")], False
    scratch = base / f"s{index}"
    workdir = base / f"w{index}"
    shutil.copytree(template, workdir, symlinks=True)
    scratch.mkdir()
    try:
        diff = word_differential(command, workdir, scratch)
        checked = literal_commands(command) is not None
        if diff:
            findings.append(Finding(command, "word-differential", diff))
        result = run_traced(command, workdir, scratch, RUN_TIMEOUT)
        findings.extend(analyse(command, verdict.commands, result, scratch, workdir))
        return checked, findings, result.returncode is None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def isolation_works() -> str | None:
    """None when unshare+strace run here, else why not."""
    try:
        proc = subprocess.run(
            ["unshare", "--user", "--map-root-user", "--net", "--mount",
             "strace", "-qq", "-o", "/dev/null", "true"],
            capture_output=True, timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare/strace failed: {exc}"
    if proc.returncode != 0:
        return "unshare/strace failed: " + proc.stderr.decode(errors="replace").strip()[:200]
    return None


def fuzz(count: int, seed: int, seconds: float | None, jobs: int) -> Report:
    report = Report(seed=seed)
    start = time.monotonic()
    corpus = load_corpus()
    base = Path(tempfile.mkdtemp(prefix="fuzz-shell-"))
    try:
        template = make_template(base)
        gen = commands(seed, corpus)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            pending = []
            while report.tried < count:
                if seconds is not None and time.monotonic() - start > seconds:
                    break
                command = next(gen)
                report.tried += 1
                if not classify(command).read_only:
                    continue
                report.read_only += 1
                pending.append(pool.submit(check_one, command, template, base, report.tried))
                if len(pending) >= jobs * 4:
                    _collect(pending[: jobs * 2], report)
                    pending = pending[jobs * 2 :]
            _collect(pending, report)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report.seconds = round(time.monotonic() - start, 1)
    return report


def _collect(futures: list[Future[tuple[bool, list[Finding], bool]]], report: Report) -> None:
    for future in futures:
        checked, findings, timed_out = future.result()
        report.executed += 1
        report.word_checked += int(checked)
        report.timeouts += int(timed_out)
        report.findings.extend(findings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    missing = missing_tools()
    if missing:
        print(f"fuzz_shell: missing tools: {', '.join(missing)} "
              "(scripts/_system_deps.sh installs strace)", file=sys.stderr)
        return 2
    problem = isolation_works()
    if problem:
        print(f"fuzz_shell: {problem}", file=sys.stderr)
        return 2
    report = fuzz(args.count, args.seed, args.seconds, args.jobs)
    if args.json:
        out = asdict(report)
        print(json.dumps(out))
    else:
        print(f"{'seed':<16}{report.seed}")
        print(f"{'tried':<16}{report.tried}")
        print(f"{'read-only':<16}{report.read_only}")
        print(f"{'run traced':<16}{report.executed}")
        print(f"{'word-checked':<16}{report.word_checked}")
        print(f"{'timeouts':<16}{report.timeouts}")
        print(f"{'findings':<16}{len(report.findings)}")
        print(f"{'seconds':<16}{report.seconds}")
        for finding in report.findings:
            print(f"\nFINDING {finding.kind}: {finding.command!r}\n  {finding.detail}")
    return 1 if report.findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
