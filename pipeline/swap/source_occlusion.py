"""What covers an uploaded face: pixels inside the face that are neither its skin nor its features
(hair strands, a fringe, glasses frames, a hand, glare), found on the frontal texture at upload.

A skin model is learned from that face's own reliably visible skin (the inner cheeks, nose,
forehead and chin: well inside the outline, away from the features, seen head-on) as a Gaussian
over three shade-free measures: brightness against the skin's slow shading around (so a shadowed
cheek is still skin), and blue and red chroma per luma. A texel far from it (Mahalanobis distance
past OCCLUDED_BEYOND) that is not in a feature region (feature_regions.py, whose darkness is
their own) counts as occluded; the texture then takes it from the mirror or fills it
(source_texture.py). A beard or heavy stubble is far from the skin too and is filled like hair:
on a target it showed as a grey patch.
"""

from __future__ import annotations

import torch

from pipeline.swap.color_match import rgb_to_ycc
from pipeline.swap.harmonic_fill import harmonic_fill
from pipeline.swap.masks import box_blur, dilate, erode

# Squared Mahalanobis distance (3 measures) past which a texel is not skin. A chi-square with 3
# degrees of freedom passes this 1 time in 10^4 for a truly Gaussian skin; real skin has pores,
# moles and highlights, so it is set by eye on the test portraits (none of a clean face's skin
# flagged beyond specks) and on hair-over-face photos (the strands flagged).
OCCLUDED_BEYOND = 30.0
# Reliable skin: this share of the face's width inside its outline and away from the features.
RELIABLE_INSET = 0.08
# The slow shading the brightness is measured against: blurred over this share of the width.
SHADING_BLUR = 0.06
# Flagged texels: specks smaller than about OPEN across dropped, the rest grown by GROW (a strand's
# soft edge and its shadow), both shares of the face's width.
OPEN = 0.01
GROW = 0.015
# The model's samples: those past this distance are dropped and the model refitted, twice (a
# fringe over the forehead centre must not widen the skin's model).
TRIM_BEYOND = 11.3  # chi-square, 3 degrees of freedom, 99 %


def shade_free(texture: torch.Tensor, skin: torch.Tensor, width: float) -> torch.Tensor:
    """texture [1, 3, T, T]; skin [1, 1, T, T] {0, 1} where to read the slow shading -> [1, 3, T, T]:
    log brightness against the shading around, blue and red chroma per luma."""
    ycc = rgb_to_ycc(texture)
    brightness = ycc[:, :1].clamp_min(1e-3)
    radius = max(1, round(SHADING_BLUR * width))
    around = box_blur(brightness * skin, radius) / box_blur(skin, radius).clamp_min(1e-6)
    around = harmonic_fill(around, box_blur(skin, radius) > 0.05).clamp_min(1e-3)
    return torch.cat((brightness.log() - around.log(), ycc[:, 1:] / brightness), dim=1)


def skin_model(measures: torch.Tensor, reliable: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean [3] and inverse covariance [3, 3] of `measures` [1, 3, T, T] over `reliable` [1, 1, T, T]."""
    samples = measures[0].flatten(1).T[reliable.flatten() > 0.5].double()  # [M, 3]
    keep = torch.ones(len(samples), dtype=torch.bool, device=samples.device)
    for _ in range(3):
        kept = samples[keep]
        mean = kept.mean(dim=0)
        covariance = torch.cov(kept.T) + 1e-6 * torch.eye(3, dtype=kept.dtype, device=kept.device)
        inverse = torch.linalg.inv(covariance)
        distance = ((samples - mean) @ inverse * (samples - mean)).sum(dim=1)
        keep = distance < TRIM_BEYOND
        if int(keep.sum()) < 16:
            break
    return mean.float(), inverse.float()


def occlusion_map(
    texture: torch.Tensor, face: torch.Tensor, features: torch.Tensor, seen: torch.Tensor, width: float
) -> torch.Tensor:
    """texture [1, 3, T, T] the source drawn in the frontal frame; face [1, 1, T, T] {0, 1} inside
    its outline; features [1, 1, T, T] {0, 1} (feature_regions); seen [1, 1, T, T] in [0, 1]: how
    well the photo shows each texel (source_texture); width: the face's width in texels ->
    [1, 1, T, T] {0, 1}: occluded texels."""
    reliable = erode(face, max(1, round(RELIABLE_INSET * width))) * (1.0 - features) * (seen > 0.9)
    if int(reliable.sum()) < 32:
        return torch.zeros_like(face)
    skin_guess = face * (1.0 - features) * (seen > 0.5)
    measures = shade_free(texture, skin_guess, width)
    mean, inverse = skin_model(measures, reliable)
    offset = measures[0].flatten(1).T - mean  # [T*T, 3]
    distance = ((offset @ inverse) * offset).sum(dim=1).view_as(face[0, 0])[None, None]
    flagged = (distance > OCCLUDED_BEYOND).float() * face * (1.0 - features)
    speck = max(1, round(OPEN * width / 2))
    flagged = dilate(erode(flagged, speck), speck)
    return dilate(flagged, max(1, round(GROW * width))) * face
