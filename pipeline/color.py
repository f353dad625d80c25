"""I420 (yuv420p) <-> RGB on the device, batched, in torch.

BT.601 limited range: what WebRTC's VP8/H264 decoders hand us and what our encoders
expect (PyAV/swscale use the same default for yuv420p). Runs wherever the tensors
live: on CUDA with cupy installed, as the kernels of cuda_color.py; else plain torch
(on the GPU too, so the conversion never leaves the device).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline import cuda_color

# BT.601, limited range (Y 16-235, U/V 16-240), in units of 1/255.
_Y_SCALE = 255.0 / 219.0
_UV_SCALE = 255.0 / 224.0
_R_V = 1.402 * _UV_SCALE
_G_U = -0.344136 * _UV_SCALE
_G_V = -0.714136 * _UV_SCALE
_B_U = 1.772 * _UV_SCALE


# The conversions as one 3x3 matrix product per pixel, where a formula per channel took a dozen
# elementwise passes (I420 -> RGB of 640x480 on one CPU thread: about 5.9 -> 4.3 ms, interleaved).
_YUV_TO_RGB = torch.tensor([[_Y_SCALE, 0.0, _R_V], [_Y_SCALE, _G_U, _G_V], [_Y_SCALE, _B_U, 0.0]]) / 255.0
_YUV_TO_RGB_BIAS = -(_YUV_TO_RGB @ torch.tensor([16.0, 128.0, 128.0]))
_RGB_TO_YUV = torch.tensor([[65.481, 128.553, 24.966], [-37.797, -74.203, 112.0], [112.0, -93.786, -18.214]]) / 255.0
_RGB_TO_YUV_BIAS = torch.tensor([16.0, 128.0, 128.0])


def _use_cupy(tensor: torch.Tensor) -> bool:
    return tensor.is_cuda and cuda_color.available()


def i420_to_rgb(i420: torch.Tensor) -> torch.Tensor:
    """[N, H*3/2, W] uint8 I420 -> [N, 3, H, W] float RGB in [0, 1] (same device)."""
    if _use_cupy(i420):
        return cuda_color.i420_to_rgb(i420)
    height, width = i420.shape[1] * 2 // 3, i420.shape[2]
    return i420_window_to_rgb(i420, 0, height, 0, width)


def i420_window_to_rgb(i420: torch.Tensor, top: int, bottom: int, left: int, right: int) -> torch.Tensor:
    """The window [top:bottom, left:right] (even bounds) of `i420_to_rgb(i420)`, converting only it:
    [N, 3, bottom - top, right - left] (plain torch, on any device)."""
    n, rows, width = i420.shape
    height = rows * 2 // 3
    if not (0 <= top < bottom <= height and 0 <= left < right <= width) or (top | bottom | left | right) % 2:
        raise ValueError(f"window ({top}, {bottom}, {left}, {right}) must be even and inside {height}x{width}")
    # The chroma rows and columns the window's bilinear upsampling reads: one more on each side
    # (where the frame has one), so the window's values equal the whole frame's.
    chroma_top, chroma_bottom = max(0, top // 2 - 1), min(height // 2, bottom // 2 + 1)
    chroma_left, chroma_right = max(0, left // 2 - 1), min(width // 2, right // 2 + 1)
    planes = i420[:, height:].view(n, 2, height // 2, width // 2)  # U plane, then V plane
    chroma = planes[:, :, chroma_top:chroma_bottom, chroma_left:chroma_right].float()
    size = (2 * (chroma_bottom - chroma_top), 2 * (chroma_right - chroma_left))
    chroma = F.interpolate(chroma, size=size, mode="bilinear", align_corners=False)
    rows, cols = (
        slice(top - 2 * chroma_top, bottom - 2 * chroma_top),
        slice(left - 2 * chroma_left, right - 2 * chroma_left),
    )
    h, w = bottom - top, right - left
    yuv = torch.cat((i420[:, None, top:bottom, left:right].float(), chroma[:, :, rows, cols]), dim=1).view(n, 3, h * w)
    rgb = _per_pixel(_YUV_TO_RGB, _YUV_TO_RGB_BIAS, yuv)
    return rgb.clamp_(0.0, 1.0).view(n, 3, h, w)


def _per_pixel(matrix: torch.Tensor, bias: torch.Tensor, pixels: torch.Tensor) -> torch.Tensor:
    """matrix [3, 3] @ each pixel of pixels [N, 3, P] + bias [3]."""
    n = pixels.shape[0]
    matrix = matrix.to(pixels.device, pixels.dtype).expand(n, 3, 3)
    return torch.baddbmm(bias.to(pixels.device, pixels.dtype)[None, :, None], matrix, pixels)


def rgb_to_i420(rgb: torch.Tensor) -> torch.Tensor:
    """[N, 3, H, W] float RGB in [0, 1] -> [N, H*3/2, W] uint8 I420 (H and W even)."""
    if _use_cupy(rgb):
        return cuda_color.rgb_to_i420(rgb)
    n, _, height, width = rgb.shape
    yuv = _per_pixel(_RGB_TO_YUV * 255.0, _RGB_TO_YUV_BIAS, rgb.reshape(n, 3, height * width)).view(n, 3, height, width)
    y = yuv[:, 0]
    chroma = F.avg_pool2d(yuv[:, 1:], kernel_size=2)  # 4:2:0: average each 2x2
    planes = torch.cat((y, chroma.reshape(n, height // 2, width)), dim=1)
    return planes.round_().clamp_(0, 255).to(torch.uint8)
