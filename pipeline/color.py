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
    n, rows, width = i420.shape
    height = rows * 2 // 3
    data = i420.float()
    chroma = data[:, height:].reshape(n, 2, height // 2, width // 2)  # U plane, then V plane
    chroma = F.interpolate(chroma, size=(height, width), mode="bilinear", align_corners=False)
    yuv = torch.cat((data[:, None, :height], chroma), dim=1).view(n, 3, height * width)
    rgb = _per_pixel(_YUV_TO_RGB, _YUV_TO_RGB_BIAS, yuv)
    return rgb.clamp_(0.0, 1.0).view(n, 3, height, width)


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
