"""Per-face masks in region pixels (region.py), rasterised on the device: the face-oval polygon,
eroded and feathered; the eyes and the mouth opening taken out again where they are open.

All sizes are fractions of the region side R, so one batch of regions uses one set of kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from pipeline.swap.frontal_pose import index_tensor
from pipeline.swap.topology import (
    EYE_IMAGE_LEFT,
    EYE_IMAGE_LEFT_LIDS,
    EYE_IMAGE_RIGHT,
    EYE_IMAGE_RIGHT_LIDS,
    EYE_OUTER_CORNERS,
    FACE_OVAL,
    INNER_LIPS,
    MOUTH_LIPS,
)

# Apertures (lid or lip gap / inter-ocular distance) at which an eye or the mouth starts to count
# as open, and at which it fully does; in between the kept area fades in (no flicker at the edge).
EYE_OPEN = (0.035, 0.06)
MOUTH_OPEN = (0.03, 0.07)


@dataclass(frozen=True, eq=False)
class FaceMasks:
    """[N, 1, R, R] float maps in [0, 1]:
    alpha: the feathered weight of the swapped face; hard: where the swapped face may show at all
    (the oval less the open eyes and mouth); skin: the target's skin, for colour statistics (the
    eroded oval less eyes and mouth, open or not); support: the dilated oval, softened; no pixel
    outside support > 0 changes."""

    alpha: torch.Tensor
    hard: torch.Tensor
    skin: torch.Tensor
    support: torch.Tensor


def polygon_masks(polygons: torch.Tensor, size: int) -> torch.Tensor:
    """Even-odd fill of closed polygons [N, V, 2] (region pixels) at each pixel centre of an
    R x R grid -> [N, 1, R, R] float {0, 1}.

    Scanline parity, vectorised: each edge that spans a row toggles the row from the first pixel
    centre right of its crossing; a running sum along the row, mod 2, is the inside test.
    O(V R + R^2) per face instead of the V R^2 of testing every pixel against every edge."""
    n, v, _ = polygons.shape
    a = polygons
    b = polygons.roll(-1, dims=1)
    centres = torch.arange(size, device=polygons.device, dtype=polygons.dtype) + 0.5
    ay, by = a[..., 1:2], b[..., 1:2]  # [N, V, 1]
    ax, bx = a[..., 0:1], b[..., 0:1]
    crosses = (ay > centres) != (by > centres)  # [N, V, R]: the edge spans this row's centre line
    dy = by - ay
    dy = torch.where(dy.abs() < 1e-12, torch.full_like(dy, 1e-12), dy)
    x_cross = ax + (bx - ax) * (centres - ay) / dy  # [N, V, R]
    first = (x_cross - 0.5).floor().add(1).clamp(0, size).long()  # first column whose centre is right of it
    toggles = torch.zeros(n, size, size + 1, device=polygons.device, dtype=polygons.dtype)
    toggles.scatter_add_(2, first.transpose(1, 2), crosses.transpose(1, 2).to(polygons.dtype))
    counts = toggles.cumsum_(dim=2)[..., :size]  # small whole numbers: exact in float
    return counts.remainder(2.0)[:, None]


def box_sum(mask: torch.Tensor, radius: int) -> torch.Tensor:
    """The sum over the (2r+1) x (2r+1) square around each pixel (zeros outside), by running sums:
    the cost does not grow with the radius (pooling with wide windows took 13 of 47 ms of a
    profiled CPU frame). Up to radius 2, shifted copies added up are quicker still."""
    if radius <= 2:
        return _shifted_sum(_shifted_sum(mask, radius, -1), radius, -2)
    k = 2 * radius + 1
    sums = F.pad(mask, (radius + 1, radius, radius + 1, radius)).cumsum(dim=-1)
    sums = (sums[..., k:] - sums[..., :-k]).cumsum(dim=-2)
    return sums[..., k:, :] - sums[..., :-k, :]


def _shifted_sum(mask: torch.Tensor, radius: int, dim: int) -> torch.Tensor:
    """The sum over 2r+1 neighbours along `dim` (zeros outside)."""
    length = mask.shape[dim]
    padding = [0, 0] * (mask.dim() - dim % mask.dim() - 1) + [radius, radius]
    padded = F.pad(mask, padding)
    total = padded.narrow(dim, 0, length).clone()
    for shift in range(1, 2 * radius + 1):
        total += padded.narrow(dim, shift, length)
    return total


def dilate(mask: torch.Tensor, radius: int) -> torch.Tensor:
    """A {0, 1} mask grown by a square of side 2r+1."""
    if radius <= 0:
        return mask
    return (box_sum(mask, radius) > 0.5).to(mask.dtype)


def erode(mask: torch.Tensor, radius: int) -> torch.Tensor:
    """A {0, 1} mask shrunk by a square of side 2r+1."""
    return 1.0 - dilate(1.0 - mask, radius)


def box_blur(mask: torch.Tensor, radius: int, passes: int = 3) -> torch.Tensor:
    """`passes` box filters of width 2r+1 (close to a Gaussian; zeros outside); reach passes * r."""
    if radius <= 0:
        return mask
    area = float((2 * radius + 1) ** 2)
    for _ in range(passes):
        mask = box_sum(mask, radius) / area
    return mask


def apertures(points: torch.Tensor) -> torch.Tensor:
    """[N, 3]: the image-left eye's, image-right eye's and the mouth's opening over the
    inter-ocular distance, from mesh points [N, 468, 2+] (any pixel unit)."""
    xy = points[..., :2]
    scale = (xy[:, EYE_OUTER_CORNERS[0]] - xy[:, EYE_OUTER_CORNERS[1]]).norm(dim=-1).clamp_min(1e-6)
    gaps = [
        (xy[:, up] - xy[:, low]).norm(dim=-1) for up, low in (EYE_IMAGE_LEFT_LIDS, EYE_IMAGE_RIGHT_LIDS, MOUTH_LIPS)
    ]
    return torch.stack(gaps, dim=1) / scale[:, None]


def openness(points: torch.Tensor) -> torch.Tensor:
    """[N, 3] in [0, 1]: how far each eye (image-left, image-right) and the mouth count as open."""
    ratio = apertures(points)
    low = torch.tensor([EYE_OPEN[0], EYE_OPEN[0], MOUTH_OPEN[0]], device=points.device)
    high = torch.tensor([EYE_OPEN[1], EYE_OPEN[1], MOUTH_OPEN[1]], device=points.device)
    return ((ratio - low) / (high - low)).clamp(0.0, 1.0)


def face_masks(
    points: torch.Tensor, size: int, keep_eyes_mouth: bool = True, resolution: int | None = None
) -> FaceMasks:
    """The masks of each face from its target mesh points [N, 468, 2+] in region pixels, as
    R x R maps (R = size). resolution (default R): the side at which the oval's maps are drawn
    and feathered, then scaled up bilinearly; they are smooth but for their edges, so half of R
    keeps their shape (edges about a region pixel softer) for a quarter of the pixels. The open
    eyes and mouth are always taken out at R: at half of the CPU's 192 an eye's opening is two
    or three pixels tall, too coarse to keep it and not its lids."""
    xy = points[..., :2].float()
    if resolution is None or resolution == size:
        oval = _oval_masks(xy, size)
    else:
        half = _oval_masks(xy * (resolution / size), resolution)
        maps = torch.cat((half.alpha, half.hard, half.skin, half.support), dim=1)
        oval = FaceMasks(*F.interpolate(maps, size=(size, size), mode="bilinear", align_corners=False).split(1, dim=1))
    parts = _parts(xy, size)
    skin = oval.skin * (1.0 - parts.amax(dim=1, keepdim=True))  # open or not: not skin
    if not keep_eyes_mouth:
        return FaceMasks(alpha=oval.alpha, hard=oval.hard, skin=skin, support=oval.support)
    kept = (parts * openness(xy)[:, :, None, None]).amax(dim=1, keepdim=True)  # as far as each is open
    alpha = oval.alpha * (1.0 - box_blur(kept, max(1, round(size / 256.0))))
    return FaceMasks(alpha=alpha, hard=oval.hard * (1.0 - kept), skin=skin, support=oval.support)


def grown_outline(outline: torch.Tensor, by: float) -> torch.Tensor:
    """A closed, roughly convex outline [N, V, 2] moved `by` pixels outwards, each vertex away
    from the outline's centre (an eye's lids: a pixel or so, not a whole dilation's square)."""
    centre = outline.mean(dim=1, keepdim=True)
    away = outline - centre
    return outline + away / away.norm(dim=-1, keepdim=True).clamp_min(1e-6) * by


