"""Does a main-chat shell command write a protected or runs-later path? Read from the
bash parse tree, never from the text.

A main-chat command that is not read-only runs as the person does (``yolo``, a yes, or a
yes kept for the session), outside any sandbox. When it would write what a later
unsandboxed run executes (``.git/config``, a hook, ``.envrc``, a CI workflow,
``.specrun/settings.json``…: ``protocol.rules.protected_writes``), it asks first whatever
the mode, and such a yes is never kept. It writes such a path when, in the parse tree,

- an output redirect (``>``, ``>>``, ``>|``, ``&>``, ``&>>``, ``<>``, ``>&FILE``) targets it,
- an argument of a command that is not read-only (``cp``, ``tee``, ``mv``, ``sed -i``,
  ``git checkout -- F``…) names it, also as the value of ``--opt=PATH``, or a glob matches it,
- it is ``git config`` (other than a read), ``git -c``/``--config-env``, ``git remote add`` or
  ``set-url`` (git's configuration runs programs on the person's next git command),
- the parser cannot read it, or it changes to a directory only known at run time.

Paths resolve lexically against the project root and every directory a ``cd`` (or
``git -C``) before them may have moved to, with ``..`` folded and links resolved. Words
with a run-time expansion are judged as written (``.git/hooks/$n`` is under ``.git``);
a path the command computes at run time (``> "$f"``, ``python -c 'open(...)'``) is not seen.
A command the read-only classifier accepts (``cat .git/config``, ``git status``) writes
nothing and never asks. ``sh -c``, ``bash -c`` and ``eval`` strings are read the same way.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from protocol.rules.protected_writes import protected_write
from protocol.wire.work import WriteGuard
from worker.shell.bashlex_tables import bashlex
from worker.shell.classifier import classify
from worker.shell.lexer import analyze_word, scan

UNREADABLE = ("specrun could not read this command well enough to see which files it "
              "writes (it may write git's configuration or a file that runs later)")
_RUNTIME_DIR = ("it changes to a directory only known at run time, so specrun cannot see "
                "whether it writes git's configuration or a file that runs later")
_GIT_CONFIG = ("it changes git's configuration ({what}): git runs programs it names on your "
               "next git command, outside any sandbox")
_OUTPUT = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "busybox"})
_MAX_DEPTH = 4  # nested sh -c / eval strings read


class _Found(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def protected_write_reason(command: str, guard: WriteGuard) -> str | None:
    """Why ``command`` must ask whatever the approval mode (one clause), or None.

    The one implementation of this rule: the worker asks it before running a main-chat
    command, and the coordinator asks it again itself (a worker's reply is not trusted)."""
    try:
        _Reader(guard).text(command, 0)
    except _Found as found:
        return found.reason
    except Exception:  # anything unexpected: ask
        return UNREADABLE
    return None


def protected_write_paths(command: str, guard: WriteGuard) -> tuple[tuple[str, ...], bool]:
    """The protected paths ``command`` names as written (absolute; ``git config`` as the
    ``.git/config`` of the directory it runs in), and whether its question named no path
    at all (specrun could not read it, or it changes to a directory known only at run
    time): what a yes to :func:`protected_write_reason`'s question lets it write."""
    reader = _Reader(guard, collect=True)
    try:
        reader.text(command, 0)
    except _Found:
        return tuple(dict.fromkeys(reader.paths)), True
    except Exception:
        return tuple(dict.fromkeys(reader.paths)), True
    return tuple(dict.fromkeys(reader.paths)), False


def _node_children(n: Any) -> list[Any]:
    out: list[Any] = []
    for value in vars(n).values():
        if hasattr(value, "kind"):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if hasattr(v, "kind"))
    return out


