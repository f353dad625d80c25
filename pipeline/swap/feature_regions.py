"""Where a face's identity-carrying features lie, drawn from its mesh points: the eyes, the
brows, the lower nose with its nostrils, and the lips. The source texture keeps these as the
photo shows them (they are dark by nature: a skin model would take them for hair), and the
shading and skin statistics are read without them."""

from __future__ import annotations

import torch

from pipeline.swap.masks import dilate, polygon_masks
from pipeline.swap.topology import BROW_IMAGE_LEFT, BROW_IMAGE_RIGHT, EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT, OUTER_LIPS

# The lower nose (alae, nostrils, columella, tip), FaceMesh points both sides; drawn as their convex hull.
NOSE_BOTTOM = (
    1, 2, 4, 5, 19, 94, 97, 98, 326, 327, 64, 294, 48, 278, 240, 460, 75, 305, 79, 309, 166, 392, 60, 290,
    20, 250, 238, 458, 239, 459, 241, 461, 242, 462, 141, 370, 125, 354, 44, 274, 45, 275, 220, 440, 115, 344,
    129, 358, 219, 439, 218, 438, 237, 457,
)  # fmt: skip
# How far each region is grown past its contour, as a share of the face's width: lashes and the
# lids' shadow round the eyes, the soft edge of a brow.
GROW = 0.02


def _brow(contour: tuple[int, ...]) -> tuple[int, ...]:
    """topology's brow lists run along the lower edge, then the upper edge, both outer to inner:
    as a polygon the upper edge is walked back."""
    half = len(contour) // 2
    return contour[:half] + contour[half:][::-1]


def convex_hull(xy: torch.Tensor) -> torch.Tensor:
    """[P, 2] -> the hull's vertices [V, 2] in order (Andrew's monotone chain)."""
    ordered = sorted({(float(x), float(y)) for x, y in xy.tolist()})

    def half(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
        chain: list[tuple[float, float]] = []
        for p in points:
            while len(chain) >= 2:
                (ax, ay), (bx, by) = chain[-2], chain[-1]
                if (bx - ax) * (p[1] - ay) - (by - ay) * (p[0] - ax) > 0:
                    break
                chain.pop()
            chain.append(p)
        return chain

    lower, upper = half(ordered), half(ordered[::-1])
    return torch.tensor(lower[:-1] + upper[:-1], dtype=xy.dtype, device=xy.device)


def feature_regions(points: torch.Tensor, size: int, grow: float = GROW) -> torch.Tensor:
    """points [468, 2+] in the pixels of an S x S picture -> [1, 1, S, S] {0, 1}: the eyes, brows,
    lower nose and lips, grown by `grow` of the face's width."""
    xy = points[:, :2].float()
    width = float(xy[:, 0].amax() - xy[:, 0].amin())
    polygons = [
        xy[list(EYE_IMAGE_LEFT)],
        xy[list(EYE_IMAGE_RIGHT)],
        xy[list(_brow(BROW_IMAGE_LEFT))],
        xy[list(_brow(BROW_IMAGE_RIGHT))],
        xy[list(OUTER_LIPS)],
        convex_hull(xy[list(NOSE_BOTTOM)]),
    ]
    regions = torch.zeros(1, 1, size, size, device=points.device)
    for polygon in polygons:
        regions = torch.maximum(regions, polygon_masks(polygon[None], size))
    return dilate(regions, max(1, round(grow * width)))
