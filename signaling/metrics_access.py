"""Who may read GET /metrics without the admin key: loopback, and the networks in --metrics-allow
(a Prometheus on the private network). The metrics name no account or session, but they tell how
busy the node is and what it runs: not for everyone who can reach the port."""

from __future__ import annotations

import ipaddress

from signaling.client_address import IpAddress
from signaling.client_address import checked_network as _checked_network


def checked_network(text: str) -> str:
    """A --metrics-allow CIDR, as given; a mistake is said at start-up."""
    return _checked_network(text, "--metrics-allow")


def may_scrape(address: IpAddress | None, allowed_networks: tuple[str, ...]) -> bool:
    """Whether the client's address is loopback or in one of the networks. The address is the
    socket's peer, or the client's behind a --trusted-proxy (signaling/client_address.py), never
    an X-Forwarded-For from anyone else (the client's to write)."""
    if address is None:  # not an IP peer (a Unix socket), or a client a trusted proxy did not name
        return False
    return address.is_loopback or any(address in ipaddress.ip_network(cidr) for cidr in allowed_networks)