def _parts(xy: torch.Tensor, size: int) -> torch.Tensor:
    """[N, 3, R, R] {0, 1}: the image-left eye's, the image-right eye's and the mouth's openings,
    each drawn about 1.5 region pixels (at 256; less near an eye's corners) out past its lids or
    lips. Within that the target shows (the `hard` mask), and the source's feather rises from
    there over about 3 px. The 2-pixel square dilation this replaced, with its feather, kept more
    of the target's lashes and lid margins on every swap, and with them much of who the face is
    (SFace at steady state: 18 -> 20 of 24 pairs nearer the source)."""
    unit = size / 256.0  # tuned at R = 256
    polygons = [EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT, INNER_LIPS]
    outlines = [xy[:, index_tensor(polygon, xy.device)] for polygon in polygons]
    outlines = [grown_outline(outline, 1.5 * unit) for outline in outlines]
    # in one fill: each padded to the longest by repeating its last vertex (an edge of length 0
    # crosses no row)
    longest = max(len(polygon) for polygon in polygons)
    padded = [
        torch.cat((outline, outline[:, -1:].expand(-1, longest - outline.shape[1], -1)), dim=1) for outline in outlines
    ]
    filled = polygon_masks(torch.stack(padded, dim=1).flatten(0, 1), size).view(-1, 3, size, size)
    return filled


