"""Read-only classification of shell commands (design §4), failing closed.

Pipeline for one command string:

1. reject blank input, over-long input and control characters (``\\r\\n`` is read as a newline;
   a lone ``\\r`` is refused because it could hide a second command from a reviewer);
2. :mod:`worker.shell.lexer` splits top-level statements itself (newline, ``;``, ``&``), strips
   comments and line continuations, re-attaches here-document bodies and records every lexical
   sign of an expansion or output redirection;
3. each statement is parsed by bashlex; every top-level node is walked, and the parse must cover
   every non-blank character of the statement (bashlex has been seen to stop early);
4. decisions come from the parse tree: node kinds, redirect types, substitution nodes, the
   command word and its arguments (argument text is re-derived from the source with
   :func:`worker.shell.lexer.analyze_word`, because bashlex's ``word`` drops quoting);
5. the lexical findings are a backstop: a statement the tree calls read-only is still refused
   when the scanner saw an expansion bashlex missed (e.g. ``echo 'a'$(touch x)'b'``).

Any exception anywhere makes the verdict "not read-only".

Decisions where design §4 is silent:

* output redirection to a literal ``/dev/null`` (any of ``>``, ``>>``, ``&>``, ``>&``…) on
  fd 1 or 2 is harmless and allowed; fd duplication only among 1 and 2 (``2>&1``, ``>&2``)
  and closing 1 or 2 (``>&-``) are allowed; input only on fd 0 from a literal path (no
  expansion, no quote concatenation) that is not a socket or descriptor alias
  (``/dev/tcp|udp``, ``/dev/fd``, ``/dev/std*``, ``/proc/…``); every other output target,
  ``<>``, ``{var}>``/``{var}<`` is refused (see ``_Walker.redirect``);
* a command name must be a plain unquoted word from the allow list; paths (``/bin/ls``,
  ``./ls``) are refused even for allowed basenames (a relative path runs project files, and
  an absolute one would bypass the runner's git wrapper);
* ``git -C DIR`` is allowed (it is ``cd DIR && git``, and ``cd`` is allowed);
  ``--git-dir``/``--work-tree`` and every other global option that is not purely cosmetic are
  refused; ``git remote show NAME`` is refused unless ``-n`` (it contacts the remote);
* a bare assignment is read-only unless it changes a variable that the following commands or
  bash itself act on (``PATH``, ``HOME``, ``IFS``, ``GIT_*``, ``LD_*``, ``XDG_*``…), or
  assigns an array element;
* commands whose options can write or execute need their option words known now: no ``$VAR``,
  no brace expansion, no glob that could expand to a ``-`` name (``sort *`` with a file named
  ``-ofoo`` is a write);
* ``test``/``[`` with ``-v``/``-R`` and ``printf -v`` are refused (they evaluate array
  subscripts, which can run command substitutions held in a variable);
* input over 16 KiB is refused outright, to bound the cost of a check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from worker.shell.bashlex_tables import bashlex
from worker.shell.commands import command_problem
from worker.shell.lexer import (
    SAFE_SINKS,
    WordInfo,
    analyze_word,
    assignment_name,
    heredoc_body_problem,
    is_plain_name,
    parameter_problem,
    scan,
)

MAX_COMMAND_CHARS = 16 * 1024  # longer commands are refused outright (bounded cost)

READ_ONLY_REASON = "read-only: every command in allow list"
ASSIGNMENT_ONLY_REASON = "read-only: assignments only"

# Variables a bare assignment may not change. Assigning to a variable that is already exported
# changes what the following commands see: the read-only runner exports exactly PATH, HOME,
# LANG, LC_ALL and TERM, but the main chat's shell inherits the user's environment, so the list
# also covers variables that make git, glibc or the allowed tools load code or config.
_SENSITIVE_VARIABLES = frozenset({
    "PATH", "HOME", "IFS", "CDPATH", "GLOBIGNORE", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS",
    "PS4", "PROMPT_COMMAND", "TMPDIR", "TERM", "SHELL", "LANG", "LANGUAGE", "TZ", "PAGER",
    "MANPAGER", "EDITOR", "VISUAL", "OLDPWD", "PWD", "HISTFILE", "POSIXLY_CORRECT",
    "RIPGREP_CONFIG_PATH", "GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES", "AWKPATH",
    "AWKLIBPATH", "MAGIC", "JQ_LIBRARY_PATH", "GNUPGHOME", "SSH_AUTH_SOCK",
})
# GIT_*, LD_*, glibc and interpreter hooks, and XDG_* (git reads $XDG_CONFIG_HOME/git/config).
_SENSITIVE_PREFIXES = (
    "LC_", "GIT_", "LD_", "BASH_", "LESS", "PYTHON", "NODE_", "PERL", "RUBY", "XDG_",
    "MALLOC_", "GLIBC_",
)

_FD_VAR_RE = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
# Redirect targets written with plain characters only (no quoting, expansion, glob or brace).
_PLAIN_TARGET_RE = re.compile(r"[A-Za-z0-9_./+:@%=-]+")
# Input paths bash treats specially (sockets, descriptor aliases) or that alias descriptors.
_SOCKET_RE = re.compile(r"dev/+(tcp|udp)")
_SPECIAL_INPUT_RE = re.compile(r"dev/+(tcp|udp|fd|std(in|out|err))|/proc/|^proc/")


@dataclass(frozen=True)
class ShellVerdict:
    """Outcome of :func:`classify`.

    ``reason`` names the rule that decided (``redirect:>``, ``command:rm``, ``git:push``,
    ``parse-error:…``, or ``read-only: every command in allow list``); ``commands`` lists the
    command names seen, in order.
    """

    read_only: bool
    reason: str
    commands: list[str] = field(default_factory=list)

    @property
    def uses_git(self) -> bool:
        """True when the command runs git: the caller must then check the repository's
        configuration (:func:`worker.shell.git_config.git_config_hazard`) and run git with the
        hardened environment and options from the same module."""
        return "git" in self.commands


def classify(command: object) -> ShellVerdict:
    """Decide whether ``command`` is provably read-only. Never raises."""
    try:
        return _classify(command)
    except Exception as exc:  # fail closed on anything unexpected
        return ShellVerdict(False, f"internal-error:{type(exc).__name__}", [])


def _classify(command: object) -> ShellVerdict:
    if not isinstance(command, str):
        return ShellVerdict(False, "bad-input: not a string", [])
    if not command.strip():
        return ShellVerdict(False, "empty", [])
    if len(command) > MAX_COMMAND_CHARS:
        return ShellVerdict(False, f"too-long: over {MAX_COMMAND_CHARS} characters", [])
    text = command.replace("\r\n", "\n")
    for ch in text:
        code = ord(ch)
        if (code < 32 and ch not in "\t\n") or code == 127:
            return ShellVerdict(False, f"control-char:U+{code:04X}", [])

    lexed = scan(text)
    if lexed.error is not None:
        if lexed.findings:
            return ShellVerdict(False, lexed.findings[0], [])
        keyword = _leading_keyword(text)
        return ShellVerdict(False, keyword or f"parse-error: {lexed.error}", [])
    if not lexed.statements:
        return ShellVerdict(False, "empty", [])

    commands: list[str] = []
    dirs: list[WordInfo | None] = []
    first_reason: str | None = None
    for statement in lexed.statements:
        walker = _Walker(statement, commands, dirs)
        reason = walker.run()
        if reason is not None and first_reason is None:
            first_reason = reason
    if first_reason is None and "git" in commands and not all(map(_inside_project, dirs)):
        # git reads the configuration of the repository it finds from its working directory;
        # the hazard check only covers repositories inside the project (and the one above it).
        first_reason = "git:directory outside the project"
    if first_reason is not None:
        if first_reason.startswith("parse-error") and lexed.findings:
            first_reason = lexed.findings[0]
        return ShellVerdict(False, first_reason, commands)
    if lexed.findings:
        return ShellVerdict(False, lexed.findings[0], commands)
    return ShellVerdict(True, READ_ONLY_REASON if commands else ASSIGNMENT_ONLY_REASON, commands)


def _inside_project(word: WordInfo | None) -> bool:
    """A ``cd``/``git -C`` directory that stays inside the project: relative, literal, no ``..``."""
    if word is None:
        return False
    value = word.literal_value()
    if value is None or not value or value.startswith(("/", "~", "-")):
        return False
    return ".." not in value.split("/")


def _git_dirs(args: list[WordInfo]) -> list[WordInfo | None]:
    """The ``-C DIR`` values among git's global options (before the subcommand)."""
    found: list[WordInfo | None] = []
    i = 0
    while i < len(args) and args[i].value.startswith("-"):
        if args[i].value == "-C":
            found.append(args[i + 1] if i + 1 < len(args) else None)
            i += 2
            continue
        i += 1
    return found


