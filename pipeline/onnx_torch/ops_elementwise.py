"""Element-wise ops: arithmetic with broadcasting, activations, comparisons, Clip, Cast, Softmax."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from pipeline.onnx_torch.core import (
    RunContext,
    Value,
    register,
    same_device,
    torch_dtype,
)


def _binary(fn: Any) -> Any:
    def run(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
        a, b = same_device(inputs[0], inputs[1])
        return fn(a, b)

    return run


def _div(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dtype.is_floating_point or b.dtype.is_floating_point:
        return a / b
    return torch.div(a, b, rounding_mode="trunc")  # ONNX integer division truncates


def _pow(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.pow(a, b).to(a.dtype)  # the output has the base's type


register("Add")(_binary(torch.add))
register("Sub")(_binary(torch.sub))
register("Mul")(_binary(torch.mul))
register("Div")(_binary(_div))
register("Pow")(_binary(_pow))
register("Equal")(_binary(torch.eq))
register("Less")(_binary(torch.lt))
register("LessOrEqual")(_binary(torch.le))
register("Greater")(_binary(torch.gt))
register("GreaterOrEqual")(_binary(torch.ge))
register("And")(_binary(torch.logical_and))
register("Or")(_binary(torch.logical_or))


def _unary(fn: Any) -> Any:
    def run(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
        return fn(inputs[0])

    return run


register("Neg")(_unary(torch.neg))
register("Exp")(_unary(torch.exp))
register("Log")(_unary(torch.log))
register("Sqrt")(_unary(torch.sqrt))
register("Reciprocal")(_unary(torch.reciprocal))
register("Abs")(_unary(torch.abs))
register("Floor")(_unary(torch.floor))
register("Ceil")(_unary(torch.ceil))
register("Erf")(_unary(torch.erf))
register("Relu")(_unary(torch.relu))
register("Sigmoid")(_unary(torch.sigmoid))
register("Tanh")(_unary(torch.tanh))
register("Not")(_unary(torch.logical_not))
register("Identity")(_unary(lambda x: x))


def _variadic_op(fn: Any, mean: bool = False) -> Any:
    def run(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
        values = same_device(*[v for v in inputs if v is not None])
        out = values[0]
        for value in values[1:]:
            out = fn(out, value)
        return out / len(values) if mean else out

    return run


register("Max")(_variadic_op(torch.maximum))
register("Min")(_variadic_op(torch.minimum))
register("Sum")(_variadic_op(torch.add))
register("Mean")(_variadic_op(torch.add, mean=True))


@register("Where")
def _where(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    condition, a, b = same_device(inputs[0], inputs[1], inputs[2])
    return torch.where(condition, a, b)


@register("LeakyRelu")
def _leaky_relu(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    return F.leaky_relu(inputs[0], float(attrs.get("alpha", 0.01)))


@register("PRelu")
def _prelu(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x, slope = same_device(inputs[0], inputs[1])
    return torch.where(x >= 0, x, x * slope)


@register("HardSigmoid")
def _hard_sigmoid(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    alpha, beta = float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))
    return (inputs[0] * alpha + beta).clamp(0.0, 1.0)


@register("Elu")
def _elu(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    return F.elu(inputs[0], float(attrs.get("alpha", 1.0)))


@register("Clip")
def _clip(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    x = inputs[0]
    if ctx.opset < 11:  # bounds as attributes
        low, high = attrs.get("min"), attrs.get("max")
        return x.clamp(min=None if low is None else float(low), max=None if high is None else float(high))
    low = inputs[1] if len(inputs) > 1 else None
    high = inputs[2] if len(inputs) > 2 else None
    if low is not None:
        x = torch.maximum(x, low.to(x.device, x.dtype))
    if high is not None:
        x = torch.minimum(x, high.to(x.device, x.dtype))
    return x


@register("Cast")
def _cast(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
    # Every floating target is the compute dtype: a float16 file runs in float32 (and vice versa).
    return inputs[0].to(torch_dtype(ctx, int(attrs["to"])))


def _softmax_op(log: bool) -> Any:
    def run(ctx: RunContext, attrs: dict[str, Any], inputs: list[Value]) -> torch.Tensor:
        x = inputs[0]
        fn = torch.log_softmax if log else torch.softmax
        if ctx.opset >= 13:
            return fn(x, dim=int(attrs.get("axis", -1)))
        # before opset 13: the input is coerced to 2-D at `axis` and normalised over the second part
        axis = int(attrs.get("axis", 1))
        axis = axis + x.ndim if axis < 0 else axis
        outer = 1
        for size in x.shape[:axis]:
            outer *= size
        return fn(x.reshape(outer, -1), dim=1).reshape(x.shape)

    return run


register("Softmax")(_softmax_op(log=False))
register("LogSoftmax")(_softmax_op(log=True))
