"""A small seccomp filter for contained commands.

It does two jobs that no other layer does on its own:

* **unix sockets**: ``socket(AF_UNIX, ...)`` fails with EACCES. A path-name unix socket
  (the service's control socket) is not cut off by a network namespace, and Landlock does
  not govern ``connect`` on one; without a socket to connect with, no specrun socket can
  be reached even where the runtime directory is visible. ``socketpair`` stays allowed
  (it only connects a process to itself).
* **kernel surfaces a command never needs**: new namespaces (``unshare``, ``setns``,
  ``clone``/``clone3`` with namespace flags: a nested user namespace would hand the command
  fresh capabilities), mounting, io_uring (its operations bypass this filter), keyrings,
  BPF, perf, userfaultfd, module loading, handles that open files by inode, and the x32
  system call table.

Denied calls fail with EPERM (EACCES for sockets) instead of killing the process, so a
tool that probes for a feature keeps working. ``clone3`` gets ENOSYS: its flags live in
memory a filter cannot read, and the C library then falls back to ``clone``.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import platform
import struct

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000

# BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

_OFF_NR = 0
_OFF_ARCH = 4
_OFF_ARG0_LO = 16

_AF_UNIX = 1
_X32_BIT = 0x40000000
# Namespace flags of clone(2): NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
_CLONE_NS_FLAGS = (
    0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
)


class SeccompError(OSError):
    """The filter could not be installed."""


# name -> (x86_64, generic/aarch64)
_DENIED: dict[str, tuple[int, int]] = {
    "unshare": (272, 97),
    "setns": (308, 268),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
    "acct": (163, 89),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "syslog": (103, 116),
    "quotactl": (179, 60),
    "pidfd_getfd": (438, 438),
}
_SOCKET = (41, 198)
_CLONE = (56, 220)
_CLONE3 = (435, 435)

_ARCHES = {
    "x86_64": (0xC000003E, 0),
    "amd64": (0xC000003E, 0),
    "aarch64": (0xC00000B7, 1),
    "arm64": (0xC00000B7, 1),
}


def supported() -> bool:
    return platform.machine().lower() in _ARCHES


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


@functools.cache
def build_program() -> bytes:
    """The filter as raw BPF instructions for this machine's architecture."""
    machine = platform.machine().lower()
    if machine not in _ARCHES:
        raise SeccompError(0, f"no seccomp syscall table for {machine}")
    audit_arch, column = _ARCHES[machine]
    denied = sorted({numbers[column] for numbers in _DENIED.values()})
    eperm = _RET_ERRNO | errno.EPERM
    prog: list[bytes] = [
        _ins(_LD_W_ABS, 0, 0, _OFF_ARCH),
        _ins(_JEQ_K, 1, 0, audit_arch),
        _ins(_RET_K, 0, 0, _RET_KILL_PROCESS),  # a foreign ABI: never expected
        _ins(_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if column == 0:  # x32 calls share the arch value on x86_64: refuse the whole table
        prog += [_ins(_JGE_K, 0, 1, _X32_BIT), _ins(_RET_K, 0, 0, eperm)]
    for nr in denied:
        prog += [_ins(_JEQ_K, 0, 1, nr), _ins(_RET_K, 0, 0, eperm)]
    prog += [
        _ins(_JEQ_K, 0, 1, _CLONE3[column]),
        _ins(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
        # socket(AF_UNIX, ...) -> EACCES
        _ins(_JEQ_K, 0, 4, _SOCKET[column]),
        _ins(_LD_W_ABS, 0, 0, _OFF_ARG0_LO),
        _ins(_JEQ_K, 0, 1, _AF_UNIX),
        _ins(_RET_K, 0, 0, _RET_ERRNO | errno.EACCES),
        _ins(_RET_K, 0, 0, _RET_ALLOW),
        # clone(flags, ...) with a namespace flag -> EPERM (x86_64 and aarch64 both pass
        # the flags first)
        _ins(_JEQ_K, 0, 3, _CLONE[column]),
        _ins(_LD_W_ABS, 0, 0, _OFF_ARG0_LO),
        _ins(_JSET_K, 0, 1, _CLONE_NS_FLAGS),
        _ins(_RET_K, 0, 0, eperm),
        _ins(_RET_K, 0, 0, _RET_ALLOW),
    ]
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


@functools.cache
def _prepared() -> tuple[ctypes.CDLL, _SockFprog, ctypes.Array[ctypes.c_char]]:
    """Built once per helper, so a command's child only makes the two prctl calls."""
    program = build_program()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    return ctypes.CDLL(None, use_errno=True), fprog, buffer


def prepare() -> None:
    """Do the filter's Python work ahead of time (in the helper, before any fork)."""
    _prepared()


def install() -> None:
    """Install the filter on this thread (and every child). Sets no_new_privs first, which
    the kernel requires of an unprivileged filter. Single-threaded callers only."""
    libc, fprog, _buffer = _prepared()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SeccompError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise SeccompError(ctypes.get_errno(), "installing the seccomp filter failed")