def _oval_masks(xy: torch.Tensor, size: int) -> FaceMasks:
    """The oval's maps, the eyes and mouth not taken out yet (skin: the eroded oval)."""
    unit = size / 256.0  # the kernel sizes below were tuned at R = 256
    # feather reach 3 x 2 = 6 < erosion + 1 at 256 (at 192 and 96 the rounding gives reach 6 and
    # 3 for erosion 4 and 2: a few per cent of alpha reach the outline, where `hard` cuts them
    # off). The band inside the outline where the target still
    # shows was 8 + 9 px: 6 + 6 lets more of the source face show (SFace, steady state: 20 -> 21
    # of 24 pairs nearer the source), no seam seen on the test portraits (the hard poses' edge
    # energy x1.05 -> x1.09, their limit 1.3)
    erosion, feather = round(6 * unit), round(2 * unit)
    reach = round(16 * unit)  # how far the blend's coarse bands may spread past the oval
    oval = polygon_masks(xy[:, index_tensor(FACE_OVAL, xy.device)], size)
    core = erode(oval, erosion)
    # the face's feather and the support's softening share a radius: blurred together
    alpha, support = box_blur(torch.cat((core, dilate(oval, reach)), dim=1), feather).split(1, dim=1)
    # Across the forehead's upper part the swap fades in over a wider band: there is no feature
    # there to show twice, and the narrow band left a visible line where a lined forehead (Biden's)
    # met a smooth one. SFace over the quality test's pairs: 0.559 -> 0.558 to the source.
    wide = box_blur(erode(oval, round(FOREHEAD_EROSION * unit)), round(FOREHEAD_FEATHER * unit))
    alpha = alpha + (wide - alpha) * upper_forehead(xy, size)
    return FaceMasks(alpha=alpha, hard=oval, skin=core, support=support)


# The forehead's wider feather, at R = 256 (reach 3 x 4 = 12 <= the erosion), and where it holds:
# from 0.4 of the way from the brows' middle to the outline's top, fully from 0.9.
FOREHEAD_EROSION, FOREHEAD_FEATHER = 12, 4
FOREHEAD_RAMP = (0.4, 0.9)
FOREHEAD_TOP, BROWS_MIDDLE = 10, 9  # FaceMesh points


def upper_forehead(xy: torch.Tensor, size: int) -> torch.Tensor:
    """[N, 1, R, R] in [0, 1]: how far each pixel lies up the forehead (FOREHEAD_RAMP), measured
    along the face's own up (brows' middle to the outline's top), so a tilted head's is found too."""
    brows = xy[:, BROWS_MIDDLE]
    up = xy[:, FOREHEAD_TOP] - brows
    height = up.norm(dim=-1, keepdim=True).clamp_min(1e-6)  # [N, 1]
    up = up / height
    centres = torch.arange(size, device=xy.device, dtype=xy.dtype) + 0.5
    along = ((centres - brows[:, 1:2]) * up[:, 1:2])[:, :, None] + ((centres - brows[:, 0:1]) * up[:, 0:1])[:, None, :]
    low, high = FOREHEAD_RAMP
    # a NaN point gives the cheeks' feather there, not a NaN mask
    return ((along / height[:, :, None] - low) / (high - low)).clamp(0.0, 1.0).nan_to_num(0.0)[:, None]
