"""Node-to-node requests, signed: a request one node forwards to another says which node sent it and
for whom (the caller it authenticated), and only a node holding the cluster's secret can say so.

`X-Facefuse-Forwarded-By: node=ID;caller=WHO;t=UNIX;sig=HEX`, WHO an account id, `admin` for the
admin key, or `-` for nobody authenticated (local mode); HEX the HMAC-SHA256, under the cluster's
secret, of the method, the path and query, the time, the node and the caller. A node believes
such a request for its caller, so the caller's API key or admin key never travels between nodes
(a registry entry's URL, which anyone with Redis access can write, would otherwise receive them).
A forwarded request is not forwarded again, nor placed: it was placed by the node that sent it.
The header from anyone else (a client, a stale or replayed signature) is refused with 403.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from urllib.parse import quote, unquote

from aiohttp import web

from signaling.errors import ApiError

FORWARDED_BY = "X-Facefuse-Forwarded-By"
# A signature older (or newer) than this is refused: a captured request cannot be replayed later.
# Nodes' clocks must agree to within it (NTP keeps them within milliseconds).
MAX_SKEW_S = 30.0
ADMIN_CALLER = "admin"
NOBODY = "-"
SECRET_BYTES = 32


@dataclass(frozen=True)
class Hop:
    node_id: str
    caller: str  # an account id, ADMIN_CALLER or NOBODY


# Where a verified hop is kept on the request, for the routes and the credential checks.
HOP = web.RequestKey("hop", Hop)
# Who the request's credential check found (an account id, or ADMIN_CALLER): what a hop sent on names.
CALLER = web.RequestKey("caller", str)


def new_secret() -> str:
    return secrets.token_urlsafe(SECRET_BYTES)


def _signature(secret: str, method: str, path_qs: str, t: str, node_id: str, caller: str) -> str:
    message = "\n".join((method.upper(), path_qs, t, node_id, caller)).encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signed_hop(secret: str, method: str, path_qs: str, node_id: str, caller: str) -> str:
    """The header's value for a request this node sends on for `caller`."""
    t = str(int(time.time()))
    sig = _signature(secret, method, path_qs, t, node_id, caller)
    return f"node={quote(node_id, safe='')};caller={quote(caller, safe='')};t={t};sig={sig}"


def verified_hop(secret: str, value: str, method: str, path_qs: str) -> Hop:
    """The hop a header's value proves; ApiError 403 for anything it does not."""
    try:
        fields = dict(part.split("=", 1) for part in value.split(";"))
        node_id, caller, t, sig = unquote(fields["node"]), unquote(fields["caller"]), fields["t"], fields["sig"]
        age = abs(time.time() - int(t))
    except (KeyError, ValueError):
        raise _refused("it is not a node's signed header") from None
    if not hmac.compare_digest(sig, _signature(secret, method, path_qs, t, node_id, caller)):
        raise _refused("its signature is not this cluster's")
    if age > MAX_SKEW_S:
        raise _refused(f"its signature is {age:.0f} s old (at most {MAX_SKEW_S:g} s)")
    return Hop(node_id, caller)


def _refused(why: str) -> ApiError:
    return ApiError(
        403,
        "forwarded_unverified",
        f"{FORWARDED_BY} is for the cluster's own nodes and {why}: clients must not send it",
    )


def hop_of(request: web.Request) -> Hop | None:
    """The verified hop this request came by (signaling/cluster/hop_check.py), or None."""
    return request.get(HOP)
