"""MediaPipe's palm detector (palm_detection_lite.tflite, 192x192, Apache-2.0), batched in torch.

The weights ship in the `mediapipe` wheel (requirements-weights.txt; installed without its
dependencies and never imported: only the file is read). Output per frame: palm boxes, their
seven key points (0: wrist, 2: middle finger's base; MediaPipe's hand tracking turns its crop by
the line from 0 to 2) and scores, in frame pixels.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from pipeline.detect.nms import batched_nms
from pipeline.hands.tflite_graph import TfliteTorchGraph
from pipeline.landmarks.tflite_file import read_tflite
from pipeline.model_input import as_float_rgb, frame_size
from pipeline.shipped_weights import package_file

INPUT_SIZE = 192
INSTALL_HINT = "install it with: pip install --no-deps -r requirements-weights.txt (mediapipe==0.10.21)"
# MediaPipe's SSD anchors for this model: a 24x24 grid (stride 8) with 2 anchors per cell, then
# a 12x12 grid (stride 16) with 6; fixed size, so only their centres matter.
ANCHOR_GRIDS = ((24, 2), (12, 6))
CANDIDATES = 16  # best-scored anchors per frame that go on to NMS


def palm_file() -> Path:
    return package_file("mediapipe", "modules/palm_detection/palm_detection_lite.tflite", install_hint=INSTALL_HINT)


def anchor_centres(device: torch.device) -> torch.Tensor:
    """[2016, 2] anchor centres (x, y) in [0, 1] of the 192x192 input, in the model's output order."""
    centres = []
    for size, per_cell in ANCHOR_GRIDS:
        axis = (torch.arange(size, dtype=torch.float32) + 0.5) / size
        yy, xx = torch.meshgrid(axis, axis, indexing="ij")
        grid = torch.stack((xx, yy), dim=-1).reshape(-1, 1, 2).expand(-1, per_cell, 2)
        centres.append(grid.reshape(-1, 2))
    return torch.cat(centres).to(device)


@dataclass(frozen=True)
class Palms:
    boxes: torch.Tensor  # [K, 4] x1, y1, x2, y2 in frame pixels
    keypoints: torch.Tensor  # [K, 7, 2]
    scores: torch.Tensor  # [K]

    def __len__(self) -> int:
        return int(self.scores.shape[0])


class PalmDetector:
    def __init__(
        self,
        device: torch.device,
        *,
        score_threshold: float = 0.5,
        nms_threshold: float = 0.3,
        path: Path | None = None,
    ) -> None:
        self.device = device
        self.score_threshold = score_threshold
        self.nms_threshold = nms_threshold
        self.net = TfliteTorchGraph(read_tflite(path if path is not None else palm_file()), device)
        self.anchors = anchor_centres(device)

    def detect(self, frames: torch.Tensor) -> list[Palms]:
        """frames (one size; float [B, 3, H, W] or uint8 [B, H, W, 3] RGB, model_input.py) -> the
        palms of each frame."""
        batch, (height, width) = frames.shape[0], frame_size(frames)
        scale = INPUT_SIZE / max(height, width)
        inner_h, inner_w = round(height * scale), round(width * scale)
        top, left = (INPUT_SIZE - inner_h) // 2, (INPUT_SIZE - inner_w) // 2
        images = as_float_rgb(frames.to(self.device))
        images = F.interpolate(images, size=(inner_h, inner_w), mode="bilinear", align_corners=False, antialias=True)
        images = F.pad(images, (left, INPUT_SIZE - inner_w - left, top, INPUT_SIZE - inner_h - top))
        raw, logits = self.net.run(images)  # [B, 2016, 18], [B, 2016, 1]
        scores = torch.sigmoid(logits[..., 0].clamp(-100.0, 100.0))
        best = scores.topk(min(CANDIDATES, scores.shape[1]), dim=1).indices
        scores = scores.gather(1, best)
        raw = raw.gather(1, best[..., None].expand(-1, -1, raw.shape[2])) / INPUT_SIZE
        centres = self.anchors[best]  # [B, C, 2]
        middle = raw[..., :2] + centres
        half = raw[..., 2:4] / 2
        boxes = torch.cat((middle - half, middle + half), dim=-1)
        keypoints = raw[..., 4:18].reshape(batch, -1, 7, 2) + centres[:, :, None]
        # back from the letterboxed input to frame pixels
        offset = torch.tensor([left, top], device=self.device, dtype=torch.float32)
        to_frame = lambda xy: (xy * INPUT_SIZE - offset) / scale  # noqa: E731
        boxes = torch.cat((to_frame(boxes[..., :2]), to_frame(boxes[..., 2:])), dim=-1)
        keypoints = to_frame(keypoints)
        valid = scores >= self.score_threshold
        keep = batched_nms(boxes, scores, valid, self.nms_threshold)
        return [Palms(boxes[i][keep[i]], keypoints[i][keep[i]], scores[i][keep[i]]) for i in range(batch)]
