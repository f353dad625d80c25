"""Seamless blend of the swapped face into its region: a multi-band (Laplacian pyramid) blend,
batched over regions.

Written as a change to the target: blend(A, B, m) - B = collapse(Laplacian(A - B) * Gauss(m)),
so where every level of the mask is 0 nothing changes. Fine detail switches over within the
feathered edge; the low frequencies (lighting, colour drift) fade over a band that widens with
each level, which hides the seam that a single alpha ramp leaves when the two skins differ.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_BINOMIAL = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0]) / 16.0


def _blur(x: torch.Tensor) -> torch.Tensor:
    channels = x.shape[1]
    kernel = _BINOMIAL.to(x.device, x.dtype)
    x = F.pad(x, (2, 2, 2, 2), mode="replicate")
    x = F.conv2d(x, kernel.view(1, 1, 1, 5).expand(channels, 1, 1, 5), groups=channels)
    return F.conv2d(x, kernel.view(1, 1, 5, 1).expand(channels, 1, 5, 1), groups=channels)


def _down(x: torch.Tensor) -> torch.Tensor:
    return _blur(x)[:, :, ::2, ::2]


def _up(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


def gaussian_pyramid(x: torch.Tensor, levels: int) -> list[torch.Tensor]:
    pyramid = [x]
    for _ in range(levels):
        pyramid.append(_down(pyramid[-1]))
    return pyramid


def multiband_change(face: torch.Tensor, base: torch.Tensor, alpha: torch.Tensor, levels: int = 3) -> torch.Tensor:
    """The change [N, C, R, R] that blends `face` into `base` (both [N, C, R, R]) under the
    feathered `alpha` [N, 1, R, R], band by band. `face` should equal `base` wherever it holds no
    valid face (so that no foreign content leaks into the coarse bands)."""
    diff = gaussian_pyramid(face - base, levels)
    weights = gaussian_pyramid(alpha, levels)
    out = diff[-1] * weights[-1]
    for level in range(levels - 1, -1, -1):
        size = diff[level].shape[-2:]
        band = diff[level] - _up(diff[level + 1], size)
        out = _up(out, size) + band * weights[level]
    return out


def alpha_change(face: torch.Tensor, base: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """The plain alpha blend's change: alpha * (face - base)."""
    return alpha * (face - base)
