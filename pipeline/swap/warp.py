"""Dense backward warp from a target face's mesh to a source face's mesh: a thin-plate spline.

Why a thin-plate spline and not a piecewise-affine warp over the mesh triangles: it needs no
triangulation (MediaPipe's tessellation is ~900 triangles of someone else's data; a Delaunay
triangulation of the target points changes its topology from frame to frame and folds where the
far side of a turned head overlaps), it is smooth across the whole face (no creases along triangle
edges that the blend would have to hide), and it is one batched `torch.linalg.solve` of a
(K + 3)^2 system per face (K control points) plus a matrix product on a coarse grid: dense, branch-free tensor work
that batches across faces of any size. The spline is fitted through 256 of the 468 points
(`spline_controls`): every point of the face's outline, eyes, lips and brows, and the rest spread
evenly over the face. That costs a seventh of the solve and half the kernel of all 468 (on one
CPU thread, 17 -> 7 ms per face), while the swap-quality and hard-pose figures stay where they
were (landmarks within 0.017 IOD on a head turned 45 degrees, 0.015 with all points; 200 points
gave 0.023 and 160 points 0.052). A small regularisation (smoothing) keeps the spline sane
where target points nearly coincide (closed lips, the hidden side of a turned head) while the
source points they map to do not.

Coordinates: control points are target points in region pixels (see region.py), scaled by
1 / region size so the kernel is well conditioned; values are `grid_sample` coordinates in the
padded source batch (align_corners=False), so the spline yields the sampling grid directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from pipeline.swap.topology import (
    BROW_IMAGE_LEFT,
    BROW_IMAGE_RIGHT,
    EYE_IMAGE_LEFT,
    EYE_IMAGE_RIGHT,
    FACE_OVAL,
    INNER_LIPS,
    OUTER_LIPS,
)

# The mesh points the spline always goes through: the contours of the face's features.
FEATURE_POINTS = tuple(
    sorted(
        set(FACE_OVAL + EYE_IMAGE_LEFT + EYE_IMAGE_RIGHT + INNER_LIPS + OUTER_LIPS + BROW_IMAGE_LEFT + BROW_IMAGE_RIGHT)
    )
)
SPLINE_CONTROLS = 256

# Smoothing added to the kernel's diagonal, in units where the region's side is 1; at control
# points hidden behind a nearer part of the face (hidden_points.py) so much that the spline only
# loosely follows them and takes the visible surface's mapping there.
DEFAULT_REGULARIZATION = 1e-4
HIDDEN_REGULARIZATION = 1.0


@dataclass(frozen=True, eq=False)
class ThinPlateSpline:
    """f(p) = affine[0] + p @ affine[1:] + sum_j weights[j] * U(|p - control[j]|), U(r) = r^2 log r.

    control [N, K, 2], weights [N, K, D], affine [N, 3, D]; float32 on the device."""

    control: torch.Tensor
    weights: torch.Tensor
    affine: torch.Tensor

    def __call__(self, points: torch.Tensor) -> torch.Tensor:
        """points [N, M, 2] -> values [N, M, D].

        The [N, M, K] kernel is the bulk of the warp's work on a CPU, so it is built in place
        from squared distances (one fused matrix product, no square roots) as r2 log r2 = 2 U."""
        control = self.control
        r2 = torch.baddbmm(
            points.square().sum(-1, keepdim=True) + control.square().sum(-1)[:, None],
            points,
            control.transpose(1, 2),
            alpha=-2,
        )
        kernel = r2.clamp_min_(1e-30).log().mul_(r2)
        return kernel @ (0.5 * self.weights) + self.affine[:, :1] + points @ self.affine[:, 1:]


def spline_controls(points: torch.Tensor, count: int = SPLINE_CONTROLS) -> torch.Tensor:
    """Indices [count] (sorted) of the mesh points [468, 2+] the spline is fitted through: the
    feature contours, then, one at a time, the point farthest from all chosen so far (so the rest
    cover the face evenly). Taken on the source face, once: the choice never changes from frame
    to frame."""
    xy = points[:, :2].detach().double().cpu()
    chosen = list(FEATURE_POINTS)
    nearest = torch.cdist(xy, xy[chosen]).amin(dim=1)
    while len(chosen) < min(count, len(xy)):
        farthest = int(nearest.argmax())
        chosen.append(farthest)
        nearest = torch.minimum(nearest, (xy - xy[farthest]).norm(dim=1))
    return torch.tensor(sorted(chosen), dtype=torch.long)


def _kernel(r2: torch.Tensor) -> torch.Tensor:
    """U as a function of the squared distance: r^2 log r = r2 * log(r2) / 2 (0 at r = 0)."""
    return 0.5 * r2 * torch.log(r2.clamp_min(1e-30))


def fit_thin_plate_spline(
    control: torch.Tensor, values: torch.Tensor, regularization: float | torch.Tensor = DEFAULT_REGULARIZATION
) -> ThinPlateSpline:
    """The spline through `values` [N, K, D] at `control` [N, K, 2], one (K+3)^2 solve per face,
    batched; `regularization` one value or one per control point [N, K]. Solved in float64 (the
    system is small; float32 loses the affine part)."""
    n, k, _ = control.shape
    c = control.double()
    system = torch.zeros(n, k + 3, k + 3, dtype=torch.float64, device=control.device)
    along_x, along_y = c[:, :, None, 0] - c[:, None, :, 0], c[:, :, None, 1] - c[:, None, :, 1]
    system[:, :k, :k] = _kernel(along_x.square_() + along_y.square_())  # squared distances: no root taken and squared
    if isinstance(regularization, torch.Tensor):
        regularization = regularization.to(control.device, torch.float64)
    system[:, :k, :k].diagonal(dim1=1, dim2=2).add_(regularization)
    system[:, :k, k] = 1.0
    system[:, :k, k + 1 :] = c
    system[:, k, :k] = 1.0
    system[:, k + 1 :, :k] = c.transpose(1, 2)
    rhs = torch.zeros(n, k + 3, values.shape[-1], dtype=torch.float64, device=control.device)
    rhs[:, :k] = values.double()
    solution = _solve(system, rhs).float()
    return ThinPlateSpline(control.float(), solution[:, :k], solution[:, k:])


def _solve(system: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """Batched `torch.linalg.solve`, except on the CPU: there torch 2.13's batched LU (getrf under
    its OpenMP batch loop, more than one thread) fails with "Pivots given to lu_solve must all be
    greater or equal to 1" (MKL: "Parameter 6 was incorrect on entry to DLASWP") for any batch > 1.
    One face at a time is correct there, and the solve is a small part of the work."""
    if system.device.type != "cpu" or system.shape[0] == 1:
        return torch.linalg.solve(system, rhs)
    return torch.cat([torch.linalg.solve(system[i : i + 1], rhs[i : i + 1]) for i in range(system.shape[0])])


def source_grid(
    target_points: torch.Tensor,
    source_points: torch.Tensor,
    source_size: tuple[int, int],
    region_size: int,
    *,
    coarse: int = 32,
    hidden: torch.Tensor | None = None,
) -> torch.Tensor:
    """The backward-warp sampling grid [N, R, R, 2] (grid_sample coordinates into the padded
    source batch) for each pixel of each face's R x R region.

    target_points [N, K, 2] in region pixels; source_points [N, K, 2] in source pixels;
    source_size (Hs, Ws) of the padded source batch; hidden [N, K] in [0, 1]: how far each target
    point lies hidden behind a nearer part of the face (hidden_points.py); the spline follows such
    points loosely (its smoothing there moves from the default to HIDDEN_REGULARIZATION on a log
    scale, a smooth hand-over). The spline is evaluated on a coarse x coarse
    lattice over the region (pixel centres of its corners included) and upsampled bilinearly:
    the spline is smooth, so 32 x 32 gave the same swap-quality and hard-pose figures as 48 x 48
    (landmarks within 0.047 against 0.046 IOD at worst) for half the evaluation (one CPU thread:
    14 -> 6 ms per face).
    """
    n = target_points.shape[0]
    height, width = source_size
    scale = 1.0 / region_size
    to_grid = torch.tensor([2.0 / width, 2.0 / height], device=source_points.device)
    values = source_points[..., :2] * to_grid - 1.0
    regularization = DEFAULT_REGULARIZATION
    if hidden is not None:
        regularization = DEFAULT_REGULARIZATION * (HIDDEN_REGULARIZATION / DEFAULT_REGULARIZATION) ** hidden.double()
    spline = fit_thin_plate_spline(target_points[..., :2] * scale, values, regularization)

    axis = torch.linspace(0.5 * scale, 1.0 - 0.5 * scale, coarse, device=target_points.device)
    yy, xx = torch.meshgrid(axis, axis, indexing="ij")
    lattice = torch.stack((xx, yy), dim=-1).reshape(1, -1, 2).expand(n, -1, -1)
    # contiguous: given the permuted (channels-last) view, the CPU's bilinear upsampling takes a
    # path several times slower (0.88 against 0.24 ms at R = 192 on one thread)
    coarse_grid = spline(lattice).reshape(n, coarse, coarse, 2).permute(0, 3, 1, 2).contiguous()
    dense = F.interpolate(coarse_grid, size=(region_size, region_size), mode="bilinear", align_corners=True)
    return dense.permute(0, 2, 3, 1)


def warp_sources(sources: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """Each face's source image [N, 3, Hs, Ws] sampled at its grid [N, R, R, 2] -> [N, 3, R, R]
    (zeros outside the source image)."""
    return F.grid_sample(sources, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
