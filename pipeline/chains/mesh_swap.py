"""The `mesh` chain: detect -> align (face mesh) -> swap -> blend, batched across sessions on the device.

Frames arrive as I420 arrays; each group of same-sized frames goes to the device in
one copy (pinned staging on CUDA), is converted to RGB there, and comes back as
I420 in one copy. Only pixels the swap touched (the dilated face masks and the
disclosure badge) are written back: everything else stays bit-exact.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from pipeline.badge import badge_geometry, draw_badge
from pipeline.chain import ChainItem, ChainResult
from pipeline.color import i420_to_rgb, rgb_to_i420
from pipeline.detect import FaceDetector
from pipeline.faces import FaceLibrary, FaceNotFound
from pipeline.landmarks import FaceMesher
from pipeline.swap import MeshSwapper, SourceFace, analyse_source
from pipeline.swap.source import MIN_MESH_SCORE, mesh_points


class MeshSwapChain:
    name = "mesh"

    def __init__(
        self, device: torch.device, faces: FaceLibrary, *, badge: bool = True, keep_eyes_mouth: bool = True,
        shape_transfer: float = 0.0,
    ) -> None:
        self.device = device
        self.faces = faces
        self.badge = badge
        # How far the target's face shape moves toward the source's (0: the target's own geometry).
        self.shape_transfer = shape_transfer
        self.detector = FaceDetector(device)
        self.mesher = FaceMesher(device)
        self.swapper = MeshSwapper(device, keep_eyes_mouth=keep_eyes_mouth)
        # The models hold no state, but one caller at a time: the runner's batches and uploads' analyses.
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        frame = np.zeros((480 * 3 // 2, 640), np.uint8)
        frame[:480] = 128
        self.run([ChainItem("warm-up", frame)])
        with self._lock:
            self.mesher.landmarks(torch.zeros(1, 3, 192, 192, device=self.device))

    def analyse_face(self, image_rgb: np.ndarray) -> SourceFace | None:
        with self._lock:
            return analyse_source(image_rgb, self.detector, self.mesher)

    def forget_session(self, session_id: str) -> None:
        pass

    def run(self, batch: Sequence[ChainItem]) -> list[ChainResult]:
        results: list[ChainResult] = [None] * len(batch)
        by_shape: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for index, item in enumerate(batch):
            source = self._source(item)
            if isinstance(source, BaseException):
                results[index] = source
            elif source is not None:
                by_shape[item.image.shape].append(index)
        with self._lock, torch.inference_mode():
            for indices in by_shape.values():
                swapped = self._swap_group([batch[i] for i in indices], [self._source(batch[i]) for i in indices])
                for index, output in zip(indices, swapped):
                    results[index] = output
        return results

    def _source(self, item: ChainItem) -> SourceFace | BaseException | None:
        face_id = item.options.get("face_id")
        if not face_id:
            return None  # no face chosen: the video passes through
        try:
            analysis = self.faces.get(str(face_id)).analysis
        except FaceNotFound as exc:
            return exc
        return analysis if isinstance(analysis, SourceFace) else None

    def _upload(self, images: list[np.ndarray]) -> torch.Tensor:
        stacked = torch.from_numpy(np.stack(images))
        if self.device.type == "cuda":
            stacked = stacked.pin_memory()
        return stacked.to(self.device, non_blocking=True)

    def _swap_group(self, items: list[ChainItem], sources: list[SourceFace]) -> list[np.ndarray | None]:
        i420 = self._upload([item.image for item in items])
        rgb = i420_to_rgb(i420)
        frames_u8 = (rgb * 255).round_().to(torch.uint8).permute(0, 2, 3, 1).contiguous()
        found = self.detector.detect(frames_u8)
        boxes, eyes, frame_index, face_sources = [], [], [], []
        for frame, detections in enumerate(found):
            for face in range(len(detections)):
                boxes.append(detections.boxes[face])
                eyes.append(detections.keypoints[face, :2])
                frame_index.append(frame)
                face_sources.append(sources[frame].to(self.device))
        if not boxes:
            return [None] * len(items)  # no face in any frame: passed through, not charged
        index = torch.tensor(frame_index, device=self.device)
        points, scores = mesh_points(frames_u8, torch.stack(boxes), torch.stack(eyes), index, self.mesher)
        keep = scores > MIN_MESH_SCORE
        if not bool(keep.any()):
            return [None] * len(items)
        kept = [s for s, k in zip(face_sources, keep.tolist()) if k]
        targets = points[keep][:, :, :2]
        if self.shape_transfer:
            source_points = torch.stack([source.points for source in kept]).to(targets)
            targets = targets + self.shape_transfer * (_similar_onto(source_points, targets) - targets)
        rendered = self.swapper.render(rgb, targets, index[keep], kept)
        swapped_frames = sorted(set(index[keep].tolist()))
        out_rgb, support = rendered.frames, rendered.support > 0
        if self.badge:
            draw_badge(out_rgb)
            top, left, plate_h, plate_w = badge_geometry(*out_rgb.shape[2:])
            support[:, :, top : top + plate_h, left : left + plate_w] = True
        merged = _merge_i420(i420, rgb_to_i420(out_rgb), support)
        merged = merged.cpu().numpy()
        return [merged[frame] if frame in swapped_frames else None for frame in range(len(items))]


def _similar_onto(points: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Each face's `points` [N, K, 2] moved by the least-squares similarity that best lays them
    on `targets` [N, K, 2] (same pose and size, their own shape); closed form, batched."""
    p_mean, q_mean = points.mean(dim=1, keepdim=True), targets.mean(dim=1, keepdim=True)
    p, q = points - p_mean, targets - q_mean
    spread = p.square().sum(dim=(1, 2)).clamp_min(1e-12)
    a = (p * q).sum(dim=(1, 2)) / spread  # scale * cos(angle)
    b = (p[..., 0] * q[..., 1] - p[..., 1] * q[..., 0]).sum(dim=1) / spread  # scale * sin(angle)
    x = a[:, None] * p[..., 0] - b[:, None] * p[..., 1]
    y = b[:, None] * p[..., 0] + a[:, None] * p[..., 1]
    return torch.stack((x, y), dim=-1) + q_mean


def _merge_i420(original: torch.Tensor, swapped: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """The swapped I420 where `support` [B, 1, H, W] is set, the original bytes everywhere else."""
    b = support.shape[0]
    luma = support.reshape(b, -1)
    chroma = F.max_pool2d(support.float(), kernel_size=2).bool().reshape(b, -1)  # one U and one V per 2x2
    mask = torch.cat((luma, chroma, chroma), dim=1).reshape(original.shape)
    return torch.where(mask, swapped, original)
