"""Shape and layout ops: Reshape, Transpose, Concat, Split, Slice, Gather, Shape and friends, and
the reductions."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from pipeline.onnx_torch.core import (
    RunContext,
    Value,
    axes_from,
    batch_rule,
    from_numpy,
    ints,
    normalise_axis,
    register,
    same_device,
)


@register("Shape")
def _shape(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    dims = list(inputs[0].shape)
    start, end = attrs.get("start", 0), attrs.get("end")
    return torch.tensor(dims[start:end], dtype=torch.int64)  # on the CPU: shape arithmetic stays there


@register("Size")
def _size(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    return torch.tensor(inputs[0].numel(), dtype=torch.int64)


@register("Flatten")
def _flatten(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    axis = int(attrs.get("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


@register("Reshape")
def _reshape(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    shape = batch_rule(ctx, x.shape, ints(inputs[1]))
    if not attrs.get("allowzero", 0):  # 0 copies the input's dimension
        shape = [x.shape[i] if size == 0 else size for i, size in enumerate(shape)]
    return x.reshape(shape)


@register("Transpose")
def _transpose(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    perm = attrs.get("perm")
    return x.permute(*(reversed(range(x.ndim)) if perm is None else perm))


@register("Concat")
def _concat(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    values = same_device(*[v for v in inputs if v is not None])
    return torch.cat(values, dim=int(attrs["axis"]))


@register("Split")
def _split(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> tuple[torch.Tensor, ...]:
    x = inputs[0]
    axis = normalise_axis(int(attrs.get("axis", 0)), x.ndim)
    if len(inputs) > 1 and inputs[1] is not None:
        sizes = ints(inputs[1])
    elif attrs.get("split") is not None:
        sizes = [int(s) for s in attrs["split"]]
    else:
        parts = int(attrs.get("num_outputs", attrs["_outputs"]))
        chunk = -(-x.shape[axis] // parts)
        sizes = [min(chunk, x.shape[axis] - i * chunk) for i in range(parts)]
    return tuple(torch.split(x, sizes, dim=axis))


@register("Slice")
def _slice(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    if ctx.opset < 10:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes, steps = attrs.get("axes"), None
    else:
        starts, ends = ints(inputs[1]), ints(inputs[2])
        axes = ints(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else None
        steps = ints(inputs[4]) if len(inputs) > 4 and inputs[4] is not None else None
    axes = list(range(len(starts))) if axes is None else [normalise_axis(a, x.ndim) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    index: list[Any] = [slice(None)] * x.ndim
    flips = []
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        size = x.shape[axis]
        start = start + size if start < 0 else start
        end = end + size if end < 0 else end
        if step > 0:
            index[axis] = slice(min(max(start, 0), size), min(max(end, 0), size), step)
        elif step < 0:
            start, end = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
            flips.append((axis, range(start, end, step)))
        else:
            raise ValueError("Slice step must not be 0")
    out = x[tuple(index)]
    for axis, picked in flips:  # torch slicing has no negative steps: gather the indices instead
        out = out.index_select(axis, torch.tensor(list(picked), dtype=torch.long, device=out.device))
    return out


@register("Squeeze")
def _squeeze(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    axes = axes_from(attrs, inputs, 1)
    if axes is None:
        return x.reshape([size for size in x.shape if size != 1])
    drop = {normalise_axis(a, x.ndim) for a in axes}
    return x.reshape([size for i, size in enumerate(x.shape) if i not in drop])


@register("Unsqueeze")
def _unsqueeze(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    axes = axes_from(attrs, inputs, 1) or []
    rank = x.ndim + len(axes)
    inserted = sorted(normalise_axis(a, rank) for a in axes)
    shape = list(x.shape)
    for axis in inserted:
        shape.insert(axis, 1)
    return x.reshape(shape)


@register("Gather")
def _gather(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x, indices = inputs[0], inputs[1]
    axis = normalise_axis(int(attrs.get("axis", 0)), x.ndim)
    indices = indices.to(x.device, torch.long)
    indices = torch.where(indices < 0, indices + x.shape[axis], indices)
    out = x.index_select(axis, indices.reshape(-1))
    return out.reshape((*x.shape[:axis], *indices.shape, *x.shape[axis + 1 :]))


@register("ConstantOfShape")
def _constant_of_shape(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    value = attrs.get("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    fill = from_numpy(value, ctx.device, ctx.dtype, on_host=False)
    return fill.reshape(()).expand(ints(inputs[0])).clone()


@register("Expand")
def _expand(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    return x.expand(torch.broadcast_shapes(x.shape, tuple(ints(inputs[1]))))


@register("Tile")
def _tile(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    return inputs[0].repeat(ints(inputs[1]))


@register("Dropout")
def _dropout(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> tuple[torch.Tensor, ...]:
    x = inputs[0]  # inference: the identity, and an all-true mask
    return x, torch.ones(x.shape, dtype=torch.bool, device=x.device)


def _reduction(kind: str) -> Any:
    def run(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
        x = inputs[0]
        keep = bool(attrs.get("keepdims", 1))
        axes = axes_from(attrs, inputs, 1)
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.ndim))
        dims = [normalise_axis(a, x.ndim) for a in axes]
        if kind == "mean":
            return x.mean(dim=dims, keepdim=keep)
        if kind == "sum":
            return x.sum(dim=dims, keepdim=keep)
        if kind == "l2":
            return x.square().sum(dim=dims, keepdim=keep).sqrt()
        if kind == "max":
            return x.amax(dim=dims, keepdim=keep)
        return x.amin(dim=dims, keepdim=keep)

    return run


register("ReduceMean")(_reduction("mean"))
register("ReduceSum")(_reduction("sum"))
register("ReduceL2")(_reduction("l2"))
register("ReduceMax")(_reduction("max"))
register("ReduceMin")(_reduction("min"))
