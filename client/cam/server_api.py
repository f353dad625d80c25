"""The JSON requests `facefuse cam` makes besides WHIP and WHEP: the face to swap to (uploaded
from a photo, or an id already on the server) and the session's live description."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiohttp

from client.cam.errors import CamError, ServerRefusal, refusal
from client.cam.whip_http import HTTP_TIMEOUT_S, bearer

PHOTO_TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".webp": "image/webp"}
FACE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # the server's ids are URL-safe tokens


async def api_request(
    http: aiohttp.ClientSession, method: str, url: str, *, token: str | None, **kwargs: Any
) -> dict[str, Any]:
    """A JSON request; a ServerRefusal for a status of 400 or more."""
    headers = {**bearer(token), **kwargs.pop("headers", {})}
    timeout = aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S)
    async with http.request(method, url, headers=headers, timeout=timeout, **kwargs) as response:
        body = await response.text()
        if response.status >= 400:
            raise refusal(response.status, body, response.headers)
        return await response.json(content_type=None)


async def face_to_swap_to(
    http: aiohttp.ClientSession, server: str, face: str, *, token: str | None
) -> tuple[str, bool]:
    """(face id, whether it was uploaded here): a photo file is uploaded, anything else is taken as
    the id of a face already on the server and checked, so a wrong one is said before streaming."""
    path = Path(face)
    if path.is_file():
        content_type = PHOTO_TYPES.get(path.suffix.lower(), "application/octet-stream")
        try:
            described = await api_request(
                http,
                "POST",
                f"{server}/api/faces",
                token=token,
                data=path.read_bytes(),
                headers={"Content-Type": content_type},
            )
        except ServerRefusal as refused:
            if refused.status in (400, 413, 415, 422):
                raise CamError(
                    f"the server refused the photo {face} ({refused.status}): {refused.server_message}"
                ) from None
            raise
        return described["id"], True
    if not FACE_ID.fullmatch(face):
        raise CamError(f"no photo at {face} (--face takes a JPEG, PNG or WebP photo, or the id of an uploaded face)")
    try:
        await api_request(http, "GET", f"{server}/api/faces/{face}", token=token)
    except ServerRefusal as refused:
        if refused.status == 404:
            raise CamError(
                f"no face {face!r} on this server, and no photo file of that name: "
                "give --face a photo, or the id an upload answered"
            ) from None
        raise
    return face, False


async def session_description(
    http: aiohttp.ClientSession, server: str, session_id: str, *, token: str | None
) -> dict[str, Any] | None:
    """GET /api/sessions/{id}; None once the server no longer knows the session (it ended)."""
    try:
        return await api_request(http, "GET", f"{server}/api/sessions/{session_id}", token=token)
    except ServerRefusal as refused:
        if refused.status == 404:
            return None
        raise
