"""Where a face swap may change a frame: each detected face's box grown on every side, and the
disclosure badge's plate. Outside it the chain must leave the frame's bytes as they were."""

from __future__ import annotations

import av
import numpy as np
import torch

from pipeline.badge import badge_geometry


def face_zone(boxes: torch.Tensor, height: int, width: int, grow: float) -> np.ndarray:
    """[H, W] bool: the boxes [N, 4] (x1, y1, x2, y2) grown by `grow` of their width and height on
    each side, and the badge (2 px more each way: its plate is written in whole 2x2 chroma blocks)."""
    zone = np.zeros((height, width), bool)
    for x1, y1, x2, y2 in boxes.tolist():
        grow_x, grow_y = grow * (x2 - x1), grow * (y2 - y1)
        zone[max(0, int(y1 - grow_y)) : int(y2 + grow_y) + 1, max(0, int(x1 - grow_x)) : int(x2 + grow_x) + 1] = True
    badge = badge_geometry(height, width)
    if badge is not None:
        top, left, plate_h, plate_w = badge
        zone[max(0, top - 2) : top + plate_h + 2, max(0, left - 2) : left + plate_w + 2] = True
    return zone


def detected_face_zone(detector, i420: np.ndarray, grow: float) -> np.ndarray:
    """face_zone of the faces `detector` finds in a yuv420p frame (av's (H * 3 / 2, W) array)."""
    rgb = av.VideoFrame.from_ndarray(i420, format="yuv420p").to_ndarray(format="rgb24")
    boxes = detector.detect(torch.from_numpy(rgb)[None])[0].boxes
    assert len(boxes), "no face found to draw the zone around"
    return face_zone(boxes, *rgb.shape[:2], grow)


def changed_outside(before: np.ndarray, after: np.ndarray, zone: np.ndarray) -> int:
    """How many Y, U and V samples of two yuv420p frames differ outside the zone."""
    height, width = zone.shape
    chroma_zone = zone.reshape(height // 2, 2, width // 2, 2).any(axis=(1, 3)).ravel()
    changed = before != after
    luma = changed[:height][~zone]
    u = changed[height : height * 5 // 4].ravel()[~chroma_zone]
    v = changed[height * 5 // 4 :].ravel()[~chroma_zone]
    return int(luma.sum() + u.sum() + v.sum())
