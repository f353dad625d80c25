"""Lighting that belongs to a photo, not to the face: a slow brightness slope across the skin
(one cheek in shadow, a lamp to one side, light from above). The source texture has its own
taken out once at upload (source_shading, divided out), and each frame the target's own is put on
the warped source (target_shading), so a one-sided shadow of the source photo is never pasted
onto a target lit otherwise.

The shading is a plane in log brightness over the face's skin (its features left out: they are
dark by nature, not by light), fitted as a + b x + c y, of which only the slope across the face
(b x) is moved: the one-sided light the issue is about. Light from above (c y) is in almost
every photo and moving it too cost identity (18 pairs of five test photos: 14 nearer the source
against 15). Nothing finer than a plane: a blurred brightness map (an eighth of the face wide)
was tried first and carried the shape of the eye sockets, brows and cheekbones, which are who
the face is, from the target onto every swap (24-pair quality test: 6 pairs nearer the source,
against 21 without it; bench/results/2026-12-04-source-texture.md).
"""

from __future__ import annotations

import torch

from pipeline.swap.color_match import rgb_to_ycc

# Each plane's brightness kept within these factors of its mean over the face (a face half in
# deep shadow is not brightened into noise).
SHADING_BOUNDS = (0.5, 2.0)
# How much of the target's slope is put on. All of it made the swap read as the target's photo
# (SFace over the 12 ordered pairs of four test people, one frame each: 9 nearer the source,
# 0.535 against 0.405; the source's slope taken out alone: 11, 0.547 against 0.400; no lighting
# work at all: 12, 0.559 against 0.389). A quarter, across the face only, holds identity as the
# crop did (18 pairs of five photos: 15 and 0.539 against 0.411; the crop 15, 0.538 against
# 0.406) and still follows a side light (test_source_texture.py;
# bench/results/2026-12-04-source-texture.md).
TARGET_STRENGTH = 0.25
# The target's plane is fitted on every STRIDE-th pixel of each axis: a sixteenth of the work,
# the same plane to well under a grey level.
STRIDE = 4


def luma(rgb: torch.Tensor) -> torch.Tensor:
    """[N, 3, H, W] RGB -> [N, 1, H, W]."""
    return rgb_to_ycc(rgb)[:, :1]


def _coordinates(height: int, width: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel centres as x, y in [-1, 1], [H, W] each."""
    ys = (torch.arange(height, device=device, dtype=torch.float32) + 0.5) / height * 2 - 1
    xs = (torch.arange(width, device=device, dtype=torch.float32) + 0.5) / width * 2 - 1
    return xs[None].expand(height, -1), ys[:, None].expand(-1, width)


def shading_plane(brightness: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """brightness, weight [N, 1, H, W] -> [N, 3]: (a, b, c) of the weighted least-squares plane
    log brightness = a + b x + c y (x, y in [-1, 1]); a face with no weight gets (0, 0, 0).
    The 3 x 3 normal equations are solved by Cramer's rule: no batched LU (warp.py: it fails on
    the CPU for batches over one)."""
    n, _, height, width = brightness.shape
    x, y = _coordinates(height, width, brightness.device)
    basis = torch.stack((torch.ones_like(x), x, y)).flatten(1)  # [3, P]
    w = weight.flatten(1)  # [N, P]
    log = brightness.clamp_min(1e-3).log().flatten(1)
    gram = torch.einsum("np,ip,jp->nij", w, basis, basis)  # [N, 3, 3]
    rhs = torch.einsum("np,ip,np->ni", w, basis, log)  # [N, 3]
    det = _det3(gram)
    columns = []
    for k in range(3):
        replaced = gram.clone()
        replaced[:, :, k] = rhs
        columns.append(_det3(replaced))
    solution = torch.stack(columns, dim=1) / det.clamp_min(1e-12)[:, None]
    usable = (w.sum(dim=1) > 16.0) & (det > 1e-9 * w.sum(dim=1) ** 3)
    return torch.where(usable[:, None], solution, torch.zeros_like(solution))


def _det3(m: torch.Tensor) -> torch.Tensor:
    return (
        m[:, 0, 0] * (m[:, 1, 1] * m[:, 2, 2] - m[:, 1, 2] * m[:, 2, 1])
        - m[:, 0, 1] * (m[:, 1, 0] * m[:, 2, 2] - m[:, 1, 2] * m[:, 2, 0])
        + m[:, 0, 2] * (m[:, 1, 0] * m[:, 2, 1] - m[:, 1, 1] * m[:, 2, 0])
    )


def plane_shading(plane: torch.Tensor, weight: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """plane [N, 3] -> [N, 1, H, W]: exp(b x), scaled to mean 1 under weight [N, 1, H', W']
    (any size: it is the same face's), within SHADING_BOUNDS."""
    x, y = _coordinates(height, width, plane.device)
    slope = plane[:, 1, None, None] * x  # [N, H, W]: across the face only (see the module's note)
    if weight.shape[-2:] != (height, width):
        weight = torch.nn.functional.interpolate(weight, size=(height, width), mode="bilinear", align_corners=False)
    w = weight[:, 0]
    mean = (slope * w).sum(dim=(1, 2)) / w.sum(dim=(1, 2)).clamp_min(1e-6)
    return (slope - mean[:, None, None]).exp().clamp(*SHADING_BOUNDS)[:, None]


def source_shading(texture: torch.Tensor, skin: torch.Tensor) -> torch.Tensor:
    """texture [1, 3, T, T]; skin [1, 1, T, T] in [0, 1]: where the texture shows skin (no
    features, nothing filled) -> [1, 1, T, T], mean 1 over the skin: the photo's own slope."""
    plane = shading_plane(luma(texture), skin)
    return plane_shading(plane, skin, *texture.shape[-2:])


def target_shading(base: torch.Tensor, skin: torch.Tensor) -> torch.Tensor:
    """base [N, 3, R, R] the target's region; skin [N, 1, R, R] its skin weight -> [N, 1, R, R]:
    the target's slope over its skin (TARGET_STRENGTH of it), mean 1 under the weight (1 where a face shows no skin).
    Cheap: a weighted sum over every STRIDE-th pixel and a 3 x 3 solve per face."""
    sample = (slice(None), slice(None), slice(None, None, STRIDE), slice(None, None, STRIDE))
    plane = shading_plane(luma(base[sample]), skin[sample]) * TARGET_STRENGTH
    return plane_shading(plane, skin[sample], *base.shape[-2:])
