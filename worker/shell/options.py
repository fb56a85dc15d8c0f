"""Small helpers shared by the per-command argument rules."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from worker.shell.lexer import WordInfo


def static_args_problem(
    command: str, args: Sequence[WordInfo], *, honor_double_dash: bool
) -> str | None:
    """Refuse arguments whose final text bash decides at run time.

    A command whose options can write or execute needs every option-like argument to be known
    now: no parameter or command expansion, no brace expansion, and no glob that could expand to
    a file name starting with ``-`` (``sort *`` with a file called ``-o…`` in the directory is a
    write). A glob is fine when its first character is a literal other than ``-``.
    With ``honor_double_dash`` the words after ``--`` are operands and are not checked.
    """
    for arg in args:
        if honor_double_dash and arg.static and arg.value == "--" and not arg.glob:
            return None
        if not arg.static:
            return f"dynamic-arg:{command}"
        if arg.brace:
            return f"brace-expansion:{command}"
        if arg.glob and (not arg.value or arg.value[0] in "-*?["):
            return f"glob-arg:{command}"
    return None


def long_option_matches(name: str, candidates: Iterable[str]) -> list[str]:
    """Long options that ``--name`` can stand for (exact match, or unambiguous prefix).

    GNU getopt_long accepts any unambiguous prefix (``--in-pl`` is ``--in-place``), so a rule
    that looks for a dangerous long option must match prefixes too.
    """
    options = list(candidates)
    if name in options:
        return [name]
    return [opt for opt in options if opt.startswith(name)]


def long_option_hits(name: str, dangerous: Iterable[str], known: Iterable[str] = ()) -> str | None:
    """The dangerous long option ``--name`` may mean, or None.

    ``name`` is what follows ``--`` (without ``=value``). An exact match with a known harmless
    option wins (``--text`` is not ``--textconv``); otherwise any dangerous option that starts
    with ``name`` is a hit.
    """
    if not name:
        return None
    known_set = set(known)
    dangerous_list = list(dangerous)
    if name in dangerous_list:
        return name
    if name in known_set:
        return None
    for opt in dangerous_list:
        if opt.startswith(name):
            return opt
    return None


def short_cluster(value: str) -> str | None:
    """The letters of a short-option cluster (``-abc`` → ``abc``), or None if not one."""
    if len(value) >= 2 and value[0] == "-" and value[1] != "-":
        return value[1:]
    return None
