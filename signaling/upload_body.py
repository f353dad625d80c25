"""An upload's image bytes (a raw body or a multipart field `image`), or the 4xx that says why not."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from signaling.errors import ApiError

T = TypeVar("T")

# An upload that sends nothing for this long is given up (slow links still send something).
UPLOAD_STALL_S = 15.0


async def _arriving(read: Awaitable[T]) -> T:
    try:
        return await asyncio.wait_for(read, UPLOAD_STALL_S)
    except TimeoutError:
        raise ApiError(408, "request_timeout", f"the upload stalled: nothing arrived for {UPLOAD_STALL_S:g} s") from None


async def read_upload(request: web.Request, limit: int) -> bytes:
    """The image bytes from a raw body or a multipart field `image`, refusing more than `limit`."""
    too_large = ApiError(413, "payload_too_large", f"uploads are limited to {limit // (1024 * 1024)} MB")
    if request.content_length is not None and request.content_length > limit + 64 * 1024:
        raise too_large
    if request.content_type.startswith("multipart/"):
        try:
            return await _read_multipart_image(request, limit, too_large)
        except (ValueError, HttpProcessingError) as exc:  # aiohttp's: no boundary, a truncated or unterminated
            # part, a part's header line over 8 KiB or too many of them
            raise ApiError(400, "invalid_multipart", f"the multipart body could not be read: {exc}") from None
    data = bytearray()
    while chunk := await _arriving(request.content.read(64 * 1024)):
        data += chunk
        if len(data) > limit:
            raise too_large
    if not data:
        raise ApiError(400, "empty_body", "send the image as the request body (or a multipart field 'image')")
    return bytes(data)


async def _read_multipart_image(request: web.Request, limit: int, too_large: ApiError) -> bytes:
    reader = await request.multipart()
    total = 0  # every part counts against the limit, and each is read chunk by chunk: a slow
    while (part := await _arriving(reader.next())) is not None:  # field before 'image' is no stall
        if not isinstance(part, BodyPartReader):
            raise ApiError(400, "invalid_multipart", "a multipart body inside the multipart body is not read")
        data = bytearray()
        while chunk := await _arriving(part.read_chunk()):
            total += len(chunk)
            if total > limit:
                raise too_large
            if getattr(part, "name", None) == "image":
                data += chunk
        if getattr(part, "name", None) == "image":
            if not data:  # a form sent with no file chosen
                raise ApiError(400, "empty_body", "the multipart field 'image' is empty: choose an image file")
            return bytes(data)
    raise ApiError(400, "missing_image", "the multipart body has no field named 'image'")
