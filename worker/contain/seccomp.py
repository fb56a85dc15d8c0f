"""A small seccomp filter for contained commands.

It does two jobs that no other layer does on its own:

* **socket families, by allow-list**: a command may create only the sockets an empty
  network namespace makes harmless: ``AF_INET``/``AF_INET6`` (not raw, not packet) and
  ``AF_NETLINK`` of the ``NETLINK_ROUTE`` protocol only (glibc's ``getaddrinfo`` and
  ``ip`` ask it about the namespace's own, empty, interfaces). ``socket(AF_UNIX, ...)``
  fails with EACCES: a path-name unix socket (the service's control socket) is not cut
  off by a network namespace, and Landlock does not govern ``connect`` on one; without a
  socket to connect with, no specrun socket can be reached even where the runtime
  directory is visible. Every other family (``AF_VSOCK``, which reaches the hypervisor
  on a VM; ``AF_PACKET``; Bluetooth; ``AF_ALG``; ``AF_XDP``...) fails with EAFNOSUPPORT,
  as on a kernel built without it. ``socketpair`` is allowed for ``AF_UNIX`` only (it
  connects a process to itself; Node and Python use it for their children's pipes).
* **kernel surfaces a command never needs**: new namespaces (``unshare``, ``setns``,
  ``clone``/``clone3`` with namespace flags: a nested user namespace would hand the command
  fresh capabilities), mounting, io_uring (its operations bypass this filter), keyrings,
  BPF, perf, userfaultfd, module loading, handles that open files by inode, and the x32
  system call table.

Denied calls fail with EPERM (EACCES for unix sockets, EAFNOSUPPORT for a family off the
list) instead of killing the process, so a tool that probes for a feature keeps working.
``clone3`` gets ENOSYS: its flags live in memory a filter cannot read, and the C library
then falls back to ``clone``.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import platform
import struct

from overlay.kernel import libc

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000

# BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_ALU_AND_K = 0x54

_OFF_NR = 0
_OFF_ARCH = 4
_OFF_ARG0_LO = 16
_OFF_ARG1_LO = 24
_OFF_ARG2_LO = 32

_AF_UNIX = 1
_AF_INET = 2
_AF_INET6 = 10
_AF_NETLINK = 16
_NETLINK_ROUTE = 0
_SOCK_TYPE_MASK = 0xF  # the rest of socket(2)'s type holds SOCK_NONBLOCK / SOCK_CLOEXEC
_SOCK_RAW = 3
_SOCK_PACKET = 10
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
_SOCKETPAIR = (53, 199)
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


class _Program:
    """BPF instructions with named jump targets (a jump is an offset to count by hand
    otherwise, and one miscounted offset opens the filter)."""

    def __init__(self) -> None:
        self._items: list[tuple[int, str | int, str | int, int] | str] = []

    def op(self, code: int, k: int = 0, jt: str | int = 0, jf: str | int = 0) -> None:
        self._items.append((code, jt, jf, k))

    def ret(self, value: int) -> None:
        self.op(_RET_K, value)

    def label(self, name: str) -> None:
        self._items.append(name)

    def assemble(self) -> bytes:
        where: dict[str, int] = {}
        count = 0
        for item in self._items:
            if isinstance(item, str):
                where[item] = count
            else:
                count += 1
        out: list[bytes] = []
        for item in self._items:
            if isinstance(item, str):
                continue
            code, jt, jf, k = item
            here = len(out) + 1  # jumps count from the next instruction
            offsets = [where[j] - here if isinstance(j, str) else j for j in (jt, jf)]
            if not all(0 <= off <= 255 for off in offsets):
                raise SeccompError(0, f"seccomp jump out of range: {offsets}")
            out.append(_ins(code, offsets[0], offsets[1], k))
        return b"".join(out)


@functools.cache
def build_program() -> bytes:
    """The filter as raw BPF instructions for this machine's architecture."""
    machine = platform.machine().lower()
    if machine not in _ARCHES:
        raise SeccompError(0, f"no seccomp syscall table for {machine}")
    audit_arch, column = _ARCHES[machine]
    denied = sorted({numbers[column] for numbers in _DENIED.values()})
    eperm = _RET_ERRNO | errno.EPERM
    no_family = _RET_ERRNO | errno.EAFNOSUPPORT
    p = _Program()
    p.op(_LD_W_ABS, _OFF_ARCH)
    p.op(_JEQ_K, audit_arch, jt=1)
    p.ret(_RET_KILL_PROCESS)  # a foreign ABI: never expected
    p.op(_LD_W_ABS, _OFF_NR)
    if column == 0:  # x32 calls share the arch value on x86_64: refuse the whole table
        p.op(_JGE_K, _X32_BIT, jf=1)
        p.ret(eperm)
    for nr in denied:
        p.op(_JEQ_K, nr, jf=1)
        p.ret(eperm)
    p.op(_JEQ_K, _CLONE3[column], jf=1)
    p.ret(_RET_ERRNO | errno.ENOSYS)
    p.op(_JEQ_K, _SOCKET[column], jt="socket")
    p.op(_JEQ_K, _SOCKETPAIR[column], jt="socketpair")
    # clone(flags, ...) with a namespace flag -> EPERM (x86_64 and aarch64 both pass the
    # flags first)
    p.op(_JEQ_K, _CLONE[column], jf="allow")
    p.op(_LD_W_ABS, _OFF_ARG0_LO)
    p.op(_JSET_K, _CLONE_NS_FLAGS, jf="allow")
    p.ret(eperm)
    # socket(family, type, protocol): the allow-list
    p.label("socket")
    p.op(_LD_W_ABS, _OFF_ARG0_LO)
    p.op(_JEQ_K, _AF_INET, jt="inet")
    p.op(_JEQ_K, _AF_INET6, jt="inet")
    p.op(_JEQ_K, _AF_NETLINK, jt="netlink")
    p.op(_JEQ_K, _AF_UNIX, jf=1)
    p.ret(_RET_ERRNO | errno.EACCES)
    p.ret(no_family)
    p.label("inet")  # no raw or packet sockets, whatever the capabilities
    p.op(_LD_W_ABS, _OFF_ARG1_LO)
    p.op(_ALU_AND_K, _SOCK_TYPE_MASK)
    p.op(_JEQ_K, _SOCK_RAW, jt="refuse")
    p.op(_JEQ_K, _SOCK_PACKET, jt="refuse", jf="allow")
    p.label("netlink")
    p.op(_LD_W_ABS, _OFF_ARG2_LO)
    p.op(_JEQ_K, _NETLINK_ROUTE, jt="allow")
    p.ret(no_family)
    p.label("socketpair")
    p.op(_LD_W_ABS, _OFF_ARG0_LO)
    p.op(_JEQ_K, _AF_UNIX, jt="allow")
    p.ret(no_family)
    p.label("refuse")
    p.ret(eperm)
    p.label("allow")
    p.ret(_RET_ALLOW)
    return p.assemble()


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


@functools.cache
def _prepared() -> tuple[_SockFprog, ctypes.Array[ctypes.c_char]]:
    """Built once per helper, so a command's child only makes the two prctl calls."""
    program = build_program()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    return fprog, buffer


def prepare() -> None:
    """Do the filter's Python work ahead of time (in the helper, before any fork)."""
    _prepared()


def install() -> None:
    """Install the filter on this thread (and every child). Sets no_new_privs first, which
    the kernel requires of an unprivileged filter. Single-threaded callers only."""
    fprog, _buffer = _prepared()
    libc.set_no_new_privs()
    libc.set_seccomp_filter(fprog)
