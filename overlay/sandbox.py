"""Kernel write backstop: confine a process so it can write only where we say.

Landlock (Linux >= 5.13) through three raw syscalls via ctypes: the ruleset
handles every write-like filesystem right and grants them back only beneath
the given directories (and on the given files, e.g. /dev/null). Reads and
execution stay unrestricted. The restriction is inherited by every child and
cannot be lifted, which is why a confined worker is never reused.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Iterable
from pathlib import Path

# Syscall numbers are the same in the generic table (x86_64, aarch64, riscv64).
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_WRITE_FILE = 1 << 1
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE_CHAR = 1 << 6
_MAKE_DIR = 1 << 7
_MAKE_REG = 1 << 8
_MAKE_SOCK = 1 << 9
_MAKE_FIFO = 1 << 10
_MAKE_BLOCK = 1 << 11
_MAKE_SYM = 1 << 12
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3

_FILE_RIGHTS_V1 = _WRITE_FILE
_DIR_RIGHTS_V1 = (
    _WRITE_FILE
    | _REMOVE_DIR
    | _REMOVE_FILE
    | _MAKE_CHAR
    | _MAKE_DIR
    | _MAKE_REG
    | _MAKE_SOCK
    | _MAKE_FIFO
    | _MAKE_BLOCK
    | _MAKE_SYM
)


class SandboxError(OSError):
    """Landlock is present but the ruleset could not be applied."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 where it is missing or disabled."""
    if platform.system() != "Linux":
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(
        _SYS_CREATE_RULESET,
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION),
    )
    return int(version) if version > 0 else 0


def sandbox_kind() -> str:
    """What the worker's hello reports: ``landlock`` or ``none``."""
    return "landlock" if landlock_abi() > 0 else "none"


def _rights(abi: int) -> tuple[int, int]:
    dir_rights, file_rights = _DIR_RIGHTS_V1, _FILE_RIGHTS_V1
    if abi >= 2:
        dir_rights |= _REFER
    if abi >= 3:
        dir_rights |= _TRUNCATE
        file_rights |= _TRUNCATE
    return dir_rights, file_rights


def restrict_writes_to(writable: Iterable[Path]) -> bool:
    """Confine this process (and its future children) to writing only beneath
    ``writable`` (directories or single files). Returns False when the kernel has no
    Landlock; raises ``SandboxError`` when applying it failed."""
    abi = landlock_abi()
    if abi <= 0:
        return False
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    dir_rights, file_rights = _rights(abi)
    attr = _RulesetAttr(handled_access_fs=dir_rights)
    ruleset_fd = int(
        libc.syscall(
            _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0
        )
    )
    if ruleset_fd < 0:
        raise SandboxError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in writable:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rights = dir_rights if os.path.isdir(path) else file_rights
                rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
                if (
                    libc.syscall(
                        _SYS_ADD_RULE,
                        ruleset_fd,
                        _LANDLOCK_RULE_PATH_BENEATH,
                        ctypes.byref(rule),
                        0,
                    )
                    != 0
                ):
                    raise SandboxError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise SandboxError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset_fd, 0) != 0:
            raise SandboxError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset_fd)
    return True
