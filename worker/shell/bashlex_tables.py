"""bashlex, imported with its parser tables read from a file instead of built at import.

bashlex builds the LALR tables of its grammar every time it is imported (the yacc it bundles
never reads the ``parsetab`` it ships): a tenth to a fifth of a second of CPU, paid by the
service before it answers its first request, since the service imports what workers run
before it forks its fork server (``coordinator.service.pool.workers.WORKER_MODULES``). The tables
depend only on the grammar, so they are built once, by
``scripts/write_bashlex_tables.py``, into ``bashlex_tables.json`` beside this
file, together with a digest of the grammar they were built from. At import the digest of
the installed bashlex's grammar is compared with it: a different bashlex (another grammar)
builds its tables as before, and ``tests/worker/test_bashlex_tables.py`` fails until the file
is written again. Either way the parser is the one bashlex would have built; only where its
tables come from changes.

Import ``bashlex`` through this module (``from worker.shell.bashlex_tables import bashlex``)
so that the first import anywhere takes this path.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec

TABLES_FILE = Path(__file__).with_name("bashlex_tables.json")


class Production(msgspec.Struct, array_like=True):
    """One grammar rule as the parser needs it: reduce ``length`` symbols to ``name`` by
    calling bashlex's function ``func``."""

    name: str
    length: int
    func: str | None
    text: str


class Tables(msgspec.Struct):
    grammar_digest: str
    productions: list[Production]
    action: dict[int, dict[str, int]]
    goto: dict[int, dict[str, int]]


class _BoundProduction:
    """The attributes bashlex's ``LRParser`` reads from a production."""

    __slots__ = ("callable", "func", "len", "name", "str")

    def __init__(self, rule: Production, functions: dict[str, Any]) -> None:
        self.name = rule.name
        self.len = rule.length
        self.func = rule.func
        self.str = rule.text
        self.callable = functions[rule.func] if rule.func else None


class _TablesView:
    """What ``LRParser`` takes: the ``lr_*`` attributes of a built ``LRTable``."""

    def __init__(self, tables: Tables, functions: dict[str, Any]) -> None:
        self.lr_productions = [_BoundProduction(p, functions) for p in tables.productions]
        self.lr_action = tables.action
        self.lr_goto = tables.goto


def grammar_digest(yacc: ModuleType, parser_globals: dict[str, Any]) -> str:
    """A digest of the grammar bashlex's parser module defines (its rules' docstrings,
    tokens, precedence and start), as yacc itself summarizes a grammar."""
    reflect = yacc.ParserReflect(dict(parser_globals), log=yacc.NullLogger())
    reflect.get_all()
    return hashlib.sha256(reflect.signature().encode()).hexdigest()


def installed_grammar_digest() -> str:
    """``grammar_digest`` of the bashlex installed now."""
    yacc = importlib.import_module("bashlex.yacc")
    return grammar_digest(yacc, vars(importlib.import_module("bashlex.parser")))


def _read_tables() -> Tables | None:
    try:
        return msgspec.json.decode(TABLES_FILE.read_bytes(), type=Tables)
    except (OSError, msgspec.DecodeError):
        return None


def _import_bashlex() -> ModuleType:
    """``import bashlex``, its parser's tables taken from ``TABLES_FILE`` when they were
    built from the same grammar."""
    if "bashlex" in sys.modules:
        return sys.modules["bashlex"]
    tables = _read_tables()
    spec = importlib.util.find_spec("bashlex")
    if tables is None or spec is None or spec.loader is None:
        return importlib.import_module("bashlex")
    # The package's ``__init__`` imports its parser, which builds the tables: load the
    # package without running it, put the table reader in yacc's place, then run it.
    package = importlib.util.module_from_spec(spec)
    sys.modules["bashlex"] = package
    try:
        yacc: Any = importlib.import_module("bashlex.yacc")
        build = yacc.yacc

        def yacc_from_file(*args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_globals  # bashlex.parser's, as yacc reads them
            if grammar_digest(yacc, caller) != tables.grammar_digest:
                # yacc reads the grammar from its caller's frame, which is now this one
                return build(*args, module=sys.modules[caller["__name__"]], **kwargs)
            parser = yacc.LRParser(_TablesView(tables, caller), caller.get("p_error"))
            yacc.parse = parser.parse  # as yacc.yacc leaves it
            return parser

        yacc.yacc = yacc_from_file
        try:
            spec.loader.exec_module(package)
        finally:
            yacc.yacc = build
    except BaseException:
        for name in [n for n in sys.modules if n == "bashlex" or n.startswith("bashlex.")]:
            del sys.modules[name]
        raise
    return package


def built_tables() -> Tables:
    """The tables bashlex builds for the grammar installed now (what ``write_tables``
    saves)."""
    yacc = importlib.import_module("bashlex.yacc")
    parser_module = importlib.import_module("bashlex.parser")
    # A fresh build: the module's own parser has had bashlex's state corrections applied.
    fresh = yacc.yacc(module=parser_module, debug=False, write_tables=False)
    return Tables(
        grammar_digest=installed_grammar_digest(),
        productions=[Production(p.name, p.len, p.func, p.str) for p in fresh.productions],
        action={state: dict(acts) for state, acts in fresh.action.items()},
        goto={state: dict(gotos) for state, gotos in fresh.goto.items()},
    )


def write_tables() -> None:
    """Save ``built_tables()`` to ``TABLES_FILE`` (``scripts/write_bashlex_tables.py``)."""
    TABLES_FILE.write_bytes(msgspec.json.format(msgspec.json.encode(built_tables()), indent=0))


bashlex = _import_bashlex()
