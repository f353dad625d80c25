"""The five alignment key points (eyes, nose tip, mouth corners) read off a 468-point face mesh.

Recognition models align faces on five points (models.md's templates); a tracked face has a
mesh but no fresh detection, so its five points come from the mesh (MediaPipe FaceMesh
topology: eye contours, nose tip 1, mouth corners 61 and 291).
"""

from __future__ import annotations

import torch

from pipeline.swap.topology import EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT

NOSE_TIP = 1
MOUTH_CORNERS = (61, 291)  # image left, image right


def five_points(points: torch.Tensor) -> torch.Tensor:
    """[N, 468, 2+] mesh points -> [N, 5, 2]: left eye, right eye, nose, left and right mouth corner."""
    xy = points[..., :2]
    left_eye = xy[:, list(EYE_IMAGE_LEFT)].mean(dim=1)
    right_eye = xy[:, list(EYE_IMAGE_RIGHT)].mean(dim=1)
    return torch.stack((left_eye, right_eye, xy[:, NOSE_TIP], xy[:, MOUTH_CORNERS[0]], xy[:, MOUTH_CORNERS[1]]), dim=1)
