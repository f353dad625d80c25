"""Faces looked for in frames turned by quarter turns, found where they are in the frames as sent.

RetinaFace finds faces rolled up to about 60 degrees; a head lying on its side (a person lying
down, a camera on its side) or upside down is not found, or found with key points that mesh to
nothing (obama.jpg upside down: both eyes on one spot). The tracker follows a face that rolls
gradually, but one that first appears so turned was never swapped. Looking at the frame turned
a quarter or half turn finds it upright; boxes and key points are turned back.
"""

from __future__ import annotations

import torch

from pipeline.detect.detector import Detections, FaceDetector


def detect_turned(detector: FaceDetector, frames: torch.Tensor, turns: int) -> list[Detections]:
    """The faces in frames [N, H, W, 3] uint8 found with the frames turned `turns` quarter turns
    counter-clockwise (np.rot90's k), in the frames' own pixels. Key points keep the detector's
    order as seen in the turned frame (its image-left eye first), so the eye line still gives the
    face's roll."""
    turns %= 4
    if turns == 0:
        return detector.detect(frames)
    height, width = frames.shape[1:3]
    found = detector.detect(torch.rot90(frames, turns, dims=(1, 2)).contiguous())
    return [_turned_back(faces, turns, height, width) for faces in found]


def turned_back_points(points: torch.Tensor, turns: int, height: int, width: int) -> torch.Tensor:
    """(x, y) points [..., 2] in an H x W frame turned `turns` quarter turns counter-clockwise ->
    the same points in the frame as it was."""
    x, y = points[..., 0], points[..., 1]
    if turns % 4 == 1:  # the turned frame's (x, y) is the frame's (y, W - x)
        back = (width - y, x)
    elif turns % 4 == 2:
        back = (width - x, height - y)
    elif turns % 4 == 3:
        back = (y, height - x)
    else:
        back = (x, y)
    return torch.stack(back, dim=-1)


def _turned_back(faces: Detections, turns: int, height: int, width: int) -> Detections:
    corners = turned_back_points(faces.boxes.view(-1, 2, 2), turns, height, width)  # [K, 2, 2]
    boxes = torch.cat((corners.amin(dim=1), corners.amax(dim=1)), dim=1)
    return Detections(boxes, faces.scores, turned_back_points(faces.keypoints, turns, height, width))