class _Reader:
    def __init__(self, guard: WriteGuard, *, collect: bool = False) -> None:
        self.guard = guard
        # collect: note every protected path and read on, instead of stopping at the first
        self.collect = collect
        self.paths: list[str] = []
        # Directories the following commands may run in; None: only known at run time.
        self.cwds: list[str | None] = [guard.root]

    def text(self, command: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise _Found(UNREADABLE)
        text = command.replace("\r\n", "\n")
        if not text.strip():
            return
        for source, trees in self._parse(text):
            for tree in trees:
                self.node(tree, source, depth)

    def _parse(self, text: str) -> list[tuple[str, list[Any]]]:
        """The whole text parsed at once (bashlex reads compounds across lines), else
        statement by statement as the lexer splits them; every non-blank character must be
        in the parse (bashlex has been seen to stop early)."""
        try:
            trees = bashlex.parse(text)
            if _covers(text, trees):
                return [(text, trees)]
        except Exception:
            pass
        lexed = scan(text)
        if lexed.error is not None:
            raise _Found(UNREADABLE)
        out: list[tuple[str, list[Any]]] = []
        for statement in lexed.statements:
            try:
                trees = bashlex.parse(statement)
            except Exception:
                raise _Found(UNREADABLE) from None
            if not _covers(statement, trees):
                raise _Found(UNREADABLE)
            out.append((statement, trees))
        return out

    def node(self, n: Any, src: str, depth: int) -> None:
        kind = getattr(n, "kind", None)
        if kind == "command":
            self.command(n, src, depth)
        elif kind == "redirect":
            self.redirect(n, src)
        else:
            for child in _node_children(n):
                self.node(child, src, depth)

    def command(self, n: Any, src: str, depth: int) -> None:
        words: list[Any] = []
        for part in n.parts:
            if part.kind == "redirect":
                self.redirect(part, src)
            elif part.kind == "word" or (part.kind == "assignment" and words):
                words.append(part)
            # substitutions inside any part run first, wherever they are
            for child in _node_children(part):
                if part.kind != "redirect":
                    self.node(child, src, depth)
        if not words:
            return
        infos = [analyze_word(_raw(src, w)) for w in words]
        name = os.path.basename(infos[0].value)
        if name in ("cd", "pushd"):
            self.change_dir(infos[1:])
            return
        if classify(_raw(src, n)).read_only:
            return  # writes nothing (and its redirects were judged above)
        cwds = list(self.cwds)
        values = [i.value for i in infos]
        if "git" in (os.path.basename(v) for v in values):
            at = [os.path.basename(v) for v in values].index("git")
            cwds = self.git(values[at + 1 :], cwds)
        for at, value in enumerate(values):
            if os.path.basename(value) in _SHELLS and "-c" in values[at + 1 :]:
                script = values[at + 1 :][values[at + 1 :].index("-c") + 1 :]
                if script:
                    self.text(script[0], depth + 1)
            if value == "eval":
                self.text(" ".join(values[at + 1 :]), depth + 1)
        for info in infos[1:]:
            value = info.value
            if value.startswith("-"):
                if "=" not in value:
                    continue
                value = value.split("=", 1)[1]
            self.judge(value, cwds, info.glob)

    def git(self, args: list[str], cwds: list[str | None]) -> list[str | None]:
        """git's global options and the subcommands that change its configuration; the
        directories its paths resolve in (``-C``)."""
        i = 0
        while i < len(args) and args[i].startswith("-"):
            opt = args[i]
            # one run's settings: no file is written, so a yes opens no path
            if (opt == "-c" or opt.startswith(("-c", "--config-env"))) and not self.collect:
                raise _Found(_GIT_CONFIG.format(what="git -c"))
            if opt == "-C" and i + 1 < len(args):
                cwds = [_join(c, args[i + 1]) for c in cwds]
                i += 2
                continue
            i += 1
        sub = args[i : i + 2]
        writes = None
        if sub[:1] == ["config"] and not _git_config_reads(args[i + 1 :]):
            writes = _GIT_CONFIG.format(what="git config")
        if sub[:1] == ["remote"] and sub[1:] and sub[1] in ("add", "set-url"):
            writes = _GIT_CONFIG.format(what=f"git remote {sub[1]}")
        if writes is not None:
            if not self.collect:
                raise _Found(writes)
            self.paths += [os.path.join(c, ".git", "config") for c in cwds if c is not None]
            if None in cwds:
                raise _Found(_RUNTIME_DIR)
        return cwds

    def change_dir(self, args: list[Any]) -> None:
        operands = [a for a in args if not a.value.startswith("-")]
        if not operands:
            self.cwds = [os.path.expanduser("~")] if not args else [None]
            return
        target = operands[0]
        if not target.static:
            self.cwds = [None]
            return
        value = os.path.expanduser(target.value)
        # every place it may have moved to (a failed cd stays): ask on any of them
        self.cwds = list(dict.fromkeys([*self.cwds, *(_join(c, value) for c in self.cwds)]))

    def redirect(self, r: Any, src: str) -> None:
        target = getattr(r, "output", None)
        if not hasattr(target, "kind"):
            return  # a descriptor number (2>&1)
        rtype = r.type
        word = analyze_word(_raw(src, target))
        if rtype == ">&" and (word.value.isdigit() or word.value == "-"):
            return
        if rtype in _OUTPUT or rtype == ">&":
            self.judge(word.value, self.cwds, word.glob)

    def judge(self, value: str, cwds: list[str | None], has_glob: bool) -> None:
        if not value:
            return
        if value.startswith("~"):
            value = os.path.expanduser(value)
        for cwd in cwds:
            if cwd is None:
                if os.path.isabs(value):
                    cwd = self.guard.root
                else:
                    raise _Found(_RUNTIME_DIR)
            why = protected_write(self.guard, value, cwd)
            if why is not None:
                self.found(why, os.path.normpath(os.path.join(cwd, value)))
            if has_glob:
                base = value if os.path.isabs(value) else os.path.join(cwd, value)
                for match in glob.glob(base, include_hidden=True)[:1000]:
                    why = protected_write(self.guard, match)
                    if why is not None:
                        self.found(why, match)

    def found(self, reason: str, path: str) -> None:
        if not self.collect:
            raise _Found(reason)
        self.paths.append(path)


_CONFIG_READ_OPTIONS = frozenset({
    "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color",
    "--get-colorbool", "--list", "-l",
})
_CONFIG_WRITE_OPTIONS = frozenset({
    "--add", "--unset", "--unset-all", "--replace-all", "--rename-section",
    "--remove-section", "--edit", "-e",
})


def _git_config_reads(args: list[str]) -> bool:
    """``git config`` only reads: ``--get``/``--list`` and friends, ``get``/``list``, or
    one key and nothing else; any write option or form is a write."""
    options = [a.split("=", 1)[0] for a in args if a.startswith("-")]
    operands = [a for a in args if not a.startswith("-")]
    if any(o in _CONFIG_WRITE_OPTIONS for o in options):
        return False
    if any(o in _CONFIG_READ_OPTIONS for o in options):
        return True
    if operands[:1] in (["get"], ["list"]):
        return True
    return len(operands) == 1 and not options and operands[0] not in (
        "set", "unset", "edit", "rename-section", "remove-section")


def _join(cwd: str | None, path: str) -> str | None:
    if cwd is None and not os.path.isabs(path):
        return None
    return os.path.normpath(os.path.join(cwd or "/", os.path.expanduser(path)))


def _raw(src: str, node: Any) -> str:
    start, end = node.pos
    return src[start:end]


def _covers(text: str, trees: list[Any]) -> bool:
    covered = bytearray(len(text))

    def mark(n: Any) -> None:
        start, end = getattr(n, "pos", (0, 0))
        covered[max(start, 0) : max(end, 0)] = b"\x01" * (max(end, 0) - max(start, 0))
        for child in _node_children(n):
            mark(child)

    for tree in trees:
        if not hasattr(tree, "kind"):
            return False
        mark(tree)
    return all(covered[i] or ch.isspace() for i, ch in enumerate(text))