_KEYWORD_REASONS = {
    "if": "compound:if", "for": "compound:for", "while": "compound:while",
    "until": "compound:until", "case": "compound:case", "select": "compound:select",
    "function": "function", "coproc": "construct:coproc", "time": "construct:time",
    "[[": "construct:[[", "((": "arithmetic:((...))",
}


def _leading_keyword(statement: str) -> str | None:
    """Reason for a statement bashlex could not parse that opens with a refused keyword.

    The statement splitter cuts ``if a; then b; fi`` at its semicolons, so such pieces never
    parse; naming the keyword gives a clearer reason than the parse error.
    """
    stripped = statement.lstrip(" \t\n")
    if stripped.startswith("(("):
        return _KEYWORD_REASONS["(("]
    words = stripped.lstrip(" \t\n(").split(None, 1)
    return _KEYWORD_REASONS.get(words[0]) if words else None


class _Walker:
    """Walks the bashlex trees of one statement; the first refusal wins."""

    def __init__(self, src: str, commands: list[str], dirs: list[WordInfo | None]) -> None:
        self.src = src
        self.commands = commands
        # Directories a "cd" or "git -C" moves to (None: to $HOME / $OLDPWD).
        self.dirs = dirs
        self.reason: str | None = None

    def refuse(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason

    def run(self) -> str | None:
        try:
            trees = bashlex.parse(self.src)
        except Exception as exc:  # ParsingError, NotImplementedError, AttributeError…
            keyword = _leading_keyword(self.src)
            if keyword is not None:
                return keyword
            detail = str(exc).splitlines()[0][:80] if str(exc) else ""
            return f"parse-error: {type(exc).__name__}" + (f": {detail}" if detail else "")
        covered = bytearray(len(self.src))
        for tree in trees:
            if not hasattr(tree, "kind"):
                return "parse-error: unexpected parse result"
            self.mark(covered, tree.pos)
            self.node(tree, covered)
        for idx, ch in enumerate(self.src):
            if not covered[idx] and not ch.isspace():
                return f"parse-error: text the parser skipped at offset {idx}"
        return self.reason

    @staticmethod
    def mark(covered: bytearray, pos: tuple[int, int]) -> None:
        start, end = pos
        covered[max(start, 0) : max(end, 0)] = b"\x01" * (max(end, 0) - max(start, 0))

    def raw(self, node: Any) -> str:
        start, end = node.pos
        return self.src[start:end]

    # -- structure ------------------------------------------------------------------------------

    def node(self, n: Any, covered: bytearray) -> None:
        kind = n.kind
        if kind == "list":
            for part in n.parts:
                if part.kind == "operator":
                    continue
                self.node(part, covered)
        elif kind == "pipeline":
            for part in n.parts:
                if part.kind == "pipe" or (part.kind == "reservedword" and part.word == "!"):
                    continue
                self.node(part, covered)
        elif kind == "compound":
            self.compound(n, covered)
        elif kind == "command":
            self.command(n, covered)
        elif kind == "function":
            name = getattr(getattr(n, "name", None), "word", "?")
            self.refuse(f"function:{name}")
        else:
            self.refuse(f"construct:{kind}")

    def compound(self, n: Any, covered: bytearray) -> None:
        items = list(n.list)
        first = items[0] if items else None
        if first is None:
            self.refuse("construct:empty compound")
            return
        if first.kind == "reservedword" and first.word in ("(", "{"):
            for inner in items[1:-1]:
                self.node(inner, covered)
        elif first.kind in ("if", "for", "while", "until"):
            self.refuse(f"compound:{first.kind}")
        else:
            self.refuse(f"compound:{first.kind}")
        for redirect in n.redirects:
            self.redirect(redirect, covered)

    # -- simple commands ------------------------------------------------------------------------

    def command(self, n: Any, covered: bytearray) -> None:
        assignments: list[Any] = []
        words: list[Any] = []
        redirects: list[Any] = []
        for part in n.parts:
            if part.kind == "assignment":
                (words if words else assignments).append(part)
            elif part.kind == "word":
                words.append(part)
            elif part.kind == "redirect":
                redirects.append(part)
            else:
                self.refuse(f"construct:{part.kind}")
                return
        if words:
            self.commands.append(self.raw(words[0]))
        for part in assignments + words:
            self.expansions(part)
        for word in words:
            # bashlex reads "{fd}>file" as a word then a redirect; bash allocates a descriptor
            # and assigns it to the variable.
            follows = self.src[word.pos[1] : word.pos[1] + 1]
            if follows in ("<", ">") and _FD_VAR_RE.fullmatch(self.raw(word)):
                self.refuse("redirect:{var}")
        for redirect in redirects:
            self.redirect(redirect, covered)
        if words and assignments:
            name = assignment_name(self.raw(assignments[0])) or "?"
            self.refuse(f"assignment-prefix:{name}")
            return
        if not words:
            for assignment in assignments:
                self.bare_assignment(assignment)
            return
        name_raw = self.raw(words[0])
        if not is_plain_name(name_raw):
            if "/" in name_raw:
                self.refuse("command-name:path")
            else:
                self.refuse("command-name:not a plain word")
            return
        args = [analyze_word(self.raw(w)) for w in words[1:]]
        if name_raw == "cd":
            operands = [a for a in args if not a.value.startswith("-") or a.value == "-"]
            self.dirs.extend(operands if operands else [None])
        elif name_raw == "git":
            self.dirs.extend(_git_dirs(args))
        problem = command_problem(name_raw, args)
        if problem:
            self.refuse(problem)

    def bare_assignment(self, node: Any) -> None:
        name = assignment_name(self.raw(node))
        if name is None:
            self.refuse("assignment:not a plain name")
            return
        if name in _SENSITIVE_VARIABLES or name.startswith(_SENSITIVE_PREFIXES):
            self.refuse(f"assignment:{name}")

    def expansions(self, word: Any) -> None:
        for part in getattr(word, "parts", []) or []:
            kind = part.kind
            if kind == "commandsubstitution":
                start = part.pos[0]
                token = "`...`" if self.src[start : start + 1] == "`" else "$(...)"
                self.refuse(f"substitution:{token}")
            elif kind == "processsubstitution":
                start = part.pos[0]
                self.refuse(f"substitution:{self.src[start : start + 1] or '<'}(...)")
            elif kind == "parameter":
                if self.src[part.pos[0] : part.pos[0] + 2] in ("$'", '$"'):
                    continue  # bashlex's reading of $'...' / $"..." quoting, not an expansion
                value = getattr(part, "value", None)
                if isinstance(value, str):
                    problem = parameter_problem(value)
                    if problem:
                        self.refuse(problem)
            elif kind == "tilde":
                continue
            else:
                self.refuse(f"construct:{kind}")

    # -- redirections ---------------------------------------------------------------------------

    def redirect(self, r: Any, covered: bytearray) -> None:
        """Redirections (issue 13): literal targets, no sockets, fd juggling only among 1 and 2.

        * an output redirect may only go to a literal ``/dev/null``, on fd 1 or 2;
        * ``<`` may only read a literal path (no expansion of any kind: parameter, tilde,
          brace, glob, or quote concatenation that bash joins into one word), on fd 0, and
          never ``/dev/tcp|udp``, ``/dev/fd/*``, ``/dev/std*`` or ``/proc/*/fd`` (bash opens
          sockets for the first and duplicates descriptors for the others);
        * ``N>&M`` / ``N<&M`` only with N and M in {1, 2}; closing (``>&-``) only 1 or 2;
        * here-documents and here-strings only on fd 0.
        """
        rtype = r.type
        fd = getattr(r, "input", None)
        if fd is not None and not isinstance(fd, int):
            self.refuse("redirect:{var}")
            return
        target = r.output
        if hasattr(target, "kind"):
            self.expansions(target)
        if rtype in ("<<", "<<-"):
            heredoc = getattr(r, "heredoc", None)
            if heredoc is None:
                self.refuse("parse-error: here-document without body")
                return
            self.mark(covered, heredoc.pos)
            problem = heredoc_body_problem(heredoc.value)
            if problem:
                self.refuse(problem)
            if fd not in (None, 0):
                self.refuse(f"redirect:fd {fd} {rtype}")
            return
        if rtype == "<<<":
            if fd not in (None, 0):
                self.refuse(f"redirect:fd {fd} <<<")
            return
        if rtype in ("<&", ">&"):
            self.duplication(rtype, fd, target)
            return
        path = self.literal_target(target)
        if rtype == "<":
            if fd not in (None, 0):
                self.refuse(f"redirect:fd {fd} <")
            elif path is None:
                self.refuse("redirect:< target not a literal path")
            elif _SPECIAL_INPUT_RE.search(path):
                self.refuse("redirect:/dev/tcp" if _SOCKET_RE.search(path) else
                            "redirect:< special file")
            return
        if rtype in (">", ">>", ">|", "&>", "&>>"):
            if path is None or path not in SAFE_SINKS:
                self.refuse(f"redirect:{rtype}")
            elif fd not in (None, 1, 2):
                self.refuse(f"redirect:fd {fd} {rtype}")
            return
        self.refuse(f"redirect:{rtype}")

    def duplication(self, rtype: str, fd: int | None, target: Any) -> None:
        """``N>&M``, ``N<&M``, ``>&-``, and ``>& /dev/null`` (the same as ``&>/dev/null``)."""
        dest = fd if fd is not None else (0 if rtype == "<&" else 1)
        if isinstance(target, int):
            text = str(target)
        elif isinstance(target, str):
            text = target
        else:
            path = self.literal_target(target)
            if rtype == ">&" and fd is None and path in SAFE_SINKS:
                return
            text = self.raw(target) if path is not None else ""
        m = re.fullmatch(r"([0-9]+)-?|-", text)
        if m is None:
            self.refuse(f"redirect:{rtype}")
            return
        if dest not in (1, 2):
            self.refuse(f"redirect:fd {dest} {rtype}")
            return
        if m.group(1) is not None and int(m.group(1)) not in (1, 2):
            self.refuse(f"redirect:{rtype}{m.group(1)}")

    def literal_target(self, target: Any) -> str | None:
        """The path a redirect target names, when bash cannot change it by expanding.

        Accepted: a word of plain characters, or exactly one single- or double-quoted string
        with nothing to expand inside. Anything else (a parameter, ``~``, braces, a glob, an
        escape, quote concatenation like ``/dev/"tcp"/h/1``) is not a literal target.
        """
        if not hasattr(target, "kind") or getattr(target, "parts", None):
            return None
        raw = self.raw(target)
        if _PLAIN_TARGET_RE.fullmatch(raw):
            return raw
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            inner = raw[1:-1]
            if inner and not any(ch in inner for ch in "'\"$`\\"):
                return inner
        return None
