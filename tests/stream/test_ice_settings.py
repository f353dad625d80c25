"""IceSettings, RTCConfiguration and candidate gathering restricted to given hosts."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator

import pytest
from aioice import stun
from aiortc import RTCPeerConnection

from stream.aiortc_internals import gatherer_connection
from stream.ice import (
    IceSettings,
    address_allowed,
    allowed_remote_networks,
    restrict_gathering,
    rtc_configuration,
)

LOOPBACK = IceSettings(hosts=("127.0.0.1",))


def candidate_lines(sdp: str) -> list[list[str]]:
    return [line[len("a=candidate:") :].split() for line in sdp.splitlines() if line.startswith("a=candidate:")]


def networks(*cidrs: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(c) for c in cidrs]


# --- settings ------------------------------------------------------------------


def test_defaults_have_no_servers_and_explicit_empty_list() -> None:
    config = rtc_configuration(IceSettings())
    # None would make aiortc use Google's STUN server
    assert config.iceServers == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"hosts": ("not-an-ip",)},
        {"hosts": ("0.0.0.0",)},
        {"hosts": "127.0.0.1"},
        {"public_address": "example.com"},
        {"servers": ("http://x",)},
        {"servers": ("turn:host:3478",)},  # TURN without credentials
        {"servers": ("stun:u:p@host:3478",)},  # STUN takes none
        {"allowed_remote": ("10.0.0.0/33",)},
    ],
)
def test_invalid_settings_rejected(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        IceSettings(**kwargs)


def test_lists_are_accepted_and_frozen_to_tuples() -> None:
    settings = IceSettings(
        hosts=["127.0.0.1"],
        allowed_remote=["10.0.0.0/8"],  # type: ignore[arg-type]
    )
    assert settings.hosts == ("127.0.0.1",)
    assert settings.allowed_remote == ("10.0.0.0/8",)
    hash(settings)


def test_stun_and_turn_urls() -> None:
    settings = IceSettings(
        servers=(
            "stun:stun.example.org:3478",
            "turn:alice:s%40cret@turn.example.org:3478?transport=tcp",
        )
    )
    stun_server, turn_server = rtc_configuration(settings).iceServers
    assert stun_server.urls == "stun:stun.example.org:3478"
    assert stun_server.username is None
    assert turn_server.urls == "turn:turn.example.org:3478?transport=tcp"
    assert (turn_server.username, turn_server.credential) == ("alice", "s@cret")


def test_allowed_remote_derived_from_loopback_hosts() -> None:
    assert allowed_remote_networks(LOOPBACK) == networks("127.0.0.0/8", "::1/128")
    both = IceSettings(hosts=("127.0.0.1", "::1"))
    assert allowed_remote_networks(both) == networks("127.0.0.0/8", "::1/128")


def test_allowed_remote_for_other_hosts_is_the_public_internet_and_the_hosts_own_ranges() -> None:
    mixed = allowed_remote_networks(IceSettings(hosts=("127.0.0.1", "10.1.2.3")))
    for host, allowed in (("8.8.8.8", True), ("127.0.0.9", True), ("10.9.9.9", True), ("192.168.0.1", False)):
        assert address_allowed(host, mixed) == allowed, host
    every_interface = allowed_remote_networks(IceSettings())  # this machine's own ranges, and public
    assert address_allowed("8.8.8.8", every_interface) and not address_allowed("127.0.0.1", every_interface)


def test_allowed_remote_explicit() -> None:
    settings = IceSettings(hosts=("127.0.0.1",), allowed_remote=("10.0.0.1/8",))
    assert allowed_remote_networks(settings) == networks("10.0.0.0/8")


# --- gathering -----------------------------------------------------------------


@pytest.fixture
async def pc() -> AsyncIterator[RTCPeerConnection]:
    peer = RTCPeerConnection(rtc_configuration(LOOPBACK))
    yield peer
    await peer.close()


async def test_offerer_gathers_only_on_given_host(pc: RTCPeerConnection) -> None:
    pc.addTransceiver("video", direction="sendrecv")
    pc.createDataChannel("control")
    await restrict_gathering(pc, LOOPBACK)
    await pc.setLocalDescription(await pc.createOffer())

    candidates = candidate_lines(pc.localDescription.sdp)
    assert candidates
    assert {c[4] for c in candidates} == {"127.0.0.1"}
    assert {c[7] for c in candidates} == {"host"}
    assert pc.iceGatheringState == "complete"


async def test_gathering_is_done_once(pc: RTCPeerConnection) -> None:
    pc.addTransceiver("video")
    await restrict_gathering(pc, LOOPBACK)
    await restrict_gathering(pc, LOOPBACK)
    await pc.setLocalDescription(await pc.createOffer())
    assert len(candidate_lines(pc.localDescription.sdp)) == 1


async def test_empty_settings_leave_gathering_to_aiortc(pc: RTCPeerConnection) -> None:
    transceiver = pc.addTransceiver("video")
    await restrict_gathering(pc, IceSettings())
    gatherer = transceiver.receiver.transport.transport.iceGatherer
    assert gatherer.state == "new"
    assert gatherer.getLocalCandidates() == []


async def test_unusable_host_is_an_error(pc: RTCPeerConnection) -> None:
    pc.addTransceiver("video")
    # TEST-NET-1: not an address of this machine, so bind() fails; no traffic
    with pytest.raises(RuntimeError, match="no ICE candidate"):
        await restrict_gathering(pc, IceSettings(hosts=("192.0.2.1",)))


async def test_public_address_advertised_with_the_host_port(
    pc: RTCPeerConnection,
) -> None:
    transceiver = pc.addTransceiver("video")
    settings = IceSettings(hosts=("127.0.0.1",), public_address="203.0.113.7")
    await restrict_gathering(pc, settings)
    await pc.setLocalDescription(await pc.createOffer())

    (candidate,) = candidate_lines(pc.localDescription.sdp)
    assert candidate[4] == "203.0.113.7" and candidate[7] == "host"
    # the socket itself stays bound on the host address, same port
    connection = gatherer_connection(transceiver.receiver.transport.transport.iceGatherer)
    (protocol,) = connection._protocols
    base = protocol.local_candidate
    assert (base.host, base.port) == ("127.0.0.1", int(candidate[5]))


class FakeStunServer(asyncio.DatagramProtocol):
    """Answers binding requests with a fixed mapped address (or the same port)."""

    def __init__(self, mapped_host: str, mapped_port: int | None = None) -> None:
        self.mapped_host = mapped_host
        self.mapped_port = mapped_port
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        request = stun.parse_message(data)
        response = stun.Message(
            message_method=stun.Method.BINDING,
            message_class=stun.Class.RESPONSE,
            transaction_id=request.transaction_id,
        )
        port = self.mapped_port if self.mapped_port is not None else addr[1]
        response.attributes["XOR-MAPPED-ADDRESS"] = (self.mapped_host, port)
        assert self.transport is not None
        self.transport.sendto(bytes(response), addr)


async def start_stun(mapped_host: str, mapped_port: int | None = None) -> tuple[asyncio.DatagramTransport, int]:
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: FakeStunServer(mapped_host, mapped_port), local_addr=("127.0.0.1", 0)
    )
    return transport, transport.get_extra_info("sockname")[1]


async def test_stun_server_used_on_restricted_hosts() -> None:
    stun_transport, port = await start_stun("198.51.100.9", 40000)
    settings = IceSettings(hosts=("127.0.0.1",), servers=(f"stun:127.0.0.1:{port}",))
    pc = RTCPeerConnection(rtc_configuration(settings))
    try:
        pc.addTransceiver("video")
        await restrict_gathering(pc, settings)
        await pc.setLocalDescription(await pc.createOffer())
        candidates = candidate_lines(pc.localDescription.sdp)
        assert {(c[4], c[7]) for c in candidates} == {
            ("127.0.0.1", "host"),
            ("198.51.100.9", "srflx"),
        }
    finally:
        await pc.close()
        stun_transport.close()


async def test_srflx_equal_to_public_address_not_repeated() -> None:
    stun_transport, port = await start_stun("198.51.100.9")  # keeps the port: 1:1 NAT
    settings = IceSettings(
        hosts=("127.0.0.1",),
        public_address="198.51.100.9",
        servers=(f"stun:127.0.0.1:{port}",),
    )
    pc = RTCPeerConnection(rtc_configuration(settings))
    try:
        pc.addTransceiver("video")
        await restrict_gathering(pc, settings)
        await pc.setLocalDescription(await pc.createOffer())
        (candidate,) = candidate_lines(pc.localDescription.sdp)
        assert (candidate[4], candidate[7]) == ("198.51.100.9", "host")
    finally:
        await pc.close()
        stun_transport.close()
