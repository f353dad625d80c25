"""Faces shared by every node on one Redis (issue #28): an upload on one node is usable on all.

Each upload's record (pipeline/face_record.py: what the chain computed of the photo, about 2 MB)
is kept in Redis with its description and thumbnail; the per-account and overall face limits are
counted there, so they hold across nodes. A node reads a face it does not have the first time a
request or command of its owner names it (FaceLibrary.fetch), and from then on the chain reads its
own copy: nothing leaves Redis on the frame path. A copy whose face was deleted on another node is
dropped the next time it is named. Without Redis the node's own library is the whole store.

Keys (the quota store's prefix; an account's keys in its own Redis Cluster slot, as the meter's):

    <prefix>:{<account>}:faces              set: the account's face ids
    <prefix>:{<account>}:face:<id>          string: the face's record
    <prefix>:{<account>}:face_desc:<id>     string: its description (JSON), for listing without the record
    <prefix>:{<account>}:face_thumb:<id>    string: its thumbnail JPEG (absent: none)
    <prefix>:face_owner:<id>                string: the owning account (403 rather than 404 for another's)
    <prefix>:face_count                     string: faces held by all accounts
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import torch
from redis import asyncio as aioredis
from redis.exceptions import RedisError

from pipeline.face_record import BadFaceRecord, decode_face, encode_face
from pipeline.faces import Face, FaceForbidden, FaceLibrary, FaceLibraryFull, FaceNotFound, FaceStoreUnavailable
from quota.redis_keys import account_tag

# A Redis that stops answering is face_store_unavailable after this long (as the cluster's look-ups,
# signaling/cluster/startup.py), not a command or a request waiting forever.
FACE_STORE_TIMEOUT_S = 2.0

logger = logging.getLogger(__name__)

# One account's face goes in whole or not at all, and only under its limit.
_ADD_FACE = """
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[2], ARGV[3])
redis.call('SET', KEYS[3], ARGV[4])
if ARGV[5] ~= '' then redis.call('SET', KEYS[4], ARGV[5]) end
redis.call('SADD', KEYS[1], ARGV[2])
return 1
"""


class SharedFaces:
    def __init__(
        self,
        library: FaceLibrary,
        redis_url: str,
        *,
        prefix: str,
        device: torch.device | str,
        describe: Any,
    ) -> None:
        self._library = library
        self._prefix = prefix
        self._device = device
        self._describe = describe  # Face -> its API description (signaling/routes/faces.py)
        self._client = aioredis.Redis.from_url(
            redis_url, socket_timeout=FACE_STORE_TIMEOUT_S, socket_connect_timeout=FACE_STORE_TIMEOUT_S
        )
        self._add_face = self._client.register_script(_ADD_FACE)
        library.fetcher = self.fetch

    async def aclose(self) -> None:
        self._library.fetcher = None
        await self._client.aclose()

    # -- keys ----------------------------------------------------------------------------
    def _account(self, owner: str) -> str:
        return f"{self._prefix}:{{{account_tag(owner)}}}:"

    def _keys(self, owner: str, face_id: str) -> tuple[str, str, str, str]:
        base = self._account(owner)
        return base + "faces", base + f"face:{face_id}", base + f"face_desc:{face_id}", base + f"face_thumb:{face_id}"

    def _owner_key(self, face_id: str) -> str:
        return f"{self._prefix}:face_owner:{face_id}"

    @property
    def _count_key(self) -> str:
        return f"{self._prefix}:face_count"

    # -- what the routes call ------------------------------------------------------------
    async def publish(self, face: Face) -> None:
        """A face just uploaded here (already in the library) goes to the store, within the limits;
        refused (FaceLibraryFull), it leaves the library again."""
        try:
            await self._store(face)
        except BaseException:
            self._library.delete(face.id)
            raise

    async def fetch(self, face_id: str, owner: str | None) -> None:
        """Brings the face into the library if the store has it (FaceLibrary.fetch)."""
        if owner is None:
            return  # the runner's own lookups: only faces already here
        _, record_key, _, _ = self._keys(owner, face_id)
        async with _store_errors("reading a face"):
            if self._library.has(face_id):
                if not await self._client.exists(record_key) and not await self._client.exists(
                    self._owner_key(face_id)
                ):
                    self._library.delete(face_id)  # deleted on another node since it was read
                return
            record = await self._client.get(record_key)
            if record is None:
                other = await self._client.get(self._owner_key(face_id))
                if other is not None and other.decode() != owner:
                    raise FaceForbidden(f"face {face_id!r} belongs to another account")
                return  # unknown: the library's get() says so
        try:
            face = await asyncio.to_thread(decode_face, record, self._device)
        except BadFaceRecord as exc:
            logger.error("face %s: its record in Redis cannot be read: %s", face_id, exc)
            raise FaceNotFound(f"face {face_id!r} cannot be read on this server: upload it again") from exc
        self._library.keep(face)

    async def describe_all(self, owner: str) -> list[dict[str, object]]:
        """The account's faces on every node, oldest first."""
        faces_key = self._account(owner) + "faces"
        async with _store_errors("listing faces"):
            ids = sorted(member.decode() for member in await self._client.smembers(faces_key))
            descriptions = await self._client.mget([self._keys(owner, face_id)[2] for face_id in ids]) if ids else []
        listed = [json.loads(text) for text in descriptions if text is not None]
        return sorted(listed, key=lambda description: description["created_at"])

    async def delete(self, face_id: str, owner: str) -> None:
        faces_key, record_key, desc_key, thumb_key = self._keys(owner, face_id)
        async with _store_errors("deleting a face"):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.srem(faces_key, face_id)
                pipe.delete(record_key, desc_key, thumb_key)
                removed, _ = await pipe.execute()
            if removed:
                await self._client.delete(self._owner_key(face_id))
                await self._client.decr(self._count_key)
        self._library.delete(face_id)

    # -- inside ----------------------------------------------------------------------------
    async def _store(self, face: Face) -> None:
        record = await asyncio.to_thread(encode_face, face)
        description = json.dumps(self._describe(face))
        faces_key, record_key, desc_key, thumb_key = self._keys(face.owner, face.id)
        async with _store_errors("storing a face"):
            # the overall limit: counted first, given back if the account's own refuses
            if await self._client.incr(self._count_key) > self._library.max_faces:
                await self._client.decr(self._count_key)
                raise FaceLibraryFull(
                    f"the face library holds its maximum of {self._library.max_faces}; delete one first"
                )
            added = await self._add_face(
                keys=[faces_key, record_key, desc_key, thumb_key],
                args=[self._library.max_per_owner, face.id, record, description, face.thumbnail or b""],
            )
            if not added:
                await self._client.decr(self._count_key)
                raise FaceLibraryFull(
                    f"this account holds its maximum of {self._library.max_per_owner} faces; delete one first"
                )
            await self._client.set(self._owner_key(face.id), face.owner)


@contextlib.asynccontextmanager
async def _store_errors(what: str) -> AsyncIterator[None]:
    """Redis failing is FaceStoreUnavailable (503), as the quota store's failures are."""
    try:
        yield
    except RedisError as exc:
        raise FaceStoreUnavailable(f"face store (Redis) unavailable while {what}: {exc}") from exc
