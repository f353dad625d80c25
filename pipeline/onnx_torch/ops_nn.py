"""Network ops: convolutions, normalisations, Gemm/MatMul and pooling."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from pipeline.onnx_torch.core import (
    RunContext,
    UnsupportedOperator,
    Value,
    register,
    same_device,
)

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def _spatial(x: torch.Tensor, table: dict[int, Any], what: str) -> Any:
    rank = x.ndim - 2
    if rank not in table:
        raise UnsupportedOperator(f"{what} over {rank} spatial dimensions is not supported")
    return table[rank]


def _pads(
    attrs: dict[str, Any], sizes: list[int], kernel: list[int], strides: list[int], dilations: list[int]
) -> tuple[list[int], list[int]]:
    """(begins, ends) per spatial dimension from `pads` or `auto_pad`."""
    auto_pad = attrs.get("auto_pad", "NOTSET")
    rank = len(sizes)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
            total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
            small, large = total // 2, total - total // 2
            begins.append(small if auto_pad == "SAME_UPPER" else large)
            ends.append(large if auto_pad == "SAME_UPPER" else small)
        return begins, ends
    if auto_pad == "VALID":
        return [0] * rank, [0] * rank
    pads = [int(p) for p in attrs.get("pads", [0] * (2 * rank))]
    return pads[:rank], pads[rank:]


def _torch_pad(begins: list[int], ends: list[int]) -> list[int]:
    """ONNX (begins, ends) per dimension -> F.pad's order (last dimension first)."""
    out: list[int] = []
    for begin, end in zip(reversed(begins), reversed(ends), strict=True):
        out += [begin, end]
    return out


def _geometry(
    attrs: dict[str, Any], x: torch.Tensor, kernel: list[int]
) -> tuple[list[int], list[int], list[int], list[int]]:
    rank = x.ndim - 2
    strides = [int(s) for s in attrs.get("strides", [1] * rank)]
    dilations = [int(d) for d in attrs.get("dilations", [1] * rank)]
    begins, ends = _pads(attrs, list(x.shape[2:]), kernel, strides, dilations)
    return strides, dilations, begins, ends


