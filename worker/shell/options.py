"""Small helpers shared by the per-command argument rules (the option walker is in
``option_table``)."""

from __future__ import annotations

from collections.abc import Sequence

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


def short_cluster(value: str) -> str | None:
    """The letters of a short-option cluster (``-abc`` → ``abc``), or None if not one."""
    if len(value) >= 2 and value[0] == "-" and value[1] != "-":
        return value[1:]
    return None
