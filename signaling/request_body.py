"""A request's JSON body, or the 400 that says why it is not one."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from signaling.errors import ApiError


async def json_object(request: web.Request, shape: str = "") -> dict[str, Any]:
    """The body as a dict; `shape` (e.g. '{"face_id": "..."}') tells the client what was expected."""
    try:
        body = await request.json()
    except ValueError:
        raise ApiError(400, "invalid_json", "the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", f"expected a JSON object {shape}".rstrip())
    return body
