"""WHIP (RFC 9725) and WHEP over HTTP, client side: POST an offer, DELETE the resource it made.

A WHIP server behind a load balancer may answer the POST with a 307 to the node that will take
the session; OBS follows it, keeping the method, the body and the Bearer token. aiohttp would drop
Authorization once a redirect leaves the host, so redirects are followed here: 307 and 308 only
(the ones that keep a POST a POST), at most MAX_REDIRECTS, each Location resolved against the URL
that answered it, and the resource URL (the final 201's Location) against the server that made it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import aiohttp
from multidict import CIMultiDict

from client.cam.errors import CamError, refusal

SDP = "application/sdp"
MAX_REDIRECTS = 5
KEEP_METHOD_REDIRECTS = (307, 308)
# An offer is answered in milliseconds; a server still silent after this is not going to answer.
HTTP_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class SdpAnswer:
    url: str  # the URL that answered 201, after any redirects
    resource_url: str  # the session's URL (absolute): what DELETE ends
    sdp: str
    headers: CIMultiDict[str]


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


async def post_offer(
    http: aiohttp.ClientSession, url: str, sdp: str, *, token: str | None = None, max_redirects: int = MAX_REDIRECTS
) -> SdpAnswer:
    """POSTs `sdp` to `url`, following 307/308 with the same body and token; the 201's answer.
    Any other status is a ServerRefusal."""
    headers = {"Content-Type": SDP, **bearer(token)}
    timeout = aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S)
    for _ in range(max_redirects + 1):
        async with http.post(
            url, data=sdp.encode(), headers=headers, allow_redirects=False, timeout=timeout
        ) as response:
            if response.status in KEEP_METHOD_REDIRECTS:
                url = _redirect_target(url, response.headers.get("Location"), token)
                continue
            body = await response.text()
            if response.status != 201:
                raise refusal(response.status, body, response.headers)
            location = response.headers.get("Location")
            if not location:
                raise CamError(f"{url} answered 201 without a Location: it is not a WHIP/WHEP server")
            return SdpAnswer(url, urljoin(url, location), body, CIMultiDict(response.headers))
    raise CamError(f"more than {max_redirects} redirects from {url}: a redirect loop, or a misconfigured server")


def _redirect_target(answered: str, location: str | None, token: str | None) -> str:
    if not location:
        raise CamError(f"{answered} answered a redirect without a Location")
    target = urljoin(answered, location)
    scheme = urlsplit(target).scheme
    if scheme not in ("http", "https"):
        raise CamError(f"{answered} redirected to {target!r}: only http and https are followed")
    if token and urlsplit(answered).scheme == "https" and scheme == "http":
        # the token went encrypted to the first server; sending it on in the clear is not ours to decide
        raise CamError(f"{answered} redirected to the unencrypted {target}: not followed with the token")
    return target


async def delete_resource(http: aiohttp.ClientSession, url: str, *, token: str | None = None) -> int:
    """DELETEs a WHIP/WHEP session; its status (404: already gone, which is as good)."""
    timeout = aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S)
    async with http.delete(url, headers=bearer(token), allow_redirects=False, timeout=timeout) as response:
        await response.read()
        return response.status
