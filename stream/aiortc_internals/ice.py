"""ICE: the aioice Connection behind each of aiortc's ICE gatherers.

aiortc gathers candidates on every interface aioice enumerates (never 127.0.0.1) and accepts
connectivity checks from anywhere; neither has a setting. These reach the gatherer's private
Connection to gather on given addresses instead, to mark it gathered so aiortc's own gather() is a
no-op, and to wrap its `request_received` so checks from elsewhere are ignored.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable

from aioice import Candidate, Connection, TransportPolicy
from aioice.ice import get_host_addresses
from aiortc.rtcicetransport import RTCIceGatherer, parse_stun_turn_uri

__all__ = [
    "advertised_as",
    "claim_gathering",
    "gather_candidates_on",
    "gatherer_connection",
    "gathering_addresses",
    "guard_incoming_checks",
    "machine_host_addresses",
    "parse_stun_turn_uri",
    "publish_candidates",
]

# Our mark on a Connection whose checks are already guarded (wrapping twice would be harmless but
# would stack a wrapper per renegotiation).
_GUARDED_MARK = "_facefuse_checks_guarded"


def gatherer_connection(gatherer: RTCIceGatherer) -> Connection:
    return gatherer._connection


def guard_incoming_checks(connection: Connection, accept: Callable[[str], bool]) -> None:
    """Makes `connection` ignore connectivity checks from hosts `accept` refuses (aioice would
    otherwise learn them as peer-reflexive candidates and may send media there)."""
    if getattr(connection, _GUARDED_MARK, False):
        return
    request_received = connection.request_received

    def guarded(message, addr: tuple[str, int], protocol) -> None:
        if accept(addr[0]):
            request_received(message, addr, protocol)

    connection.request_received = guarded  # type: ignore[method-assign]
    setattr(connection, _GUARDED_MARK, True)


def claim_gathering(connection: Connection) -> bool:
    """Marks `connection` as gathering, so aioice's own gather_candidates() becomes a no-op;
    False when it had already started (by aioice or by an earlier claim)."""
    if connection._local_candidates_start:
        return False
    connection._local_candidates_start = True
    return True


def machine_host_addresses() -> list[str]:
    """The addresses aioice gathers on when given none: every interface's but loopback."""
    return get_host_addresses(use_ipv4=True, use_ipv6=True)


def gathering_addresses(connection: Connection, hosts: list[str]) -> list[str]:
    """The local addresses to gather `connection`'s host candidates on: `hosts`, or aioice's own
    enumeration when empty; none under a relay-only policy (RFC 9429 3.5.3: relay candidates only)."""
    if connection._transport_policy == TransportPolicy.RELAY:
        return []
    if hosts:
        return list(hosts)
    return get_host_addresses(use_ipv4=connection._use_ipv4, use_ipv6=connection._use_ipv6)


async def gather_candidates_on(connection: Connection, addresses: list[str]) -> list[Candidate]:
    """Every component's candidates on `addresses`. The sockets are bound and registered with the
    connection, and its STUN / TURN queries run, as aioice's own gathering does."""
    per_component = await asyncio.gather(
        *(
            connection.get_component_candidates(component=component, addresses=addresses)
            for component in sorted(connection._components)
        )
    )
    return [candidate for group in per_component for candidate in group]


def publish_candidates(connection: Connection, candidates: list[Candidate]) -> None:
    """Sets the connection's local candidates and marks its gathering complete."""
    connection._local_candidates += candidates
    connection._local_candidates_end = True


def advertised_as(candidate: Candidate, host: str) -> Candidate:
    """A copy of `candidate` that advertises `host`; the original stays the ICE base for pairing."""
    advertised = copy.copy(candidate)
    advertised.host = host
    advertised._network_host = host
    return advertised
