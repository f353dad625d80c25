"""Pad, Resize and Upsample."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from pipeline.onnx_torch.core import (
    RunContext,
    UnsupportedOperator,
    Value,
    batch_rule,
    floats,
    ints,
    register,
)

_PAD_MODES = {"reflect": "reflect", "edge": "replicate", "wrap": "circular"}


@register("Pad")
def _pad(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    mode = attrs.get("mode", "constant")
    if ctx.opset < 11:
        pads, value = [int(p) for p in attrs.get("pads", attrs.get("paddings", []))], float(attrs.get("value", 0.0))
        axes = list(range(x.ndim))
    else:
        pads = ints(inputs[1])
        constant = inputs[2] if len(inputs) > 2 else None
        value = 0.0 if constant is None or constant.numel() == 0 else float(constant.reshape(-1)[0])
        axes = ints(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else list(range(x.ndim))
    axes = [a + x.ndim if a < 0 else a for a in axes]
    begins, ends = [0] * x.ndim, [0] * x.ndim
    for i, axis in enumerate(axes):
        begins[axis], ends[axis] = pads[i], pads[len(axes) + i]
    if mode == "constant":
        flat: list[int] = []
        for begin, end in zip(reversed(begins), reversed(ends), strict=True):
            flat += [begin, end]
        return F.pad(x, flat, value=value)
    if mode not in _PAD_MODES:
        raise UnsupportedOperator(f"Pad mode {mode!r} is not supported")
    # negative pads crop; then torch pads the (at most 3) trailing padded dimensions
    x = x[tuple(slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(zip(begins, ends, strict=True)))]
    begins, ends = [max(b, 0) for b in begins], [max(e, 0) for e in ends]
    padded = [i for i in range(x.ndim) if begins[i] or ends[i]]
    if not padded:
        return x
    first = padded[0]
    if x.ndim - first > 3:
        raise UnsupportedOperator(f"Pad mode {mode!r} over more than 3 trailing dimensions is not supported")
    lead = x.shape[:first]
    flat = []
    for axis in reversed(range(first, x.ndim)):
        flat += [begins[axis], ends[axis]]
    out = F.pad(x.reshape(-1, *x.shape[first:]), flat, mode=_PAD_MODES[mode])
    return out.reshape(*lead, *out.shape[1:])


def _source_coordinates(mode: str, out_size: int, in_size: int, scale: float, transform: str) -> torch.Tensor:
    """Where output index x samples the input, in input index units (float64), per ONNX Resize."""
    x = torch.arange(out_size, dtype=torch.float64)
    if transform == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if transform == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out_size > 1 else torch.full_like(x, -0.5)
    if transform == "align_corners":
        out_float = scale * in_size
        return x * 0.0 if out_float == 1 else x * (in_size - 1) / (out_float - 1)
    if transform == "asymmetric":
        return x / scale
    if transform == "half_pixel_symmetric":
        adjustment = out_size / (scale * in_size)
        offset = in_size / 2 * (1 - adjustment)
        return offset + (x + 0.5) / scale - 0.5
    raise UnsupportedOperator(f"Resize coordinate_transformation_mode {transform!r} is not supported")


def _nearest(coords: torch.Tensor, rounding: str, scale: float) -> torch.Tensor:
    if rounding == "round_prefer_floor":
        return torch.ceil(coords - 0.5)
    if rounding == "round_prefer_ceil":
        return torch.floor(coords + 0.5)
    if rounding == "floor":
        return torch.floor(coords)
    if rounding == "ceil":
        return torch.ceil(coords)
    if rounding == "simple":  # Upsample and Resize before opset 11 (as onnxruntime reads them)
        return torch.floor(coords) if scale >= 1 else torch.ceil(coords)
    raise UnsupportedOperator(f"Resize nearest_mode {rounding!r} is not supported")


def _axis_plan(
    ctx: RunContext, device: torch.device, dtype: torch.dtype, key: tuple[Any, ...]
) -> tuple[torch.Tensor, ...]:
    """Cached gather indices (and linear weights) for one axis, on the device."""
    cache_key = ("resize", device, dtype, *key)
    plan = ctx.cache.get(cache_key)
    if plan is None:
        mode, out_size, in_size, scale, transform, rounding = key
        coords = _source_coordinates(mode, out_size, in_size, scale, transform)
        if mode == "nearest":
            index = _nearest(coords, rounding, scale).clamp(0, in_size - 1).long()
            plan = (index.to(device),)
        else:
            low = torch.floor(coords)
            weight = (coords - low).to(dtype)
            low = low.long()
            plan = (
                low.clamp(0, in_size - 1).to(device),
                (low + 1).clamp(0, in_size - 1).to(device),
                weight.to(device),
            )
        ctx.cache[cache_key] = plan
    return plan


def resize(
    ctx: RunContext, x: torch.Tensor, scales: list[float], sizes: list[int], mode: str, transform: str, rounding: str
) -> torch.Tensor:
    """Separable resampling, one axis at a time (ONNX linear is separable; nearest trivially)."""
    if mode not in ("nearest", "linear"):
        raise UnsupportedOperator(f"Resize mode {mode!r} is not supported (nearest and linear are)")
    for axis in range(x.ndim):
        in_size, out_size, scale = x.shape[axis], sizes[axis], scales[axis]
        if out_size == in_size and scale == 1.0:
            continue
        plan = _axis_plan(ctx, x.device, x.dtype, (mode, out_size, in_size, scale, transform, rounding))
        if mode == "nearest":
            x = x.index_select(axis, plan[0])
        else:
            shape = [1] * x.ndim
            shape[axis] = out_size
            weight = plan[2].reshape(shape)
            low, high = x.index_select(axis, plan[0]), x.index_select(axis, plan[1])
            x = torch.lerp(low, high, weight)
    return x


@register("Resize")
def _resize(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    if attrs.get("antialias", 0):
        raise UnsupportedOperator("Resize with antialias=1 is not supported")
    if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise UnsupportedOperator("Resize keep_aspect_ratio_policy other than 'stretch' is not supported")
    if ctx.opset < 11:
        scale_input, size_input, default_transform = inputs[1], None, "asymmetric"
        attrs = {**attrs, "nearest_mode": "simple"}
    else:
        scale_input = inputs[2] if len(inputs) > 2 else None
        size_input = inputs[3] if len(inputs) > 3 else None
        default_transform = "half_pixel"
    axes = [a + x.ndim if a < 0 else a for a in attrs.get("axes", range(x.ndim))]
    scales, sizes = [1.0] * x.ndim, list(x.shape)
    if size_input is not None and size_input.numel() > 0:
        given = ints(size_input)
        if len(axes) == x.ndim:
            given = batch_rule(ctx, x.shape, given)
        for axis, size in zip(axes, given, strict=True):
            sizes[axis], scales[axis] = size, size / x.shape[axis]
    elif scale_input is not None and scale_input.numel() > 0:
        for axis, scale in zip(axes, floats(scale_input), strict=True):
            scales[axis], sizes[axis] = scale, math.floor(x.shape[axis] * scale)
    else:
        raise ValueError("Resize needs scales or sizes")
    transform = attrs.get("coordinate_transformation_mode", default_transform)
    rounding = attrs.get("nearest_mode", "round_prefer_floor")
    return resize(ctx, x, scales, sizes, attrs.get("mode", "nearest"), transform, rounding)


@register("Upsample")
def _upsample(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    scales = [float(s) for s in attrs["scales"]] if "scales" in attrs else floats(inputs[1])
    sizes = [math.floor(n * s) for n, s in zip(x.shape, scales, strict=True)]
    # the deprecated Upsample: asymmetric coordinates, nearest rounds down (scales are >= 1)
    return resize(ctx, x, scales, sizes, attrs.get("mode", "nearest"), "asymmetric", "simple")
