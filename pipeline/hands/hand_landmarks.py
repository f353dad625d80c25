"""MediaPipe's hand landmarks (hand_landmark_lite.tflite, 224x224, Apache-2.0), batched in torch.

Each palm gives a rotated square crop the way MediaPipe's hand tracking takes it (the palm box
shifted half its height towards the fingers, its longer side times 2.6, turned so the line from
the wrist to the middle finger's base points up). The model returns 21 points and a presence
score: a palm whose crop holds no hand (the palm detector's false alarms) is dropped there.
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
from pipeline.shipped_weights import package_file

INPUT_SIZE = 224
ROI_SCALE = 2.6
ROI_SHIFT = 0.5  # of the palm box's height, towards the fingers
WRIST, MIDDLE_BASE = 0, 2  # palm key points


def hand_landmark_file() -> Path:
    return package_file("mediapipe", "modules/hand_landmark/hand_landmark_lite.tflite", install_hint=INSTALL_HINT)


@dataclass(frozen=True)
class Hands:
    points: torch.Tensor  # [K, 21, 2] frame pixels
    presence: torch.Tensor  # [K]

    def __len__(self) -> int:
        return int(self.presence.shape[0])


class HandLandmarker:
    def __init__(self, device: torch.device, *, presence_threshold: float = 0.5, path: Path | None = None) -> None:
        self.device = device
        self.presence_threshold = presence_threshold
        self.net = TfliteTorchGraph(read_tflite(path if path is not None else hand_landmark_file()), device)

    def landmarks(self, frames_u8: torch.Tensor, palms: list[Palms]) -> list[Hands]:
        """frames_u8 [B, H, W, 3] uint8 RGB and each frame's palms -> each frame's hands."""
        batch, height, width, _ = frames_u8.shape
        owners = [frame for frame, found in enumerate(palms) for _ in range(len(found))]
        if not owners:
            return [Hands(torch.zeros(0, 21, 2, device=self.device), torch.zeros(0, device=self.device)) for _ in palms]
        boxes = torch.cat([found.boxes for found in palms]).to(self.device)
        keypoints = torch.cat([found.keypoints for found in palms]).to(self.device)
        centres, sides, turns = _rois(boxes, keypoints)
        grid = _crop_grid(centres, sides, turns, height, width)  # [K, 224, 224, 2]
        images = frames_u8.to(self.device).permute(0, 3, 1, 2).float() / 255.0
        crops = F.grid_sample(images[torch.tensor(owners, device=self.device)], grid, mode="bilinear", align_corners=False)
        points, presence = self.net.run(crops)[:2]
        local = (points.reshape(-1, 21, 3)[..., :2] / INPUT_SIZE - 0.5) * sides[:, None, None]
        cos, sin = turns.cos()[:, None], turns.sin()[:, None]
        frame_points = torch.stack(
            (centres[:, None, 0] + local[..., 0] * cos - local[..., 1] * sin,
             centres[:, None, 1] + local[..., 0] * sin + local[..., 1] * cos), dim=-1,
        )  # fmt: skip
        presence = presence.reshape(-1)
        owner = torch.tensor(owners, device=self.device)
        keep = presence >= self.presence_threshold
        return [Hands(frame_points[(owner == f) & keep], presence[(owner == f) & keep]) for f in range(batch)]


def _rois(boxes: torch.Tensor, keypoints: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Centres [K, 2], sides [K] and turns [K] (radians; 0: fingers up) of the hand crops."""
    wrist, base = keypoints[:, WRIST], keypoints[:, MIDDLE_BASE]
    turns = math.pi / 2 - torch.atan2(-(base[:, 1] - wrist[:, 1]), base[:, 0] - wrist[:, 0])
    size = boxes[:, 2:] - boxes[:, :2]
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2
    shift = ROI_SHIFT * size[:, 1]
    centres = centres + torch.stack((shift * turns.sin(), -shift * turns.cos()), dim=1)
    return centres, size.max(dim=1).values * ROI_SCALE, turns


def _crop_grid(centres: torch.Tensor, sides: torch.Tensor, turns: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """grid_sample coordinates [K, 224, 224, 2] of each rotated square crop."""
    axis = (torch.arange(INPUT_SIZE, device=centres.device, dtype=torch.float32) + 0.5) / INPUT_SIZE - 0.5
    v, u = torch.meshgrid(axis, axis, indexing="ij")
    lx, ly = u[None] * sides[:, None, None], v[None] * sides[:, None, None]
    cos, sin = turns.cos()[:, None, None], turns.sin()[:, None, None]
    x = centres[:, 0, None, None] + lx * cos - ly * sin
    y = centres[:, 1, None, None] + lx * sin + ly * cos
    return torch.stack((x / width * 2 - 1, y / height * 2 - 1), dim=-1)
