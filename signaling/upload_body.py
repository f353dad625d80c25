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
# ... and one still arriving after this long: a client trickling bytes must not hold its buffer and
# connection for good. The 10 MB limit arrives within it at about 1.5 Mbit/s.
UPLOAD_DEADLINE_S = 60.0
# The image is one part; a form may send a few fields beside it. Reading parts costs CPU per part
# (80,000 tiny ones under the size limit took 42 s), so the search for 'image' stops here.
MAX_MULTIPART_PARTS = 16


async def _arriving(read: Awaitable[T]) -> T:
    # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow the deadline's cancellation
    try:
        async with asyncio.timeout(UPLOAD_STALL_S):
            return await read
    except TimeoutError:
        raise ApiError(
            408, "request_timeout", f"the upload stalled: nothing arrived for {UPLOAD_STALL_S:g} s"
        ) from None


async def read_upload(request: web.Request, limit: int) -> bytes:
    """The image bytes from a raw body or a multipart field `image`, refusing more than `limit`."""
    try:
        async with asyncio.timeout(UPLOAD_DEADLINE_S):
            return await _read_upload(request, limit)
    except TimeoutError:
        raise ApiError(408, "request_timeout", f"the upload did not arrive within {UPLOAD_DEADLINE_S:g} s") from None


async def _read_upload(request: web.Request, limit: int) -> bytes:
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
    for _ in range(MAX_MULTIPART_PARTS):  # field before 'image' is no stall
        part = await _arriving(reader.next())
        if part is None:
            raise ApiError(400, "missing_image", "the multipart body has no field named 'image'")
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
    raise ApiError(
        400,
        "too_many_parts",
        f"no field 'image' among the first {MAX_MULTIPART_PARTS} parts: send the image with at most {MAX_MULTIPART_PARTS - 1} other fields",
    )
