"""What the op implementations share: the run context, the op table, errors and small conversions.

Value placement (the rule every op follows): floating-point tensors live on the executor's device
in its compute dtype (float32, or float16 when asked); integer and boolean tensors that describe
shapes (the outputs of Shape, integer initializers and constants) stay on the CPU, so that shape
arithmetic (Gather, Concat, Slice, Reshape targets) never waits for the device. An op that mixes
the two moves the CPU operand to the other operand's device (`same_device`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from onnx import TensorProto

Value = torch.Tensor | None
OpResult = torch.Tensor | tuple[torch.Tensor, ...]
OpFunction = Callable[["RunContext", dict[str, Any], list[Value]], OpResult]

# op type -> implementation; filled by the ops_* modules when they are imported.
OPS: dict[str, OpFunction] = {}

# Inputs (by position) that ops read as Python numbers (shapes, axes, pads, scales). Constants used
# only in these positions are kept on the CPU so that reading them never syncs with the device.
HOST_INPUTS: dict[str, frozenset[int]] = {
    "Reshape": frozenset({1}),
    "Slice": frozenset({1, 2, 3, 4}),
    "Resize": frozenset({1, 2, 3}),
    "Upsample": frozenset({1}),
    "Pad": frozenset({1, 2, 3}),
    "Squeeze": frozenset({1}),
    "Unsqueeze": frozenset({1}),
    "Split": frozenset({1}),
    "Expand": frozenset({1}),
    "Tile": frozenset({1}),
    "ConstantOfShape": frozenset({0}),
    "ReduceMean": frozenset({1}),
    "ReduceSum": frozenset({1}),
    "ReduceL2": frozenset({1}),
    "ReduceMax": frozenset({1}),
    "ReduceMin": frozenset({1}),
}


class OnnxTorchError(Exception):
    """Base of the executor's errors."""


class UnsupportedOperator(OnnxTorchError):
    """The graph uses an operator (or an operator form) that this executor does not implement."""


class GraphRunError(OnnxTorchError):
    """A node failed while the graph ran; the message names the node and its op."""


@dataclass
class RunContext:
    """Per-run facts the ops need.

    batch: the leading dimension of the graph inputs in this run; `declared_batch` the one the file
    declares (None when symbolic). Ops that take literal shapes use them for the batch rule
    (see `batch_rule`). cache: kept across runs (interpolation indices and the like).
    """

    device: torch.device
    dtype: torch.dtype
    opset: int
    batch: int | None = None
    declared_batch: int | None = 1
    cache: dict[Any, Any] = field(default_factory=dict)


def register(*names: str) -> Callable[[OpFunction], OpFunction]:
    def wrap(fn: OpFunction) -> OpFunction:
        for name in names:
            OPS[name] = fn
        return fn

    return wrap


_ONNX_TO_TORCH: dict[int, torch.dtype] = {
    TensorProto.FLOAT: torch.float32,
    TensorProto.FLOAT16: torch.float16,
    TensorProto.DOUBLE: torch.float64,
    TensorProto.BFLOAT16: torch.bfloat16,
    TensorProto.UINT8: torch.uint8,
    TensorProto.INT8: torch.int8,
    TensorProto.INT16: torch.int16,
    TensorProto.UINT16: torch.int32,
    TensorProto.INT32: torch.int32,
    TensorProto.UINT32: torch.int64,
    TensorProto.INT64: torch.int64,
    TensorProto.UINT64: torch.int64,
    TensorProto.BOOL: torch.bool,
}


def torch_dtype(ctx: RunContext, onnx_type: int) -> torch.dtype:
    """The torch dtype for an ONNX element type; every floating type becomes the compute dtype."""
    if onnx_type not in _ONNX_TO_TORCH:
        raise UnsupportedOperator(f"ONNX element type {TensorProto.DataType.Name(onnx_type)} is not supported")
    dtype = _ONNX_TO_TORCH[onnx_type]
    return ctx.dtype if dtype.is_floating_point else dtype


def from_numpy(array: np.ndarray, device: torch.device, dtype: torch.dtype, on_host: bool) -> torch.Tensor:
    """A constant as a tensor placed by the module rule: floats on `device` in `dtype` (unless
    `on_host`: then float32 on the CPU), integers and booleans on the CPU."""
    array = np.asarray(array)
    if array.dtype.kind == "f":
        tensor = torch.from_numpy(_writable(np.ascontiguousarray(array, dtype=np.float32).reshape(array.shape)))
        return tensor if on_host else tensor.to(device=device, dtype=dtype)  # host numbers stay float32
    if array.dtype.kind == "b":
        return torch.from_numpy(_writable(np.ascontiguousarray(array).reshape(array.shape)))
    if array.dtype.kind in "iu":
        if array.dtype in (np.uint16, np.uint32, np.uint64):
            array = array.astype(np.int64)
        return torch.from_numpy(_writable(np.ascontiguousarray(array).reshape(array.shape)))
    raise UnsupportedOperator(f"constant of numpy dtype {array.dtype} is not supported")


def _writable(array: np.ndarray) -> np.ndarray:
    # np.ascontiguousarray turns 0-d arrays into 1-d ones: callers pass shapes through here
    return array if array.flags.writeable else array.copy()


def ints(value: torch.Tensor) -> list[int]:
    """A 0-d or 1-d tensor as Python ints (a host read: cheap for CPU tensors)."""
    return [int(v) for v in value.reshape(-1).tolist()]


def floats(value: torch.Tensor) -> list[float]:
    return [float(v) for v in value.reshape(-1).tolist()]


def same_device(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """Move CPU operands to the device of the first non-CPU operand (0-d CPU tensors included)."""
    target = next((t.device for t in tensors if t.device.type != "cpu"), None)
    if target is None:
        return list(tensors)
    return [t if t.device == target else t.to(target, non_blocking=True) for t in tensors]


def normalise_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def axes_from(attrs: dict[str, Any], inputs: Sequence[Value], position: int) -> list[int] | None:
    """Axes given as an attribute (older opsets) or as the input at `position` (newer ones)."""
    if len(inputs) > position and inputs[position] is not None:
        return ints(inputs[position])
    axes = attrs.get("axes")
    return None if axes is None else [int(a) for a in axes]


def batch_rule(ctx: RunContext, data_shape: Sequence[int], target: list[int]) -> list[int]:
    """The batch rule for literal shapes written into a file exported at batch 1.

    When this run's batch N differs from the declared batch 1, a literal target shape whose first
    entry is 1 (a Reshape shape, Resize `sizes`) while the data's leading dimension is N gets N as
    its first entry instead: [1, -1] on [N, 512] reshapes to [N, 512], not to [1, N * 512].
    Shapes computed in the graph (Shape -> Gather -> Concat) already carry N and are untouched.
    """
    if (
        target
        and target[0] == 1
        and ctx.batch is not None
        and ctx.batch != 1
        and ctx.declared_batch in (1, None)
        and len(data_shape) > 0
        and data_shape[0] == ctx.batch
    ):
        return [ctx.batch, *target[1:]]
    return target
