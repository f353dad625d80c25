"""The face library: who may use a face, and how many places one account may take."""

import numpy as np
import pytest

from pipeline.faces import FaceForbidden, FaceLibrary, FaceLibraryFull, FaceNotFound


def photo(height: int = 60, width: int = 40) -> np.ndarray:
    return np.zeros((height, width, 3), np.uint8)


def test_one_account_cannot_take_every_place():
    faces = FaceLibrary(max_faces=5, max_per_owner=3)
    mine = [faces.add(photo(), owner="a", format="png", size_bytes=1).id for _ in range(3)]
    with pytest.raises(FaceLibraryFull, match="this account holds its maximum of 3"):
        faces.add(photo(), owner="a", format="png", size_bytes=1)
    faces.add(photo(), owner="b", format="png", size_bytes=1)  # others still have room
    faces.delete(mine[0], owner="a")
    faces.add(photo(), owner="a", format="png", size_bytes=1)  # a deleted face frees its place
    faces.add(photo(), owner="c", format="png", size_bytes=1)
    with pytest.raises(FaceLibraryFull, match="the face library holds its maximum of 5"):
        faces.add(photo(), owner="c", format="png", size_bytes=1)


def test_a_face_keeps_its_description_not_its_photo():
    faces = FaceLibrary()
    face = faces.add(photo(60, 40), owner="a", format="jpeg", size_bytes=123, analysis="mesh")
    assert not any(isinstance(value, np.ndarray) for value in vars(face).values()), "the decoded photo is dropped"
    assert {k: face.describe()[k] for k in ("width", "height", "format", "bytes")} == {
        "width": 40,
        "height": 60,
        "format": "jpeg",
        "bytes": 123,
    }
    assert faces.get(face.id, owner="a").analysis == "mesh"
    with pytest.raises(FaceForbidden):
        faces.get(face.id, owner="b")
    with pytest.raises(FaceNotFound, match="no face 'nope'"):
        faces.get("nope")
