"""ICE settings: which local addresses we offer, what we advertise, whom we accept.

aioice enumerates every non-loopback interface and never offers 127.0.0.1,
and aiortc falls back to Google's STUN server when `iceServers` is None.
A server needs the opposite defaults: an explicit address allow-list, an
address to advertise behind 1:1 NAT, and no third-party servers unless asked.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
from dataclasses import dataclass
from urllib.parse import unquote

from aioice import Candidate, Connection
from aiortc import RTCConfiguration, RTCIceGatherer, RTCIceServer, RTCPeerConnection

from stream.aiortc_internals import (
    advertised_as,
    claim_gathering,
    count_media_as_consent,
    gather_candidates_on,
    gatherer_connection,
    gathering_addresses,
    guard_incoming_checks,
    machine_host_addresses,
    parse_stun_turn_uri,
    publish_candidates,
)

logger = logging.getLogger(__name__)

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

LOOPBACK_NETWORKS = ("127.0.0.0/8", "::1/128")
ANY_NETWORKS = ("0.0.0.0/0", "::/0")
# Address ranges that are not the public internet (IANA's special-purpose registries): a server
# that tried any candidate a peer offered would send STUN into its own host or network on that
# peer's word (an offer of 300 candidates 127.0.x.y made one node send 4,200 binding requests: issue #35).
SPECIAL_NETWORKS = (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
    "224.0.0.0/4", "240.0.0.0/4",
    "::/128", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001:db8::/32",
    "fc00::/7", "fe80::/10", "ff00::/8",
)  # fmt: skip


@dataclass(frozen=True)
class IceSettings:
    """ICE knobs of one server (or test client).

    hosts: local addresses to gather host candidates on; empty means aioice's
        own enumeration (all non-loopback interfaces).
    public_address: advertised instead of the host address, same port (1:1 NAT).
    servers: STUN/TURN urls, e.g. "stun:host:3478" or
        "turn:user:pass@host:3478?transport=tcp". aiortc uses at most one STUN
        and one TURN server (the first of each).
    allowed_remote: CIDRs remote candidates must fall in; None derives it from
        hosts (all loopback -> loopback only, else the public internet and the
        hosts' own special ranges: allowed_remote_networks).
    """

    hosts: tuple[str, ...] = ()
    public_address: str | None = None
    servers: tuple[str, ...] = ()
    allowed_remote: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # accept lists from config loaders but keep the instance hashable
        for name in ("hosts", "servers", "allowed_remote"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                if isinstance(value, str):
                    raise ValueError(f"{name} must be a sequence of str, not a str")
                object.__setattr__(self, name, tuple(value))

        for host in self.hosts:
            _check_bindable_address(host, "hosts")
        if self.public_address is not None:
            _check_bindable_address(self.public_address, "public_address")
        for url in self.servers:
            ice_server(url)  # raises ValueError on a bad url
        if self.allowed_remote is not None:
            for cidr in self.allowed_remote:
                try:
                    ipaddress.ip_network(cidr, strict=False)
                except ValueError as exc:
                    raise ValueError(f"allowed_remote: bad CIDR {cidr!r}: {exc}") from exc


def _check_bindable_address(value: str, field: str) -> None:
    try:
        address = ipaddress.ip_address(value)
    except ValueError as exc:
        raise ValueError(f"{field}: {value!r} is not an IP address") from exc
    if address.is_unspecified or address.is_multicast:
        raise ValueError(f"{field}: {value!r} cannot be an ICE candidate address")


def ice_server(url: str) -> RTCIceServer:
    """Turn "turn:user:pass@host:port" style urls into aiortc's RTCIceServer.

    aiortc's own url regex has no room for credentials, so they are split off
    here and passed as username / credential.
    """
    if not isinstance(url, str) or ":" not in url:
        raise ValueError(f"bad ICE server url {url!r}")
    scheme, rest = url.split(":", 1)
    username: str | None = None
    credential: str | None = None
    if "@" in rest:
        userinfo, rest = rest.rsplit("@", 1)
        user, sep, password = userinfo.partition(":")
        if not user or not sep:
            raise ValueError(f"bad credentials in ICE server url {url!r}")
        username, credential = unquote(user), unquote(password)
    bare = f"{scheme}:{rest}"
    try:
        parsed = parse_stun_turn_uri(bare)
    except ValueError as exc:
        raise ValueError(f"bad ICE server url {url!r}: {exc}") from exc
    if parsed["scheme"] in ("turn", "turns") and username is None:
        raise ValueError(f"TURN url {url!r} needs user:password@")
    if parsed["scheme"] in ("stun", "stuns") and username is not None:
        raise ValueError(f"STUN url {url!r} takes no credentials")
    return RTCIceServer(urls=bare, username=username, credential=credential)


def rtc_configuration(settings: IceSettings) -> RTCConfiguration:
    """RTCConfiguration with an explicit (possibly empty) server list.

    Never None: aiortc would then use stun:stun.l.google.com:19302.
    """
    return RTCConfiguration(iceServers=[ice_server(url) for url in settings.servers])


def allowed_remote_networks(settings: IceSettings) -> list[IPNetwork]:
    """Networks remote candidates must belong to: --ice-allow-remote; by default loopback when
    every ICE host is loopback, else the public internet and the special ranges (a LAN, loopback)
    that hold one of the server's own ICE addresses: a LAN server still takes its LAN's peers."""
    return list(_allowed_remote_networks(settings))


@functools.lru_cache(maxsize=16)
def _allowed_remote_networks(settings: IceSettings) -> tuple[IPNetwork, ...]:
    if settings.allowed_remote is not None:
        return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in settings.allowed_remote)
    if settings.hosts and all(ipaddress.ip_address(host).is_loopback for host in settings.hosts):
        return tuple(ipaddress.ip_network(cidr) for cidr in LOOPBACK_NETWORKS)
    own = [ipaddress.ip_address(host.split("%", 1)[0]) for host in settings.hosts or machine_host_addresses()]
    special = [ipaddress.ip_network(cidr) for cidr in SPECIAL_NETWORKS]
    own_ranges = [network for network in special if any(address in network for address in own)]
    return (*_public_networks(), *own_ranges)


@functools.cache
def _public_networks() -> tuple[IPNetwork, ...]:
    """Every address outside SPECIAL_NETWORKS, as a list of networks."""
    public: list[IPNetwork] = []
    for everything in ANY_NETWORKS:
        remaining = [ipaddress.ip_network(everything)]
        for cidr in SPECIAL_NETWORKS:
            special = ipaddress.ip_network(cidr)
            if special.version != remaining[0].version:
                continue
            remaining = [
                part
                for network in remaining
                for part in (network.address_exclude(special) if special.subnet_of(network) else [network])
            ]
        public += remaining
    return tuple(public)


def refuse_outside_checks(pc: RTCPeerConnection, settings: IceSettings) -> None:
    """Ignore connectivity checks from addresses outside the allowed remote networks.

    Dropping offered candidates is not enough: a peer also sends checks from its
    other interfaces, and aioice would learn those as peer-reflexive candidates
    and send media there (seen with Chromium: eth0 -> our 127.0.0.1). Per instance:
    the ICE connection's own check handler is wrapped. Call after
    `setRemoteDescription()` (the transports exist then) on an answerer, or
    before `setLocalDescription()` on an offerer.
    """
    networks = allowed_remote_networks(settings)
    if any(network.prefixlen == 0 for network in networks):
        return

    def accept(host: str) -> bool:
        if address_allowed(host, networks):
            return True
        logger.debug("ignored an ICE check from %s: outside the allowed networks", host)
        return False

    for gatherer in _ice_gatherers(pc):
        guard_incoming_checks(gatherer_connection(gatherer), accept)


def keep_while_media_arrives(pc: RTCPeerConnection) -> None:
    """A publisher's connection lives on while its media arrives, whether or not the peer answers
    ICE consent checks (FFmpeg's WHIP muxer does not: stream/aiortc_internals/consent.py). Call
    after `setRemoteDescription()`, before ICE completes."""
    for gatherer in _ice_gatherers(pc):
        count_media_as_consent(gatherer_connection(gatherer))


def address_allowed(host: str, networks: list[IPNetwork]) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return any(address in network for network in networks)


async def restrict_gathering(pc: RTCPeerConnection, settings: IceSettings) -> None:
    """Gather local candidates ourselves, on `settings.hosts` only.

    Call just before `pc.setLocalDescription()`, on an offerer or an answerer.
    Each not-yet-gathered ICE connection gets its candidates here and is marked
    as gathered, so aiortc's own gather() in setLocalDescription() is a no-op
    for it. With no hosts and no public_address, aiortc gathers as usual.
    Raises RuntimeError when a connection gets no candidate at all (e.g. a
    host address that is not on this machine).
    """
    if not settings.hosts and settings.public_address is None:
        return

    gatherers = [g for g in _ice_gatherers(pc) if g.state == "new"]
    # Claim each connection first: a concurrent gather_candidates() by aioice
    # becomes a no-op instead of enumerating interfaces.
    connections = [c for c in map(gatherer_connection, gatherers) if claim_gathering(c)]

    results = await asyncio.gather(*(_gather(c, settings) for c in connections))

    # Publish all at once, without awaiting in between, so aiortc's scheduled
    # __connect() never sees a half-filled set of transports.
    for connection, candidates in zip(connections, results):
        publish_candidates(connection, candidates)
        logger.debug("ICE candidates: %s", ", ".join(c.to_sdp() for c in candidates) or "none")


def _ice_gatherers(pc: RTCPeerConnection) -> list[RTCIceGatherer]:
    """Every ICE gatherer the connection currently uses, once each."""
    transports = [t.receiver.transport for t in pc.getTransceivers()]
    transports += [t.sender.transport for t in pc.getTransceivers()]
    if pc.sctp is not None:
        transports.append(pc.sctp.transport)
    gatherers: dict[int, RTCIceGatherer] = {}
    for dtls in transports:
        gatherer = dtls.transport.iceGatherer
        gatherers[id(gatherer)] = gatherer
    return list(gatherers.values())


async def _gather(connection: Connection, settings: IceSettings) -> list[Candidate]:
    addresses = gathering_addresses(connection, list(settings.hosts))
    candidates = await gather_candidates_on(connection, addresses)
    if not candidates:
        # aiortc would otherwise answer without candidates and never connect
        raise RuntimeError(f"no ICE candidate could be gathered on {addresses}")
    if settings.public_address is not None:
        candidates = _advertise_public(candidates, settings.public_address)
    return candidates


def _advertise_public(candidates: list[Candidate], public: str) -> list[Candidate]:
    """Replace host addresses of the public address' family by `public`.

    The socket's own candidate object is left as is (it stays the ICE base used
    for pairing); only the advertised copy carries the public address.
    """
    version = ipaddress.ip_address(public).version
    advertised: list[Candidate] = []
    for candidate in candidates:
        if candidate.type == "host" and ipaddress.ip_address(candidate.host).version == version:
            candidate = advertised_as(candidate, public)
        advertised.append(candidate)

    # a STUN answer behind 1:1 NAT repeats the public address: keep one
    hosts = {(c.host, c.port) for c in advertised if c.type == "host"}
    return [c for c in advertised if c.type == "host" or (c.host, c.port) not in hosts]
