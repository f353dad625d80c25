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


def _use_cupy(tensor: torch.Tensor) -> bool:
    return tensor.is_cuda and cuda_color.available()


def i420_to_rgb(i420: torch.Tensor) -> torch.Tensor:
    """[N, H*3/2, W] uint8 I420 -> [N, 3, H, W] float RGB in [0, 1] (same device)."""
    if _use_cupy(i420):
        return cuda_color.i420_to_rgb(i420)
    n, rows, width = i420.shape
    height = rows * 2 // 3
    data = i420.float()
    y = data[:, :height]
    chroma = data[:, height:].reshape(n, 2, height // 2, width // 2)  # U plane, then V plane
    chroma = F.interpolate(chroma, size=(height, width), mode="bilinear", align_corners=False)
    y = (y - 16.0) * _Y_SCALE
    u = chroma[:, 0] - 128.0
    v = chroma[:, 1] - 128.0
    rgb = torch.stack((y + _R_V * v, y + _G_U * u + _G_V * v, y + _B_U * u), dim=1)
    return (rgb / 255.0).clamp_(0.0, 1.0)


def rgb_to_i420(rgb: torch.Tensor) -> torch.Tensor:
    """[N, 3, H, W] float RGB in [0, 1] -> [N, H*3/2, W] uint8 I420 (H and W even)."""
    if _use_cupy(rgb):
        return cuda_color.rgb_to_i420(rgb)
    n, _, height, width = rgb.shape
    r, g, b = (rgb * 255.0).unbind(dim=1)
    y = 16.0 + (65.481 * r + 128.553 * g + 24.966 * b) / 255.0
    u = 128.0 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255.0
    v = 128.0 + (112.0 * r - 93.786 * g - 18.214 * b) / 255.0
    chroma = F.avg_pool2d(torch.stack((u, v), dim=1), kernel_size=2)  # 4:2:0: average each 2x2
    planes = torch.cat((y.reshape(n, height, width), chroma.reshape(n, height // 2, width)), dim=1)
    return planes.round_().clamp_(0, 255).to(torch.uint8)
