"""Who may read GET /metrics without the admin key: loopback, and the networks in --metrics-allow
(a Prometheus on the private network). The metrics name no account or session, but they tell how
busy the node is and what it runs: not for everyone who can reach the port."""

from __future__ import annotations

import ipaddress


def checked_network(text: str) -> str:
    """A --metrics-allow CIDR, as given; a mistake is said at start-up."""
    try:
        ipaddress.ip_network(text.strip())
    except ValueError as exc:
        raise ValueError(
            f"--metrics-allow {text!r} is not a network such as 10.0.0.0/8 or 192.0.2.7/32: {exc}"
        ) from None
    return text.strip()


def peer_may_scrape(peer: str | None, allowed_networks: tuple[str, ...]) -> bool:
    """Whether the client's address is loopback or in one of the networks. The address is the
    socket's peer, or the client's behind a --trusted-proxy (signaling/client_address.py), never
    an X-Forwarded-For from anyone else (the client's to write)."""
    if not peer:
        return False
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])  # an IPv6 zone index
    except ValueError:  # not an IP peer (a Unix socket)
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # a dual-stack socket's IPv4 client
    return address.is_loopback or any(address in ipaddress.ip_network(cidr) for cidr in allowed_networks)
