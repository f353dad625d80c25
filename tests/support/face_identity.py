"""Whose face a picture shows, as the e2e swap tests judge a swap: the SFace identity of its largest
face (pipeline.identity), compared by cosine with the source's and the target's photos."""

from __future__ import annotations

import functools

import numpy as np
import torch


@functools.cache
def _models():
    from pipeline.detect import FaceDetector
    from pipeline.identity import IdentityEmbedder

    return FaceDetector(torch.device("cpu")), IdentityEmbedder(torch.device("cpu"))


def identity(rgb: np.ndarray) -> torch.Tensor:
    """SFace identity of the largest face in an RGB image."""
    detector, embedder = _models()
    frame = torch.from_numpy(np.ascontiguousarray(rgb))[None]
    found = detector.detect(frame)[0]
    assert len(found) > 0, "no face in the picture"
    largest = int((found.boxes[:, 2:] - found.boxes[:, :2]).prod(dim=1).argmax())
    return embedder.embed(frame, found.keypoints[largest : largest + 1], torch.zeros(1, dtype=torch.long))[0]


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    return float(identity(a) @ identity(b))
