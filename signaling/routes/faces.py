"""POST/GET/DELETE /api/faces: the source faces users upload, and their thumbnails."""

from __future__ import annotations

import asyncio

from aiohttp import web

from pipeline.faces import Face, FaceForbidden, FaceNotFound, NoFaceFound
from pipeline.identity.thumbnail import face_thumbnail
from pipeline.images import decode_image
from signaling.app_keys import FACES, PHOTO_ANALYSIS, SESSIONS, SETTINGS, SHARED_FACES
from signaling.auth import current_account
from signaling.cluster.routing import sessions_elsewhere
from signaling.errors import ApiError
from signaling.upload_body import read_upload

routes = web.RouteTableDef()


def describe_face(face: Face) -> dict[str, object]:
    """The face's description with the URL of its thumbnail (null where the chain found no face).
    `face_size` and `warnings` are there with every chain (null and empty where it measures none),
    so a page reads one shape."""
    thumbnail_url = f"/api/faces/{face.id}/thumbnail" if face.thumbnail is not None else None
    return {"face_size": None, "warnings": [], **face.describe(), "thumbnail_url": thumbnail_url}


async def describe_library(request: web.Request, account_id: str) -> list[dict[str, object]]:
    """What GET /api/faces lists (and the dashboard's events): the account's faces, oldest first
    (with a shared store, those uploaded on every node)."""
    shared = request.app[SHARED_FACES]
    if shared is not None:
        return await shared.describe_all(account_id)
    return [describe_face(face) for face in request.app[FACES].of_owner(account_id)]


@routes.post("/api/faces")
async def upload_face(request: web.Request) -> web.Response:
    account = await current_account(request)
    data = await read_upload(request, request.app[SETTINGS].http.max_upload_bytes)
    image, format_name = await asyncio.to_thread(decode_image, data)  # up to ~100 ms: off the loop
    analysis = await asyncio.to_thread(request.app[PHOTO_ANALYSIS].analyse, image)
    if analysis is None:
        raise NoFaceFound("no face was found in the photo: upload a photo with one clearly visible face")
    # pose, eyes, occlusion, blur, light: a photo the swap cannot use is refused, a weak one warned of
    checks = await asyncio.to_thread(request.app[PHOTO_ANALYSIS].check, analysis)
    thumbnail = await asyncio.to_thread(face_thumbnail, analysis)
    face = request.app[FACES].add(
        image,
        owner=account.id,
        format=format_name,
        size_bytes=len(data),
        analysis=analysis,
        checks=checks,
        thumbnail=thumbnail,
    )
    if request.app[SHARED_FACES] is not None:
        await request.app[SHARED_FACES].publish(face)  # every node can use it; the limits counted there
    return web.json_response(describe_face(face), status=201, headers={"Location": f"/api/faces/{face.id}"})


@routes.get("/api/faces")
async def list_faces(request: web.Request) -> web.Response:
    account = await current_account(request)
    return web.json_response({"faces": await describe_library(request, account.id)})


@routes.get("/api/faces/{face_id}")
async def get_face(request: web.Request) -> web.Response:
    account = await current_account(request)
    face_id = request.match_info["face_id"]
    await request.app[FACES].fetch(face_id, account.id)
    return web.json_response(describe_face(request.app[FACES].get(face_id, account.id)))


@routes.get("/api/faces/{face_id}/thumbnail")
async def get_thumbnail(request: web.Request) -> web.Response:
    """The face's JPEG thumbnail. Another account's face is 404 as an unknown one: an image URL
    that answered 403 would say the face exists."""
    account = await current_account(request)
    face_id = request.match_info["face_id"]
    try:
        await request.app[FACES].fetch(face_id, account.id)
        face = request.app[FACES].get(face_id, account.id)
    except FaceForbidden:
        raise FaceNotFound(f"no face {face_id!r}") from None
    if face.thumbnail is None:
        raise ApiError(404, "thumbnail_not_found", f"face {face_id!r} has no thumbnail: this chain finds no face")
    # the face never changes under its id; private: it is this account's
    return web.Response(
        body=face.thumbnail, content_type="image/jpeg", headers={"Cache-Control": "private, max-age=3600"}
    )


@routes.delete("/api/faces/{face_id}")
async def delete_face(request: web.Request) -> web.Response:
    account = await current_account(request)
    face_id = request.match_info["face_id"]
    await request.app[FACES].fetch(face_id, account.id)
    request.app[FACES].get(face_id, account.id)  # 404 / 403 first
    # a live session swapping to it (or choosing faces by it) would fail every frame from then on;
    # with several nodes, the account's sessions on the others too
    here = [s.snapshot() for s in request.app[SESSIONS].all()]
    elsewhere, _unreachable = await sessions_elsewhere(request, account.id)
    users = [
        s["session_id"] for s in here + elsewhere if face_id in (s["face_id"], s["options"].get("reference_face_id"))
    ]
    if users:
        raise ApiError(
            409,
            "face_in_use",
            f"face {face_id!r} is in use by {len(users)} live session(s) ({', '.join(users[:3])}); "
            "switch their face or end them first",
        )
    if request.app[SHARED_FACES] is not None:
        await request.app[SHARED_FACES].delete(face_id, account.id)
    else:
        request.app[FACES].delete(face_id, account.id)
    return web.json_response({"id": face_id, "deleted": True})
