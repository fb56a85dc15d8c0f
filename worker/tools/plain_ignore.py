"""Plain ``.gitignore`` rules, matched on a name alone: the fast case of a listing's walk.

Most ignore files hold only rules about names: ``__pycache__/``, ``*.py[cod]``, ``.venv``,
``/build``. Such a rule needs no path matching: an unanchored one tests the name of every
entry below the file's directory, an anchored one (``/build``) the names directly in it, a
trailing ``/`` limits it to directories, and with no negation anywhere an entry is ignored
as soon as one rule of any file in force names it. :func:`plain_rules` accepts exactly those
files and gives ``None`` for any other line (a negation, a slash inside, ``**``, an escape,
spaces at either end, a character class with more than letters and digits) or for more than
:data:`MAX_RULES` rules: the caller then
uses the general path (rg, or the walk with ``pathspec``), so every answer stays the walk's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["PlainRules", "RuleChain", "plain_rules"]

_PLAIN = re.compile(r"(?:[\w.+@%=~,-]|\*|\?|\[[A-Za-z0-9]+\])+")
_PIECE = re.compile(r"\*|\?|\[[A-Za-z0-9]+\]|[^*?\[]+")


MAX_RULES = 64
"""More rules than this in one file: not plain. Every name is tested against one alternation
of all rules in force, whose cost grows with their number; rg's matcher does not."""


def _name_regex(glob: str) -> str:
    """A gitignore name glob as a regex for a whole name: ``*`` any run of characters but
    ``/`` (newlines included), ``?`` one of them, ``[cod]`` one of those."""
    out = []
    for piece in _PIECE.findall(glob):
        if piece == "*":
            out.append("[^/]*")
        elif piece == "?":
            out.append("[^/]")
        elif piece.startswith("["):
            out.append(piece)
        else:
            out.append(re.escape(piece))
    return "".join(out)


@dataclass(frozen=True)
class PlainRules:
    """One ignore file's rules, as regexes over names (``None``: no such rule)."""

    anywhere: tuple[str, ...] = ()
    """Unanchored rules for any entry."""
    anywhere_dirs: tuple[str, ...] = ()
    """Unanchored rules for directories only (``name/``)."""
    here: tuple[str, ...] = ()
    """Anchored rules (``/name``) for any entry directly in the file's directory."""
    here_dirs: tuple[str, ...] = ()
    """Anchored rules for directories directly in it (``/name/``)."""


def plain_rules(lines: Iterable[str]) -> PlainRules | None:
    """The rules of an ignore file's lines, or ``None`` when any line is more than a plain
    name rule (see the module's docstring)."""
    found: dict[tuple[bool, bool], list[str]] = {}
    count = 0
    for line in lines:
        if not line or line.startswith("#"):
            continue
        count += 1
        if count > MAX_RULES:
            return None
        body = line
        dir_only = body.endswith("/")
        if dir_only:
            body = body[:-1]
        anchored = body.startswith("/")
        if anchored:
            body = body[1:]
        if not _PLAIN.fullmatch(body) or "**" in body or not body.strip("."):
            return None
        found.setdefault((anchored, dir_only), []).append(_name_regex(body))
    return PlainRules(
        anywhere=tuple(found.get((False, False), ())),
        anywhere_dirs=tuple(found.get((False, True), ())),
        here=tuple(found.get((True, False), ())),
        here_dirs=tuple(found.get((True, True), ())),
    )


def _compiled(patterns: Iterable[str]) -> re.Pattern[str] | None:
    alternatives = list(dict.fromkeys(patterns))
    if not alternatives:
        return None
    return re.compile("|".join(f"(?:{one})" for one in alternatives))


class RuleChain:
    """The plain rules in force in one directory: the unanchored rules of every ignore file
    from the top down, and the anchored ones of the directory's own. :attr:`files` and
    :attr:`dirs` test a name with one regex each (``None``: nothing is ignored)."""

    def __init__(self, inherited: tuple[PlainRules, ...], own: PlainRules | None) -> None:
        self._inherited = (*inherited, own) if own is not None else inherited
        anywhere = [p for rules in self._inherited for p in rules.anywhere]
        anywhere_dirs = [p for rules in self._inherited for p in rules.anywhere_dirs]
        here = list(own.here) if own is not None else []
        here_dirs = list(own.here_dirs) if own is not None else []
        self.files = _compiled([*anywhere, *here])
        self.dirs = _compiled([*anywhere, *here, *anywhere_dirs, *here_dirs])
        self._below: RuleChain | None = None

    def below(self, own: PlainRules | None = None) -> RuleChain:
        """The chain in a subdirectory, which has the ignore file ``own`` (or none)."""
        if own is not None:
            return RuleChain(self._inherited, own)
        if self._below is None:  # shared by every subdirectory without an ignore file
            self._below = RuleChain(self._inherited, None)
        return self._below
