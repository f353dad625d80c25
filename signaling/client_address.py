"""Who sent a request, and over which scheme: the one rule every check of the peer address or the
scheme uses (local mode, GET /metrics, the Origin check, the serving banner's URL).

The socket's peer is the client unless it is a proxy the operator trusts (--trusted-proxy CIDR):
only then are X-Forwarded-For and X-Forwarded-Proto read, since anyone else can write them. A
proxy's own address never counts as the client's: a request that a trusted proxy on 127.0.0.1
forwards from elsewhere is not a loopback request.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Headers a proxy adds; a browser on this machine never sends them (local mode reads them as a sign
# of a proxy nobody declared: see came_through_untrusted_proxy).
FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Real-IP")
SCHEMES = frozenset({"http", "https"})


def checked_network(text: str, flag: str) -> str:
    """A CIDR given to `flag`, as given; a mistake is said at start-up."""
    try:
        ipaddress.ip_network(text.strip())
    except ValueError as exc:
        raise ValueError(f"{flag} {text!r} is not a network such as 10.0.0.0/8 or 192.0.2.7/32: {exc}") from None
    return text.strip()


def checked_trusted_proxy(text: str) -> str:
    return checked_network(text, "--trusted-proxy")


def parse_address(text: str | None) -> IpAddress | None:
    """An address as a header or a socket gives it (an IPv6 zone index dropped, a dual-stack
    socket's IPv4-mapped address as IPv4); None for anything else (a Unix socket, garbage)."""
    if not text:
        return None
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [2001:db8::1] or [2001:db8::1]:port
        text = text[1 : text.index("]")]
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(request: web.Request) -> tuple[IpNetwork, ...]:
    from signaling.app_keys import SETTINGS  # here: app_keys imports the settings, which import this module

    return tuple(ipaddress.ip_network(cidr) for cidr in request.app[SETTINGS].http.trusted_proxies)


def _is_trusted(address: IpAddress | None, trusted: tuple[IpNetwork, ...]) -> bool:
    return address is not None and any(address in network for network in trusted)


def peer_is_trusted_proxy(request: web.Request) -> bool:
    return _is_trusted(parse_address(request.remote), _trusted(request))


def client_address(request: web.Request) -> IpAddress | None:
    """The client's address: the socket's peer, or, while that is a trusted proxy, the address
        that proxy says it forwarded for (X-Forwarded-For, read from the right: each trusted hop
        appends the address it got the request from, and whatever lies left of the first untrusted
        one is the client's to write). None when a trusted proxy names no client or something that is
    no address, and when every hop is a trusted proxy's (a proxy's address is never the client's)."""
    trusted = _trusted(request)
    address = parse_address(request.remote)
    if not _is_trusted(address, trusted):
        return address
    hops = [hop for value in request.headers.getall("X-Forwarded-For", ()) for hop in value.split(",")]
    if not hops:
        return None  # the proxy did not say for whom: its own address is not the client's
    while hops and _is_trusted(address, trusted):
        address = parse_address(hops.pop())
        if address is None:
            return None  # not an address where a trusted proxy wrote one: unknown, so trusted for nothing
    if _is_trusted(address, trusted):
        return None  # every hop a trusted proxy's: the client cannot be told from a proxy, so it is nobody
    return address


def known_scheme(request: web.Request) -> str | None:
    """ "https" over TLS served here; over plain HTTP the scheme a trusted proxy says the client
    used (its last X-Forwarded-Proto value: what the nearest proxy saw); None when nobody that is
    trusted says (a proxy in front may end TLS without telling)."""
    if request.secure:
        return "https"
    if not peer_is_trusted_proxy(request):
        return None
    values = [v.strip().lower() for value in request.headers.getall("X-Forwarded-Proto", ()) for v in value.split(",")]
    return values[-1] if values and values[-1] in SCHEMES else None


def came_through_untrusted_proxy(request: web.Request) -> bool:
    """A forwarding header from a peer that is not a trusted proxy: the headers are ignored, but
    they say a proxy (on this machine, if the peer is loopback) passed on someone else's request."""
    return not peer_is_trusted_proxy(request) and any(name in request.headers for name in FORWARDING_HEADERS)


def is_local_request(request: web.Request) -> bool:
    """From this machine: the client is loopback and no undeclared proxy stands between."""
    address = client_address(request)
    return address is not None and address.is_loopback and not came_through_untrusted_proxy(request)
