"""The source faces users upload: what the chain computed of each photo, and who may use it."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np


class FaceNotFound(KeyError):
    code = "face_not_found"

    def __str__(self) -> str:  # the message as written (KeyError's own quotes it like a key)
        return str(self.args[0]) if self.args else ""


class FaceForbidden(PermissionError):
    code = "forbidden"


# The smallest face (the larger side of its mesh box, in the photo's pixels) a swap is made
# from: what is refused is clearly too small. Smaller source faces give swaps nearer the target
# than the source in the weakest test pair (about 30 px: far nearer), and a reference photo's
# identity is as unreliable there (bench/results/2026-12-02-smallest-source-face.md).
MIN_FACE_SIZE = 40


class NoFaceFound(ValueError):
    code = "no_face"


class FaceTooSmall(ValueError):
    code = "face_too_small"


class UnusableFace(ValueError):
    """A face the swap cannot be made from (pipeline/identity/source_checks.py says why)."""

    code = "unusable_face"


class FaceTurnedTooFar(UnusableFace):
    code = "face_turned_too_far"


class FaceOccluded(UnusableFace):
    code = "face_occluded"


class FaceLibraryFull(RuntimeError):
    code = "face_library_full"


class FaceStoreUnavailable(RuntimeError):  # not an OSError: a client leaving is another matter
    """The shared face store (Redis, on several nodes) cannot be reached: 503, try again."""

    code = "face_store_unavailable"


@dataclass(frozen=True)
class Face:
    id: str
    owner: str  # the account that uploaded it
    width: int  # of the (upright) photo; the photo itself is not kept: a 40 MP one is 120 MB
    height: int
    format: str
    size_bytes: int
    created_at: float
    analysis: object = None  # what the chain computed once from the photo (e.g. the source face's mesh)
    checks: object = None  # how usable the photo is (identity/source_checks.py), for the chains that check it
    thumbnail: bytes | None = None  # a small JPEG of the face (identity/thumbnail.py), where the chain found one

    def describe(self) -> dict[str, object]:
        description: dict[str, object] = {
            "id": self.id,
            "width": self.width,
            "height": self.height,
            "format": self.format,
            "bytes": self.size_bytes,
            "created_at": self.created_at,
        }
        face_size = getattr(self.analysis, "face_size", None)  # a face chain's analysis measures the face
        if face_size is not None:
            description["face_size"] = round(face_size)
        if self.checks is not None:
            description.update(self.checks.describe())  # "checks" and "warnings"
        return description


# Brings a face another node uploaded into this node's library: (face id, owner) -> None.
FaceFetcher = Callable[[str, str | None], Awaitable[None]]


class FaceLibrary:
    """Thread-safe: HTTP handlers add faces while the runner's thread reads them.

    With a shared store (signaling/shared_faces.py) the library is this node's copy of the faces
    it uses: the store holds every face and the limits, and `fetch` brings one in before use (the
    runner's thread only ever reads what is here)."""

    def __init__(self, max_faces: int = 256, max_per_owner: int = 32) -> None:
        self.max_faces = max_faces
        self.max_per_owner = max_per_owner  # so one account cannot take every place
        self._faces: dict[str, Face] = {}
        self._lock = threading.Lock()
        self.fetcher: FaceFetcher | None = None  # set by the shared store

    async def fetch(self, face_id: str, owner: str | None = None) -> None:
        """Makes sure a face uploaded on another node is here (no-op without a shared store); the
        sync get() that follows then answers as for a face uploaded here."""
        if self.fetcher is not None:
            await self.fetcher(face_id, owner)

    async def fetch_named(self, owner: str | None, *face_ids: object) -> None:
        """fetch() for each of the ids a request names (None and non-strings skipped: the request's
        own checks say what is wrong with them)."""
        for face_id in face_ids:
            if isinstance(face_id, str) and face_id:
                await self.fetch(face_id, owner)

    def keep(self, face: Face) -> None:
        """A face read from the shared store, which held it to the limits when it was uploaded."""
        with self._lock:
            self._faces[face.id] = face

    def has(self, face_id: str) -> bool:
        with self._lock:
            return face_id in self._faces

    def add(
        self,
        image: np.ndarray,
        *,
        owner: str,
        format: str,
        size_bytes: int,
        analysis: object = None,
        checks: object = None,
        thumbnail: bytes | None = None,
    ) -> Face:
        """Keeps what the chain computed of the photo (`analysis`, `checks`, the face's `thumbnail`)
        and the photo's description."""
        height, width = image.shape[:2]
        face = Face(
            secrets.token_urlsafe(9), owner, width, height, format, size_bytes, time.time(), analysis, checks, thumbnail
        )
        with self._lock:
            if self.fetcher is None:  # a shared store counts the limits over every node itself
                if len(self._faces) >= self.max_faces:
                    raise FaceLibraryFull(f"the face library holds its maximum of {self.max_faces}; delete one first")
                if sum(kept.owner == owner for kept in self._faces.values()) >= self.max_per_owner:
                    raise FaceLibraryFull(
                        f"this account holds its maximum of {self.max_per_owner} faces; delete one first"
                    )
            self._faces[face.id] = face
        return face

    def get(self, face_id: str, owner: str | None = None) -> Face:
        """The face; FaceForbidden when `owner` is given and it belongs to another account."""
        with self._lock:
            face = self._faces.get(face_id)
        if face is None:
            raise FaceNotFound(f"no face {face_id!r}")
        if owner is not None and face.owner != owner:
            raise FaceForbidden(f"face {face_id!r} belongs to another account")
        return face

    def of_owner(self, owner: str) -> list[Face]:
        """The account's faces, oldest first."""
        with self._lock:
            faces = [face for face in self._faces.values() if face.owner == owner]
        return sorted(faces, key=lambda face: face.created_at)

    def delete(self, face_id: str, owner: str | None = None) -> None:
        self.get(face_id, owner)
        with self._lock:
            self._faces.pop(face_id, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._faces)