@register("Conv")
def _conv(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x, weight = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    conv = _spatial(x, _CONV, "Conv")
    strides, dilations, begins, ends = _geometry(attrs, x, list(weight.shape[2:]))
    padding: Any = begins
    if begins != ends:  # torch pads symmetrically: pad the rest explicitly
        x = F.pad(x, _torch_pad(begins, ends))
        padding = 0
    return conv(x, weight, bias, strides, padding, dilations, int(attrs.get("group", 1)))


@register("ConvTranspose")
def _conv_transpose(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x, weight = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    conv = _spatial(x, _CONV_T, "ConvTranspose")
    rank = x.ndim - 2
    groups = int(attrs.get("group", 1))
    kernel = list(weight.shape[2:])
    strides = [int(s) for s in attrs.get("strides", [1] * rank)]
    dilations = [int(d) for d in attrs.get("dilations", [1] * rank)]
    extra = [int(p) for p in attrs.get("output_padding", [0] * rank)]
    full = [s * (n - 1) + (k - 1) * d + 1 for n, s, k, d in zip(x.shape[2:], strides, kernel, dilations, strict=True)]
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if attrs.get("output_shape") is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if attrs.get("output_shape") is not None:
            wanted = [int(v) for v in attrs["output_shape"]][-rank:]
        else:
            wanted = [n * s for n, s in zip(x.shape[2:], strides, strict=True)]
        totals = [f + e - w for f, e, w in zip(full, extra, wanted, strict=True)]
        if auto_pad == "SAME_UPPER":
            begins, ends = [t // 2 for t in totals], [t - t // 2 for t in totals]
        else:
            begins, ends = [t - t // 2 for t in totals], [t // 2 for t in totals]
    else:
        pads = [int(p) for p in attrs.get("pads", [0] * (2 * rank))]
        begins, ends = pads[:rank], pads[rank:]
    # The full (unpadded) transposed convolution, then output_padding zeros at the end and the
    # pads cropped off: any combination of pads, output_padding and output_shape.
    y = conv(x, weight, None, strides, 0, 0, groups, dilations)
    if any(extra):
        y = F.pad(y, _torch_pad([0] * rank, extra))
    index = [slice(None), slice(None)] + [
        slice(b, y.shape[2 + i] - e) for i, (b, e) in enumerate(zip(begins, ends, strict=True))
    ]
    y = y[tuple(index)]
    if bias is not None:
        y = y + bias.reshape(1, -1, *[1] * rank)
    return y


@register("BatchNormalization")
def _batch_norm(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x, scale, bias, mean, var = inputs[:5]
    if attrs.get("training_mode", 0):
        raise UnsupportedOperator("BatchNormalization with training_mode=1 is not supported")
    return F.batch_norm(x, mean, var, scale, bias, False, 0.0, float(attrs.get("epsilon", 1e-5)))


@register("InstanceNormalization")
def _instance_norm(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x, scale, bias = inputs[:3]
    return F.instance_norm(x, weight=scale, bias=bias, eps=float(attrs.get("epsilon", 1e-5)))


@register("Gemm")
def _gemm(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    a, b = same_device(inputs[0], inputs[1])
    c = inputs[2] if len(inputs) > 2 else None
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if attrs.get("transA", 0):
        a = a.t()
    if attrs.get("transB", 0) and alpha == 1.0 and beta == 1.0 and (c is None or c.ndim <= 1):
        return F.linear(a, b, None if c is None else c.reshape(-1).expand(b.shape[0]))
    if attrs.get("transB", 0):
        b = b.t()
    y = a @ b
    if alpha != 1.0:
        y = y * alpha
    if c is not None:
        y = y + (c * beta if beta != 1.0 else c).to(y.device)
    return y


@register("MatMul")
def _matmul(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    a, b = same_device(inputs[0], inputs[1])
    return torch.matmul(a, b)


@register("GlobalAveragePool")
def _global_average_pool(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    return x.mean(dim=tuple(range(2, x.ndim)), keepdim=True)


@register("GlobalMaxPool")
def _global_max_pool(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    return x.amax(dim=tuple(range(2, x.ndim)), keepdim=True)


def _symmetric_fits(begins: list[int], ends: list[int], kernel: list[int], dilations: list[int]) -> bool:
    """Whether torch's own (symmetric, at most half a window) padding can express the pads."""
    return begins == ends and all(2 * b <= (k - 1) * d + 1 for b, k, d in zip(begins, kernel, dilations, strict=True))


@register("MaxPool")
def _max_pool(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    if attrs.get("_outputs", 1) > 1:
        raise UnsupportedOperator("MaxPool with an Indices output is not supported")
    pool = _spatial(x, _MAX_POOL, "MaxPool")
    kernel = [int(k) for k in attrs["kernel_shape"]]
    strides, dilations, begins, ends = _geometry(attrs, x, kernel)
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    if _symmetric_fits(begins, ends, kernel, dilations):
        return pool(x, kernel, strides, begins, dilations, ceil_mode=ceil_mode)
    x = F.pad(x, _torch_pad(begins, ends), value=-math.inf)
    return pool(x, kernel, strides, 0, dilations, ceil_mode=ceil_mode)


@register("AveragePool")
def _average_pool(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    pool = _spatial(x, _AVG_POOL, "AveragePool")
    kernel = [int(k) for k in attrs["kernel_shape"]]
    strides, dilations, begins, ends = _geometry(attrs, x, kernel)
    if any(d != 1 for d in dilations):
        raise UnsupportedOperator("AveragePool with dilations is not supported")
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    include_pad = bool(attrs.get("count_include_pad", 0))
    if _symmetric_fits(begins, ends, kernel, dilations):
        return pool(x, kernel, strides, begins, ceil_mode, include_pad)
    padded = F.pad(x, _torch_pad(begins, ends))
    out = pool(padded, kernel, strides, 0, ceil_mode, True)
    if include_pad:
        return out
    # mean over the real elements only: the window sums over the window counts of real elements
    ones = F.pad(torch.ones_like(x[:1, :1]), _torch_pad(begins, ends))
    return out / pool(ones, kernel, strides, 0, ceil_mode, True)
