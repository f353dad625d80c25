"""POST/GET/DELETE /api/faces: the source faces users upload."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from pipeline.images import decode_image
from pipeline.faces import NoFaceFound
from signaling.app_keys import FACES, RUNNER, SESSIONS, SETTINGS
from signaling.auth import current_account
from signaling.errors import ApiError

routes = web.RouteTableDef()


T = TypeVar("T")

# An upload that sends nothing for this long is given up (slow links still send something).
UPLOAD_STALL_S = 15.0


async def _arriving(read: Awaitable[T]) -> T:
    try:
        return await asyncio.wait_for(read, UPLOAD_STALL_S)
    except TimeoutError:
        raise ApiError(408, "request_timeout", f"the upload stalled: nothing arrived for {UPLOAD_STALL_S:g} s") from None


async def _read_upload(request: web.Request, limit: int) -> bytes:
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


@routes.post("/api/faces")
async def upload_face(request: web.Request) -> web.Response:
    account = await current_account(request)
    data = await _read_upload(request, request.app[SETTINGS].http.max_upload_bytes)
    image, format_name = await asyncio.to_thread(decode_image, data)  # up to ~100 ms: off the loop
    analysis = await asyncio.to_thread(request.app[RUNNER].chain.analyse_face, image)
    if analysis is None:
        raise NoFaceFound("no face was found in the photo: upload a photo with one clearly visible face")
    face = request.app[FACES].add(image, owner=account.id, format=format_name, size_bytes=len(data), analysis=analysis)
    return web.json_response(face.describe(), status=201, headers={"Location": f"/api/faces/{face.id}"})


@routes.get("/api/faces/{face_id}")
async def get_face(request: web.Request) -> web.Response:
    account = await current_account(request)
    return web.json_response(request.app[FACES].get(request.match_info["face_id"], account.id).describe())


@routes.delete("/api/faces/{face_id}")
async def delete_face(request: web.Request) -> web.Response:
    account = await current_account(request)
    face_id = request.match_info["face_id"]
    request.app[FACES].get(face_id, account.id)  # 404 / 403 first
    # a live session swapping to it (or choosing faces by it) would fail every frame from then on
    users = [s.id for s in request.app[SESSIONS].all() if face_id in (s.face_id, s.options.get("reference_face_id"))]
    if users:
        raise ApiError(
            409,
            "face_in_use",
            f"face {face_id!r} is in use by {len(users)} live session(s) ({', '.join(users[:3])}); "
            "switch their face or end them first",
        )
    request.app[FACES].delete(face_id, account.id)
    return web.json_response({"id": face_id, "deleted": True})
