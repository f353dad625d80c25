"""A face's thumbnail: its upright square crop from the upload's analysis, made small and kept as
a JPEG, so a person can tell the faces of a library apart. The photo itself is never kept."""

from __future__ import annotations

import fractions

import av
import numpy as np
import torch
import torch.nn.functional as F

from pipeline.swap.source import SourceFace

# The longest side a thumbnail has (docs/api.md): a 128x128 JPEG of a face is about 4 KB.
THUMBNAIL_SIZE = 128


def face_thumbnail(analysis: object) -> bytes | None:
    """A JPEG of at most THUMBNAIL_SIZE pixels a side of the analysed source face; None where the
    chain's analysis holds no face (the chains that use no source face keep only the photo's size)."""
    if not isinstance(analysis, SourceFace):
        return None
    with torch.inference_mode():
        crop = analysis.image.detach().to("cpu", torch.float32)[None]  # [1, 3, S, S] in [0, 1]
        side = min(THUMBNAIL_SIZE, crop.shape[-1])
        small = F.interpolate(crop, size=(side, side), mode="bilinear", align_corners=False, antialias=True)
        rgb = (small[0].clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).contiguous().numpy()
    return encode_jpeg(rgb)


def encode_jpeg(rgb: np.ndarray) -> bytes:
    """[H, W, 3] uint8 RGB -> JPEG bytes, by FFmpeg's MJPEG encoder (PyAV is already a dependency)."""
    height, width = rgb.shape[:2]
    codec = av.CodecContext.create("mjpeg", "w")
    codec.width, codec.height = width, height
    codec.pix_fmt = "yuvj420p"  # full-range YUV, as JPEG files have it
    codec.time_base = fractions.Fraction(1, 1)
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24").reformat(format="yuvj420p")
    packets = codec.encode(frame) + codec.encode(None)
    return b"".join(bytes(packet) for packet in packets)
