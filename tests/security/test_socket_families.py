"""Socket families by allow-list: a command may create only what an empty network
namespace makes harmless (TCP/UDP over IPv4/IPv6, route netlink); a vsock socket (the
hypervisor on a VM), packet and raw sockets and every other family are refused, by the
seccomp filter alone (every other layer off) and in the full profile."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.security.conftest import layers_for, run_in
from worker.contain.helper import SandboxHelper

TRY = (
    "import socket, sys\n"
    "for family, kind, proto in [tuple(map(int, a.split(','))) for a in sys.argv[1:]]:\n"
    "    try:\n"
    "        socket.socket(family, kind, proto).close(); print('created')\n"
    "    except OSError as e:\n"
    "        print('refused', e.errno)"
)
VSOCK = (socket.AF_VSOCK, socket.SOCK_STREAM, 0)
PACKET = (socket.AF_PACKET, socket.SOCK_RAW, 0)
RAW_IP = (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
ALG = (socket.AF_ALG, socket.SOCK_SEQPACKET, 0)
NETLINK_UEVENT = (socket.AF_NETLINK, socket.SOCK_RAW, 15)
TCP = (socket.AF_INET, socket.SOCK_STREAM, 0)
UDP6 = (socket.AF_INET6, socket.SOCK_DGRAM, 0)
NETLINK_ROUTE = (socket.AF_NETLINK, socket.SOCK_RAW, 0)


def attempt(
    helper: SandboxHelper, project: Path, only: str, *kinds: tuple[int, int, int]
) -> list[str]:
    layers = layers_for(only)
    args = " ".join(",".join(map(str, k)) for k in kinds)
    result = run_in(helper, project, f'python3 -c "{TRY}" {args}', layers=layers)
    assert result.exit_code == 0, result
    return result.stdout.split("\n")[: len(kinds)]


@pytest.mark.parametrize("only", ["seccomp", "all"])
def test_a_vsock_socket_cannot_be_created(
    bypassed_helper: SandboxHelper, tmp_path: Path, only: str
) -> None:
    assert attempt(bypassed_helper, tmp_path, only, VSOCK) == ["refused 97"]  # EAFNOSUPPORT


@pytest.mark.parametrize("only", ["seccomp", "all"])
def test_packet_raw_and_other_families_are_refused(
    bypassed_helper: SandboxHelper, tmp_path: Path, only: str
) -> None:
    got = attempt(bypassed_helper, tmp_path, only, PACKET, RAW_IP, ALG, NETLINK_UEVENT)
    assert got == ["refused 97", "refused 1", "refused 97", "refused 97"]


def test_what_the_empty_network_namespace_makes_harmless_still_works(
    bypassed_helper: SandboxHelper, tmp_path: Path
) -> None:
    assert attempt(bypassed_helper, tmp_path, "all", TCP, UDP6, NETLINK_ROUTE) == ["created"] * 3
    pair = run_in(
        bypassed_helper, tmp_path, "python3 -c 'import socket; socket.socketpair(); print(1)'"
    )
    assert pair.stdout.strip() == "1", pair


def test_control_without_the_filter_a_vsock_socket_is_created(
    bypassed_helper: SandboxHelper, tmp_path: Path
) -> None:
    # The same command with no layer at all: the refusal above comes from the filter.
    # (Packet and raw sockets need CAP_NET_RAW over the network namespace, which the
    # helper's user namespace never has: the filter is their second wall.)
    got = attempt(bypassed_helper, tmp_path, "none", VSOCK, TCP)
    if got[0] == "refused 97":
        pytest.skip("this kernel has no vsock support to refuse")
    assert got == ["created", "created"]
