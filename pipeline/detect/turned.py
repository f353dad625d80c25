"""Faces looked for in frames turned by quarter turns, found where they are in the frames as sent.

RetinaFace finds faces rolled up to about 60 degrees; a head lying on its side (a person lying
down, a camera on its side) or upside down is not found, or found with key points that mesh to
nothing (obama.jpg upside down: both eyes on one spot). The tracker follows a face that rolls
gradually, but one that first appears so turned was never swapped. Looking at the frame turned
a quarter or half turn finds it upright; boxes and key points are turned back.
"""

from __future__ import annotations

import math

import torch

from pipeline.detect.detector import Detections, FaceDetector
from pipeline.detect.nms import batched_nms
from pipeline.landmarks.crops import LEFT_EYE_CORNER, RIGHT_EYE_CORNER


def detect_turned(
    detector: FaceDetector, frames: torch.Tensor, turns: int | tuple[int, ...], input_size: int | None = None
) -> list[Detections]:
    """The faces in frames [N, H, W, 3] uint8 found with the frames turned `turns` quarter turns
    counter-clockwise (np.rot90's k), in the frames' own pixels (input_size: as the detector's). Key points keep the detector's
    order as seen in the turned frame (its image-left eye first), so the eye line still gives the
    face's roll.

    Several turns: each is looked at, and where their faces overlap the best-scored one is kept.
    A quarter turn one way shows a head rolled 75 degrees the other way nearly upside down, and the
    detector may find it so with its key points half a turn off (scored 0.68-0.98, where the turn
    that shows it upright scored 1.00 on the test photos); its mesh then holds for a few frames
    and swaps the face upside down."""
    height, width = frames.shape[1:3]
    every = [turns] if isinstance(turns, int) else list(turns)
    looks = []
    for turn in every:
        turn %= 4
        if turn == 0:
            looks.append(detector.detect(frames, input_size))
        else:
            found = detector.detect(torch.rot90(frames, turn, dims=(1, 2)).contiguous(), input_size)
            looks.append([_turned_back(faces, turn, height, width) for faces in found])
    if len(looks) == 1:
        return looks[0]
    return [_best_of([look[frame] for look in looks], detector.nms_threshold) for frame in range(len(frames))]


def half_turn_checked(
    detector: FaceDetector, frames: torch.Tensor, found: list[Detections], turn: int
) -> list[Detections]:
    """`found` (faces of frames [N, H, W, 3] looked at `turn` quarter turns), each checked
    against a look half a turn further, the better-scored kept where they overlap. The detector
    finds a head rolled past about 130 degrees as one rolled the other way by less, with its key
    points half a turn off (obama3.jpg rolled 150 degrees: its eye line read at 38 degrees instead
    of -145), and such a face is then followed, and swapped, upside down; seen upright half a turn
    further, it scores higher. Run where a look found a new face, so it costs nearly nothing."""
    again = detect_turned(detector, frames, (turn + 2) % 4)
    return [_best_of([first, second], detector.nms_threshold) for first, second in zip(found, again)]


def _best_of(found: list[Detections], iou_threshold: float) -> Detections:
    """The faces of several looks at one frame, overlapping ones kept once (the best-scored)."""
    boxes = torch.cat([faces.boxes for faces in found])
    scores = torch.cat([faces.scores for faces in found])
    keypoints = torch.cat([faces.keypoints for faces in found])
    keep = batched_nms(boxes[None], scores[None], torch.ones_like(scores[None], dtype=torch.bool), iou_threshold)[0]
    order = scores.masked_fill(~keep, float("-inf")).argsort(descending=True)[: int(keep.sum())]
    return Detections(boxes[order], scores[order], keypoints[order])


def upright_turns(points: torch.Tensor) -> int:
    """The quarter turns (counter-clockwise, as `detect_turned` takes them) that bring the face
    with mesh points [468, 2+] nearest upright: its eye line (outer corners) is rolled by that
    many quarter turns, each taking 90 degrees off its angle in the image (y down)."""
    line = points[RIGHT_EYE_CORNER, :2] - points[LEFT_EYE_CORNER, :2]
    degrees = float(torch.rad2deg(torch.atan2(line[1], line[0])))
    return round(degrees / 90) % 4 if math.isfinite(degrees) else 0  # a broken mesh: upright


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
