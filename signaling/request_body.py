"""A request's JSON body, or the 400 that says why it is not one."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from signaling.errors import ApiError

# A JSON body (at most aiohttp's 1 MiB) that has not arrived by then is not coming: a client that
# stops mid-body must not hold its buffer and connection for good.
JSON_BODY_TIMEOUT_S = 10.0


async def json_object(request: web.Request, shape: str = "") -> dict[str, Any]:
    """The body as a dict; `shape` (e.g. '{"face_id": "..."}') tells the client what was expected."""
    if request.content_type != "application/json":  # a cross-site form or text/plain fetch sends no JSON type
        raise ApiError(
            415,
            "unsupported_media_type",
            f"send the body as Content-Type: application/json, not {request.content_type[:60]!r}",
        )
    try:
        async with asyncio.timeout(JSON_BODY_TIMEOUT_S):  # not wait_for: on 3.11 it can swallow a cancellation
            body = await request.json()
    except TimeoutError:
        raise ApiError(408, "request_timeout", f"the body did not arrive within {JSON_BODY_TIMEOUT_S:g} s") from None
    except (ValueError, RecursionError):  # RecursionError: nested too deep for the parser
        raise ApiError(400, "invalid_json", "the body is not valid JSON") from None
    except LookupError:  # a Content-Type charset Python has no codec for
        raise ApiError(
            415, "unsupported_media_type", f"unknown charset {str(request.charset)[:40]!r}: send UTF-8 JSON"
        ) from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", f"expected a JSON object {shape}".rstrip())
    return body
