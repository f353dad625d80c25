"""Five-point face alignment, batched on the device: similarity transforms and aligned crops.

Coordinates: key points are continuous frame pixels, the frame's top-left corner at (0, 0) and
pixel (i, j) covering [i, i+1) x [j, j+1), as in pipeline/landmarks/crops.py. Templates are written
the way InsightFace and OpenCV publish them, with pixel centres on whole numbers (what
`cv2.warpAffine` assumes); they are moved by half a pixel into the continuous convention here.
A transform is a [2, 3] affine matrix taking crop pixels to frame pixels (as in crops.py), so that
`transform_points(crop_points, transforms)` gives frame pixels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline.sampling import affine_grid, frames_per_crop

# Left eye, right eye, nose tip, left and right mouth corner (image left/right), for a 112 x 112
# crop: InsightFace's ArcFace template, the same five points OpenCV's FaceRecognizerSF aligns to.
ARCFACE_112 = (
    (38.2946, 51.6963),
    (73.5318, 51.5014),
    (56.0252, 71.7366),
    (41.5493, 92.3655),
    (70.7299, 92.2041),
)
ARCFACE_SIZE = 112

Template = tuple[tuple[float, float], ...]


def scaled_template(size: int, template: Template = ARCFACE_112, template_size: int = ARCFACE_SIZE) -> Template:
    """`template` (for a `template_size` crop) for a `size` crop: the same framing, more pixels."""
    factor = size / template_size
    return tuple((x * factor, y * factor) for x, y in template)


def similarity_to_template(points: torch.Tensor, template: torch.Tensor) -> torch.Tensor:
    """The least-squares similarity (rotation, uniform scale, shift; no reflection) taking each
    face's points [N, K, 2] onto `template` [K, 2]: [N, 2, 3] matrices, points -> template.

    This is Umeyama's estimate for two dimensions in closed form: written with complex numbers,
    the best `template ~ c * points + t` has c = sum(conj(p) * q) / sum(|p|^2) over the centred
    points p and q, the same rotation and scale the SVD route finds (with its reflection guard)
    but without an SVD, so it runs batched in any dtype on any device without a host sync.
    """
    points = points.float()
    template = template.to(points)
    p_mean, q_mean = points.mean(dim=1), template.mean(dim=0)
    p, q = points - p_mean[:, None], template - q_mean
    spread = p.square().sum(dim=(1, 2)).clamp_min(1e-12)
    a = (p * q).sum(dim=(1, 2)) / spread  # scale * cos(angle)
    b = (p[..., 0] * q[:, 1] - p[..., 1] * q[:, 0]).sum(dim=1) / spread  # scale * sin(angle)
    linear = torch.stack((torch.stack((a, -b), dim=1), torch.stack((b, a), dim=1)), dim=1)
    offset = q_mean - (linear @ p_mean[:, :, None])[..., 0]
    return torch.cat((linear, offset[:, :, None]), dim=2)


def invert_similarity(transforms: torch.Tensor) -> torch.Tensor:
    """The inverse of each [2, 3] similarity (or any invertible affine) matrix, in closed form."""
    linear, offset = transforms[:, :, :2], transforms[:, :, 2:]
    a, b, c, d = linear[:, 0, 0], linear[:, 0, 1], linear[:, 1, 0], linear[:, 1, 1]
    inverse = torch.stack((torch.stack((d, -b), dim=1), torch.stack((-c, a), dim=1)), dim=1)
    inverse = inverse / (a * d - b * c)[:, None, None]
    return torch.cat((inverse, -(inverse @ offset)), dim=2)


def transform_points(points: torch.Tensor, transforms: torch.Tensor) -> torch.Tensor:
    """Points [N, K, 2] through the [N, 2, 3] affine transforms."""
    transforms = transforms.to(points)
    return points @ transforms[:, :, :2].transpose(1, 2) + transforms[:, None, :, 2]


def warp_crops(frames: torch.Tensor, transforms: torch.Tensor, frame_index: torch.Tensor, size: int) -> torch.Tensor:
    """[N, 3, size, size] float32 crops (RGB, 0-255, zeros outside the frame), bilinear: crop pixel
    u shows frame pixel `transforms[n] @ (u, 1)` of frame `frame_index[n]`.

    Cost: grid_sample reads float input, so each face's whole frame is converted to float (N
    frames, not B); on the CPU that conversion, not the sampling, is most of the time.
    """
    height, width = frames.shape[1:3]
    device = frames.device
    transforms = transforms.to(device, torch.float32)
    # affine_grid maps output [-1, 1] to input [-1, 1] (align_corners=False): crop pixel
    # u = (out + 1) * size / 2, frame pixel f = L u + o, input = f * 2 / (W, H) - 1.
    to_unit = torch.tensor([2.0 / width, 2.0 / height], device=device)
    linear, offset = transforms[:, :, :2], transforms[:, :, 2]
    theta_linear = linear * (size / 2) * to_unit[None, :, None]
    theta_offset = (linear.sum(dim=2) * (size / 2) + offset) * to_unit - 1
    theta = torch.cat((theta_linear, theta_offset[:, :, None]), dim=2)
    grid = affine_grid(theta, size)
    source = frames_per_crop(frames, frame_index).permute(0, 3, 1, 2).float()
    return F.grid_sample(source, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def align_faces(
    frames: torch.Tensor,
    keypoints: torch.Tensor,
    frame_index: torch.Tensor,
    *,
    size: int = ARCFACE_SIZE,
    template: Template = ARCFACE_112,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Aligned face crops: each face's five key points moved onto `template` by a similarity.

    frames: [B, H, W, 3] uint8 RGB. keypoints: [N, 5, 2] in frame pixels (the detector's order:
    left eye, right eye, nose, left and right mouth corner as seen in the image). frame_index: [N]
    which frame each face is in (values in [0, B); not checked, to keep the device unsynchronised).
    `template` is in `size`-pixel crop coordinates, whole numbers at pixel centres.

    Returns crops [N, 3, size, size] float32 RGB on the 0-255 scale and transforms [N, 2, 3]
    taking crop pixels to frame pixels, both on the frames' device.
    """
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != torch.uint8:
        raise ValueError(f"frames must be a [B, H, W, 3] uint8 tensor, not {list(frames.shape)} {frames.dtype}")
    count = keypoints.shape[0]
    if keypoints.shape != (count, len(template), 2) or frame_index.shape != (count,):
        raise ValueError(
            f"keypoints must be [N, {len(template)}, 2] and frame_index [N], "
            f"not {list(keypoints.shape)} and {list(frame_index.shape)}"
        )
    device = frames.device
    if count == 0:
        return torch.zeros(0, 3, size, size, device=device), torch.zeros(0, 2, 3, device=device)
    target = torch.tensor(template, dtype=torch.float32, device=device) + 0.5  # to continuous pixels
    to_crop = similarity_to_template(keypoints.to(device, torch.float32), target)
    transforms = invert_similarity(to_crop)
    return warp_crops(frames, transforms, frame_index, size), transforms
