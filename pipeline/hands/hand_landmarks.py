"""MediaPipe's hand landmarks (hand_landmark_lite.tflite, 224x224, Apache-2.0), batched in torch.

The model looks at a rotated square crop of the frame (a `Rois` row) and returns 21 points and a
presence score: a crop that holds no hand (the palm detector's false alarms, or a hand that
left) is dropped there. The crops are taken the way MediaPipe's hand tracking takes them:
- from a palm: the palm box shifted half its height towards the fingers, its longer side times
  2.6, turned so the line from the wrist to the middle finger's base points up;
- from a hand's landmarks in the previous frame (so the palm detector need not run again): the
  box around the palm and the fingers' lower joints, turned so the wrist-to-fingers line points
  up, shifted a tenth of its height towards the fingers, its longer side times 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from pipeline.hands.palm_detector import INSTALL_HINT, Palms
from pipeline.hands.tflite_graph import TfliteTorchGraph
from pipeline.landmarks.tflite_file import read_tflite
from pipeline.model_input import as_float_rgb, frame_size
from pipeline.shipped_weights import package_file

INPUT_SIZE = 224
ROI_SCALE = 2.6
ROI_SHIFT = 0.5  # of the palm box's height, towards the fingers
WRIST, MIDDLE_BASE = 0, 2  # palm key points
# crops from landmarks: the wrist, the thumb's lower joints and the other fingers' two lowest
# joints (fingertips move too fast to frame the next crop)
TRACK_POINTS = (0, 1, 2, 3, 5, 6, 9, 10, 13, 14, 17, 18)
TRACK_SCALE = 2.0
TRACK_SHIFT = 0.1  # of the box's height, towards the fingers


def hand_landmark_file() -> Path:
    return package_file("mediapipe", "modules/hand_landmark/hand_landmark_lite.tflite", install_hint=INSTALL_HINT)


@dataclass(frozen=True)
class Rois:
    """Rotated square crops, one row per hand."""

    centres: torch.Tensor  # [K, 2] frame pixels
    sides: torch.Tensor  # [K]
    turns: torch.Tensor  # [K] radians; 0: the fingers point up

    def __len__(self) -> int:
        return int(self.sides.shape[0])

    def extents(self) -> torch.Tensor:
        """[K, 4] (x0, y0, x1, y1): the frame pixels each crop covers (its turned square's upright bounds)."""
        half = (self.sides * (self.turns.cos().abs() + self.turns.sin().abs()) / 2)[:, None]
        return torch.cat((self.centres - half, self.centres + half), dim=1)

    @staticmethod
    def empty(device: torch.device) -> Rois:
        return Rois(torch.zeros(0, 2, device=device), torch.zeros(0, device=device), torch.zeros(0, device=device))

    @staticmethod
    def cat(parts: list[Rois], device: torch.device) -> Rois:
        if not parts:
            return Rois.empty(device)
        return Rois(
            *(torch.cat([getattr(part, name).to(device) for part in parts]) for name in ("centres", "sides", "turns"))
        )


@dataclass(frozen=True)
class Hands:
    points: torch.Tensor  # [K, 21, 2] frame pixels
    presence: torch.Tensor  # [K]
    crops: torch.Tensor | None = None  # [K] which of the frame's crops each was found in (None: not known)

    def __len__(self) -> int:
        return int(self.presence.shape[0])

    @staticmethod
    def empty(device: torch.device) -> Hands:
        return Hands(torch.zeros(0, 21, 2, device=device), torch.zeros(0, device=device))


class HandLandmarker:
    def __init__(self, device: torch.device, *, presence_threshold: float = 0.5, path: Path | None = None) -> None:
        self.device = device
        self.presence_threshold = presence_threshold
        self.net = TfliteTorchGraph(read_tflite(path if path is not None else hand_landmark_file()), device)

    def landmarks(self, frames: torch.Tensor, palms: list[Palms]) -> list[Hands]:
        """frames (as landmarks_in) and each frame's palms -> each frame's hands."""
        return self.landmarks_in(frames, [rois_from_palms(found) for found in palms])

    def landmarks_in(self, frames: torch.Tensor, rois: list[Rois]) -> list[Hands]:
        """frames (float [B, 3, H, W] or uint8 [B, H, W, 3] RGB, model_input.py) and each frame's
        crops -> each frame's hands."""
        batch, (height, width) = frames.shape[0], frame_size(frames)
        owners = [frame for frame, found in enumerate(rois) for _ in range(len(found))]
        if not owners:
            return [Hands.empty(self.device) for _ in rois]
        every = Rois.cat(rois, self.device)
        centres, sides, turns = every.centres, every.sides, every.turns
        grid = _crop_grid(centres, sides, turns, height, width)  # [K, 224, 224, 2]
        images = as_float_rgb(frames.to(self.device)[torch.tensor(owners, device=frames.device)])
        crops = F.grid_sample(images, grid, mode="bilinear", align_corners=False)
        points, presence = self.net.run(crops)[:2]
        local = (points.reshape(-1, 21, 3)[..., :2] / INPUT_SIZE - 0.5) * sides[:, None, None]
        cos, sin = turns.cos()[:, None], turns.sin()[:, None]
        frame_points = torch.stack(
            (centres[:, None, 0] + local[..., 0] * cos - local[..., 1] * sin,
             centres[:, None, 1] + local[..., 0] * sin + local[..., 1] * cos), dim=-1,
        )  # fmt: skip
        presence = presence.reshape(-1)
        owner = torch.tensor(owners, device=self.device)
        crop = torch.tensor([row for found in rois for row in range(len(found))], device=self.device)
        keep = (presence >= self.presence_threshold) & frame_points.isfinite().flatten(1).all(dim=1)
        return [
            Hands(frame_points[(owner == f) & keep], presence[(owner == f) & keep], crop[(owner == f) & keep])
            for f in range(batch)
        ]


def rois_from_palms(palms: Palms) -> Rois:
    """The hand crops of a frame's palms."""
    boxes, keypoints = palms.boxes, palms.keypoints
    turns = _upright_turn(keypoints[:, WRIST], keypoints[:, MIDDLE_BASE])
    size = boxes[:, 2:] - boxes[:, :2]
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2
    return Rois(_towards_fingers(centres, ROI_SHIFT * size[:, 1], turns), size.max(dim=1).values * ROI_SCALE, turns)


def rois_from_hands(hands: Hands) -> Rois:
    """The next frame's crops of hands found in this one: around their palms and lower joints."""
    points = hands.points
    if not len(hands):
        return Rois.empty(points.device)
    wrist = points[:, 0]
    fingers = ((points[:, 5] + points[:, 13]) / 2 + points[:, 9]) / 2  # the index, middle and ring bases
    turns = _upright_turn(wrist, fingers)
    part = points[:, list(TRACK_POINTS)]
    origin = part.mean(dim=1)
    cos, sin = turns.cos()[:, None], turns.sin()[:, None]
    offset = part - origin[:, None]
    # in the hand's own frame: x across the palm, y from the fingers (-) to the wrist (+)
    across = offset[..., 0] * cos + offset[..., 1] * sin
    along = -offset[..., 0] * sin + offset[..., 1] * cos
    low = torch.stack((across.min(dim=1).values, along.min(dim=1).values), dim=1)
    high = torch.stack((across.max(dim=1).values, along.max(dim=1).values), dim=1)
    middle, size = (low + high) / 2, high - low
    centres = origin + torch.stack((middle[:, 0] * cos[:, 0] - middle[:, 1] * sin[:, 0],
                                    middle[:, 0] * sin[:, 0] + middle[:, 1] * cos[:, 0]), dim=1)  # fmt: skip
    return Rois(_towards_fingers(centres, TRACK_SHIFT * size[:, 1], turns), size.max(dim=1).values * TRACK_SCALE, turns)


def _upright_turn(wrist: torch.Tensor, fingers: torch.Tensor) -> torch.Tensor:
    """[K] radians that turn the line from the wrist to the fingers upright."""
    return math.pi / 2 - torch.atan2(-(fingers[:, 1] - wrist[:, 1]), fingers[:, 0] - wrist[:, 0])


def _towards_fingers(centres: torch.Tensor, distance: torch.Tensor, turns: torch.Tensor) -> torch.Tensor:
    return centres + torch.stack((distance * turns.sin(), -distance * turns.cos()), dim=1)


def _crop_grid(
    centres: torch.Tensor, sides: torch.Tensor, turns: torch.Tensor, height: int, width: int
) -> torch.Tensor:
    """grid_sample coordinates [K, 224, 224, 2] of each rotated square crop."""
    axis = (torch.arange(INPUT_SIZE, device=centres.device, dtype=torch.float32) + 0.5) / INPUT_SIZE - 0.5
    v, u = torch.meshgrid(axis, axis, indexing="ij")
    lx, ly = u[None] * sides[:, None, None], v[None] * sides[:, None, None]
    cos, sin = turns.cos()[:, None, None], turns.sin()[:, None, None]
    x = centres[:, 0, None, None] + lx * cos - ly * sin
    y = centres[:, 1, None, None] + lx * sin + ly * cos
    return torch.stack((x / width * 2 - 1, y / height * 2 - 1), dim=-1)
