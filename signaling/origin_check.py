"""Which names the server answers to, and which web pages may change things through it.

A browser lets any page send simple POSTs (a form, a text/plain fetch) to any address, and a page
whose own name is made to resolve to 127.0.0.1 (DNS rebinding) talks to a local server as its own
origin. The local mode has no key to stop either, so the Host must be one of the server's names
(421 otherwise) and a state-changing request's Origin the server's own or a listed one (403).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from aiohttp import web

from signaling.client_address import client_address, is_local_request, known_scheme
from signaling.errors import ApiError

if TYPE_CHECKING:
    from signaling.settings import ServerSettings

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Load balancers and Kubernetes probe by address (a pod IP), not by the public name.
PROBES = frozenset({"/healthz", "/livez"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})
DEFAULT_PORTS = {"http": 80, "https": 443}


def host_name(host: str) -> str:
    """The name in a Host header or a --public-host, lower case, without port, brackets or final dot."""
    host = host.strip().lower()
    if host.startswith("["):  # [::1]:8080
        name, bracket, _port = host[1:].partition("]")
        return name if bracket else ""
    return host.partition(":")[0].rstrip(".")


def checked_public_host(text: str) -> str:
    """A --public-host as a bare name; a URL or a name with a port is a mistake said at start-up."""
    name = text.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if not name or any(c in name for c in "/@ \t") or (":" in name and not _is_address(name)):
        raise ValueError(f"--public-host {text!r}: give a host name or address alone, e.g. facefuse.example.com")
    return name


def normalized_origin(text: str) -> str:
    """scheme://host[:port] in lower case, the scheme's default port left out; ValueError for
    anything else ("null", a path, another scheme)."""
    parts = urlsplit(text.strip())
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.username is not None:
        raise ValueError(f"not an http(s) origin: {text!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"an origin has no path: {text!r}")
    port = parts.port  # ValueError for a port that is no number or out of range
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{port}" if port not in (None, DEFAULT_PORTS[parts.scheme]) else "")


def checked_allowed_origin(text: str) -> str:
    try:
        return normalized_origin(text)
    except ValueError:
        raise ValueError(
            f"--allow-origin {text!r}: give an origin as scheme://host[:port], e.g. https://dash.example.com"
        ) from None


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def is_loopback_name(name: str) -> bool:
    return name == "localhost" or (_is_address(name) and ipaddress.ip_address(name).is_loopback)


def _own_origins(host: str | None, scheme: str | None = None) -> set[str]:
    """The origins a page served by this request's Host has, over `scheme` when it is known (TLS
    here, or a trusted proxy's X-Forwarded-Proto), else http or https (a proxy in front may end
    TLS without saying so)."""
    if host is None:
        return set()
    host = host.strip()
    if host.count(":") > 1 and not host.startswith("["):  # an IPv6 --public-host, bare
        host = f"[{host}]"
    try:
        return {normalized_origin(f"{either}://{host}") for either in ([scheme] if scheme else DEFAULT_PORTS)}
    except ValueError:
        return set()


def host_and_origin_check(settings: ServerSettings) -> Callable:
    http = settings.http
    # Local mode: always (the DNS-rebinding target has no key). With a key, only when the operator
    # names the public hosts: behind a proxy the Host may be anything and the key guards.
    check_host = settings.local_mode or bool(http.public_hosts)
    names = set(http.public_hosts)
    if host_name(http.host) not in WILDCARDS:
        names.add(host_name(http.host))
    # A --public-host's pages are the server's own also when a proxy passes its upstream address as Host.
    allowed_origins = frozenset(http.allowed_origins).union(*(_own_origins(name) for name in http.public_hosts))

    def answers_to(name: str) -> bool:
        return name in names or is_loopback_name(name)

    @web.middleware
    async def checked(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if settings.local_mode and not is_local_request(request):
            # the server listens on loopback only, but a proxy on this machine can pass on others' requests
            address = client_address(request)
            raise ApiError(
                403,
                "local_only",
                "without an admin key this server serves this machine only, and this request came through a "
                f"proxy{f' from {address}' if address else ''}: start it with an admin key to serve others (a proxy "
                "of your own on this machine that serves only this machine: --trusted-proxy with its address)",
            )
        host = request.headers.get("Host")  # absent only from HTTP/1.0 clients, never from a browser
        if check_host and host is not None and not (request.path in PROBES and not settings.local_mode):
            if not answers_to(host_name(host)):
                raise ApiError(
                    421,
                    "misdirected_request",
                    f"this server does not answer to the name {host[:100]!r}: use 127.0.0.1 or localhost"
                    + ("" if settings.local_mode else " or a --public-host name"),
                )
        origin = request.headers.get("Origin")
        if request.method in STATE_CHANGING and origin is not None:
            try:
                normalized = normalized_origin(origin)
            except ValueError:
                normalized = None  # "null" (a sandboxed page, a file:// page) or garbage
            own = _own_origins(host, known_scheme(request))
            if normalized is None or (normalized not in allowed_origins and normalized not in own):
                raise ApiError(
                    403,
                    "origin_not_allowed",
                    f"requests from the web page at {origin[:100]!r} may not change anything here: only this "
                    "server's own pages and the origins given by --allow-origin",
                )
        return await handler(request)

    return checked
