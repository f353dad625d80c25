"""I420 <-> RGB as cupy CUDA kernels: one thread per pixel (or per 2x2 block), no temporaries.

Used by pipeline/color.py for CUDA tensors when cupy is installed (the `gpu` extra); the torch
version computes the same BT.601 limited-range formulas everywhere else. Tensors cross over
without copies through DLPack.
"""

from __future__ import annotations

import functools
import logging
import warnings

import torch

logger = logging.getLogger(__name__)

_SOURCE = r"""
extern "C" __global__ void i420_to_rgb(const unsigned char* src, float* dst, int n, int h, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int b = blockIdx.z;
    if (x >= w || y >= h || b >= n) return;
    const unsigned char* frame = src + (size_t)b * h * w * 3 / 2;
    const unsigned char* u_plane = frame + h * w;
    const unsigned char* v_plane = u_plane + (h / 2) * (w / 2);
    // bilinear chroma at this luma sample (centre-aligned 4:2:0, like torch's interpolate)
    float cx = fminf(fmaxf((x + 0.5f) * 0.5f - 0.5f, 0.0f), (float)(w / 2 - 1));
    float cy = fminf(fmaxf((y + 0.5f) * 0.5f - 0.5f, 0.0f), (float)(h / 2 - 1));
    int x0 = (int)cx, y0 = (int)cy;
    int x1 = min(x0 + 1, w / 2 - 1), y1 = min(y0 + 1, h / 2 - 1);
    float fx = cx - x0, fy = cy - y0;
    int cw = w / 2;
    float u = (1 - fy) * ((1 - fx) * u_plane[y0 * cw + x0] + fx * u_plane[y0 * cw + x1])
            + fy * ((1 - fx) * u_plane[y1 * cw + x0] + fx * u_plane[y1 * cw + x1]) - 128.0f;
    float v = (1 - fy) * ((1 - fx) * v_plane[y0 * cw + x0] + fx * v_plane[y0 * cw + x1])
            + fy * ((1 - fx) * v_plane[y1 * cw + x0] + fx * v_plane[y1 * cw + x1]) - 128.0f;
    float luma = (frame[y * w + x] - 16.0f) * (255.0f / 219.0f);
    float k = 255.0f / 224.0f;
    size_t plane = (size_t)h * w;
    float* out = dst + (size_t)b * 3 * plane + (size_t)y * w + x;
    out[0] = fminf(fmaxf((luma + 1.402f * k * v) / 255.0f, 0.0f), 1.0f);
    out[plane] = fminf(fmaxf((luma - 0.344136f * k * u - 0.714136f * k * v) / 255.0f, 0.0f), 1.0f);
    out[2 * plane] = fminf(fmaxf((luma + 1.772f * k * u) / 255.0f, 0.0f), 1.0f);
}

extern "C" __global__ void rgb_to_i420(const float* src, unsigned char* dst, int n, int h, int w) {
    // one thread per 2x2 block: four lumas and one U, V (the block's average)
    int bx = blockIdx.x * blockDim.x + threadIdx.x;
    int by = blockIdx.y * blockDim.y + threadIdx.y;
    int b = blockIdx.z;
    if (bx >= w / 2 || by >= h / 2 || b >= n) return;
    size_t plane = (size_t)h * w;
    const float* rgb = src + (size_t)b * 3 * plane;
    unsigned char* frame = dst + (size_t)b * plane * 3 / 2;
    float u_sum = 0.0f, v_sum = 0.0f;
    for (int dy = 0; dy < 2; ++dy) {
        for (int dx = 0; dx < 2; ++dx) {
            size_t i = (size_t)(2 * by + dy) * w + 2 * bx + dx;
            float r = rgb[i] * 255.0f, g = rgb[plane + i] * 255.0f, bl = rgb[2 * plane + i] * 255.0f;
            float y = 16.0f + (65.481f * r + 128.553f * g + 24.966f * bl) / 255.0f;
            frame[i] = (unsigned char)fminf(fmaxf(rintf(y), 0.0f), 255.0f);
            u_sum += 128.0f + (-37.797f * r - 74.203f * g + 112.0f * bl) / 255.0f;
            v_sum += 128.0f + (112.0f * r - 93.786f * g - 18.214f * bl) / 255.0f;
        }
    }
    int cw = w / 2;
    unsigned char* u_plane = frame + plane;
    unsigned char* v_plane = u_plane + (h / 2) * cw;
    u_plane[by * cw + bx] = (unsigned char)fminf(fmaxf(rintf(u_sum / 4.0f), 0.0f), 255.0f);
    v_plane[by * cw + bx] = (unsigned char)fminf(fmaxf(rintf(v_sum / 4.0f), 0.0f), 255.0f);
}
"""


@functools.cache
def _kernels():  # type: ignore[no-untyped-def]
    import cupy

    module = cupy.RawModule(code=_SOURCE)
    return cupy, module.get_function("i420_to_rgb"), module.get_function("rgb_to_i420")


@functools.cache
def available() -> bool:
    """cupy is importable (the `gpu` extra), a CUDA device exists and the kernels compile;
    otherwise the torch version is used (a compile failure is logged once)."""
    if not torch.cuda.is_available():
        return False
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    try:
        _kernels()
    except Exception:
        logger.exception("the cupy colour kernels failed to build; converting with torch instead")
        return False
    return True


class _TorchStream:
    """torch's current stream, offered through the CUDA stream protocol (`__cuda_stream__`)."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


def _cupy_stream(cupy, handle: int):  # type: ignore[no-untyped-def]
    """A cupy view of torch's stream: `Stream.from_external` (cupy 14 deprecates ExternalStream),
    or ExternalStream on a cupy that lacks it."""
    if hasattr(cupy.cuda.Stream, "from_external"):
        try:
            return cupy.cuda.Stream.from_external(_TorchStream(handle))
        except (TypeError, ValueError, AttributeError) as error:
            _warn_once(f"cupy.cuda.Stream.from_external refused torch's stream ({error}); using ExternalStream")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return cupy.cuda.ExternalStream(handle)


@functools.cache
def _warn_once(message: str) -> None:
    logger.warning(message)


def _launch(kernel, grid_x: int, grid_y: int, n: int, args) -> None:  # type: ignore[no-untyped-def]
    cupy, _, _ = _kernels()
    block = (16, 16, 1)
    grid = ((grid_x + 15) // 16, (grid_y + 15) // 16, n)
    with _cupy_stream(cupy, torch.cuda.current_stream().cuda_stream):  # on torch's stream, in order
        kernel(grid, block, args)


def i420_to_rgb(i420: torch.Tensor) -> torch.Tensor:
    cupy, to_rgb, _ = _kernels()
    n, rows, width = i420.shape
    height = rows * 2 // 3
    out = torch.empty((n, 3, height, width), dtype=torch.float32, device=i420.device)
    source = i420.contiguous()
    _launch(
        to_rgb,
        width,
        height,
        n,
        (cupy.from_dlpack(source), cupy.from_dlpack(out), cupy.int32(n), cupy.int32(height), cupy.int32(width)),
    )
    return out


def rgb_to_i420(rgb: torch.Tensor) -> torch.Tensor:
    cupy, _, to_i420 = _kernels()
    n, _, height, width = rgb.shape
    out = torch.empty((n, height * 3 // 2, width), dtype=torch.uint8, device=rgb.device)
    source = rgb.float().contiguous()
    _launch(
        to_i420,
        width // 2,
        height // 2,
        n,
        (cupy.from_dlpack(source), cupy.from_dlpack(out), cupy.int32(n), cupy.int32(height), cupy.int32(width)),
    )
    return out
