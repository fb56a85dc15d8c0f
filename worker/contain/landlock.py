"""Landlock, the kernel's unprivileged access control, through three raw syscalls.

Two uses:

* ``restrict_writes_to`` — the speculation worker's own backstop: every write-like file
  system right is handled and granted back only beneath the given paths; reading and
  executing stay free.
* ``restrict`` — the containment profile's second wall for one command: reads, writes and
  execution only beneath the given paths, no TCP bind/connect (ABI >= 4), and no signals or
  abstract unix sockets across the domain boundary (ABI >= 6, "scoping").

A ruleset is inherited by every child and can never be lifted. The syscall numbers are
the same in the generic table (x86_64, aarch64, riscv64).
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from overlay.kernel import libc
from protocol.wire.work import Sandbox

_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

_WRITE_V1 = (
    WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_CHAR
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_BLOCK
    | MAKE_SYM
)
_READ = READ_FILE | READ_DIR | EXECUTE
# Rights that make sense on a single file (the kernel refuses directory rights there).
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV


class LandlockError(OSError):
    """Landlock is present but a ruleset could not be built or applied."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.cache
def abi() -> int:
    """The kernel's Landlock ABI version, or 0 where it is missing or disabled."""
    if platform.system() != "Linux":
        return 0
    try:
        return libc.landlock_abi(_CREATE_RULESET_VERSION)
    except OSError:
        return 0


def sandbox_kind() -> Sandbox:
    """What a worker's hello reports about its own backstop: ``landlock`` or ``none``."""
    return "landlock" if abi() > 0 else "none"


def _write_rights(version: int) -> int:
    rights = _WRITE_V1
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    return rights


def _attr_size(version: int) -> int:
    """Pass the kernel only the fields its ABI knows (it refuses unknown non-zero ones)."""
    if version >= 6:
        return 24
    if version >= 4:
        return 16
    return 8


@dataclass(frozen=True)
class Applied:
    """What a ruleset enforces, for status reports."""

    abi: int
    fs: bool
    tcp: bool
    scoped: bool


def _apply(
    version: int,
    handled_fs: int,
    grants: Iterable[tuple[Path, int]],
    *,
    deny_tcp: bool,
    scope: bool,
) -> Applied:
    attr = _RulesetAttr(handled_access_fs=handled_fs)
    tcp = deny_tcp and version >= 4
    scoped = scope and version >= 6
    if tcp:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
    if scoped:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    ruleset_fd = libc.landlock_create_ruleset(attr, _attr_size(version))
    try:
        for path, rights in grants:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                if not os.path.isdir(path):
                    rights &= _FILE_ONLY
                rule = _PathBeneathAttr(allowed_access=rights & handled_fs, parent_fd=fd)
                libc.landlock_add_rule(
                    ruleset_fd, _RULE_PATH_BENEATH, rule, f"landlock_add_rule for {path}"
                )
            finally:
                os.close(fd)
        libc.set_no_new_privs()
        libc.landlock_restrict_self(ruleset_fd)
    finally:
        os.close(ruleset_fd)
    return Applied(abi=version, fs=True, tcp=tcp, scoped=scoped)


def restrict_writes_to(writable: Iterable[Path]) -> bool:
    """Confine this process (and its future children) to writing only beneath ``writable``
    (directories or single files). False when the kernel has no Landlock; raises
    ``LandlockError`` when applying it failed."""
    version = abi()
    if version <= 0:
        return False
    rights = _write_rights(version)
    _apply(version, rights, ((Path(p), rights) for p in writable), deny_tcp=False, scope=False)
    return True


def restrict(
    readable: Iterable[Path],
    writable: Iterable[Path],
    *,
    deny_tcp: bool = True,
    scope: bool = True,
) -> Applied:
    """The command profile's ruleset: read and execute only beneath ``readable`` (and
    ``writable``), write only beneath ``writable``, no TCP, no signals or abstract unix
    sockets leaving the domain. Raises ``LandlockError`` when Landlock is missing."""
    version = abi()
    if version <= 0:
        raise LandlockError(0, "the kernel has no Landlock")
    write = _write_rights(version)
    handled = _READ | write | (IOCTL_DEV if version >= 5 else 0)
    grants = [(Path(p), _READ) for p in readable]
    grants += [(Path(p), _READ | write) for p in writable]
    return _apply(version, handled, grants, deny_tcp=deny_tcp, scope=scope)
