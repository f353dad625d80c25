"""An ONNX graph executed in torch, node by node, on any device.

The model is read once: initializers and Constant nodes become tensors (floats on the device in
the compute dtype, shape-like integers on the CPU; see core.py), every node is checked against the
op table (an unknown op fails here, naming the op and the node), and the nodes are put in
topological order with, for each, the values that die after it (freed during the run).

Batch: files exported at batch 1 run with any batch N. The leading dimension of the inputs is
treated as dynamic; literal shapes in the file that begin with 1 follow the real batch as
described in `core.batch_rule` (Reshape targets and Resize sizes). Callers should still check
that a batch of N equals N single runs for each model they load (the tests do for ours).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import onnx
import torch
from onnx import helper, numpy_helper

from pipeline.onnx_torch import ops_elementwise, ops_nn, ops_resize, ops_tensor  # noqa: F401  (fill OPS)
from pipeline.onnx_torch.core import (
    HOST_INPUTS,
    OPS,
    GraphRunError,
    OnnxTorchError,
    OpFunction,
    RunContext,
    UnsupportedOperator,
    from_numpy,
)


@dataclass(frozen=True)
class _Step:
    name: str
    op_type: str
    fn: OpFunction
    attrs: dict[str, Any]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    release: tuple[str, ...]


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output as declared: name, element type (ONNX enum), dims (None: symbolic
    or unknown; `shape` is None when the file declares no shape at all)."""

    name: str
    elem_type: int
    shape: tuple[int | None, ...] | None


def _spec(value: onnx.ValueInfoProto) -> TensorSpec:
    tensor_type = value.type.tensor_type
    shape = None
    if tensor_type.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim)
    return TensorSpec(value.name, tensor_type.elem_type, shape)


def _fits(spec: TensorSpec, value: torch.Tensor) -> bool:
    """Whether a fed tensor matches the declared shape, the leading (batch) dimension free."""
    if spec.shape is None:
        return True
    if value.ndim != len(spec.shape):
        return False
    return all(want is None or want == got for want, got in zip(spec.shape[1:], value.shape[1:], strict=True))


def _attributes(node: onnx.NodeProto) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for attribute in node.attribute:
        if attribute.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            raise UnsupportedOperator(
                f"node {node.name!r} ({node.op_type}) has a subgraph; subgraphs are not supported"
            )
        value = helper.get_attribute_value(attribute)
        if isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode() for v in value]
        elif isinstance(value, onnx.TensorProto):
            value = numpy_helper.to_array(value)
        attrs[attribute.name] = value
    attrs["_outputs"] = len(node.output)
    return attrs


def _constant_value(node: onnx.NodeProto, attrs: dict[str, Any]) -> Any:
    import numpy as np

    if "value" in attrs:
        return attrs["value"]
    for key, dtype in (
        ("value_float", np.float32),
        ("value_floats", np.float32),
        ("value_int", np.int64),
        ("value_ints", np.int64),
    ):
        if key in attrs:
            return np.asarray(attrs[key], dtype=dtype)
    raise UnsupportedOperator(f"Constant node {node.name!r} has no supported value attribute")


class OnnxTorchGraph:
    """Runs one ONNX model in torch. Not thread-safe (one caller at a time), no autograd."""

    def __init__(self, model: onnx.ModelProto, device: torch.device | str = "cpu", half: bool = False) -> None:
        self.device = torch.device(device)
        self.dtype = torch.float16 if half else torch.float32
        graph = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        initializer_names = [init.name for init in graph.initializer]
        self.initializer_names: tuple[str, ...] = tuple(initializer_names)
        self.inputs = tuple(_spec(v) for v in graph.input if v.name not in set(initializer_names))
        self.outputs = tuple(_spec(v) for v in graph.output)
        nodes = list(graph.node)

        unsupported = [
            n for n in nodes if n.domain not in ("", "ai.onnx") or (n.op_type not in OPS and n.op_type != "Constant")
        ]
        if unsupported:
            first = unsupported[0]
            kinds = sorted({f"{n.domain + '.' if n.domain else ''}{n.op_type}" for n in unsupported})
            raise UnsupportedOperator(
                f"op {first.op_type!r} (node {first.name!r}) is not supported by the torch executor; "
                f"unsupported op types in this graph: {', '.join(kinds)}"
            )

        # Which constant values are read only as numbers (shapes, axes): those stay on the CPU.
        host_only: dict[str, bool] = {}
        for node in nodes:
            for position, name in enumerate(node.input):
                on_host = position in HOST_INPUTS.get(node.op_type, frozenset())
                host_only[name] = host_only.get(name, True) and on_host

        def place(name: str, array: Any) -> torch.Tensor:
            return from_numpy(array, self.device, self.dtype, on_host=host_only.get(name, False))

        self._constants: dict[str, torch.Tensor] = {}
        for init in graph.initializer:
            self._constants[init.name] = place(init.name, numpy_helper.to_array(init))
        runnable = []
        for node in nodes:
            attrs = _attributes(node)
            if node.op_type == "Constant":
                self._constants[node.output[0]] = place(node.output[0], _constant_value(node, attrs))
            else:
                runnable.append((node, attrs))
        self._steps = self._schedule(runnable, {s.name for s in self.outputs})
        self._cache: dict[Any, Any] = {}
        declared = [s.shape[0] for s in self.inputs if s.shape]
        self.declared_batch = declared[0] if declared else None

    def _schedule(self, runnable: list[tuple[onnx.NodeProto, dict[str, Any]]], keep: set[str]) -> list[_Step]:
        available = set(self._constants) | {s.name for s in self.inputs} | {""}
        pending = list(runnable)
        ordered: list[tuple[onnx.NodeProto, dict[str, Any]]] = []
        while pending:  # Kahn's algorithm, keeping the file's order where it is already valid
            ready = [item for item in pending if all(name in available for name in item[0].input)]
            if not ready:
                node = pending[0][0]
                missing = [name for name in node.input if name not in available]
                raise OnnxTorchError(f"node {node.name!r} ({node.op_type}) reads values nothing produces: {missing}")
            for item in ready:
                ordered.append(item)
                available.update(item[0].output)
            ready_ids = {id(item) for item in ready}
            pending = [item for item in pending if id(item) not in ready_ids]
        last_use: dict[str, int] = {}
        for index, (node, _) in enumerate(ordered):
            for name in node.input:
                if name and name not in self._constants and name not in keep:
                    last_use[name] = index
        releases: dict[int, list[str]] = {}
        for name, index in last_use.items():
            releases.setdefault(index, []).append(name)
        return [
            _Step(
                node.name or f"{node.op_type}_{index}",
                node.op_type,
                OPS[node.op_type],
                attrs,
                tuple(node.input),
                tuple(node.output),
                tuple(releases.get(index, ())),
            )
            for index, (node, attrs) in enumerate(ordered)
        ]

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.outputs)

    def constant(self, name: str) -> torch.Tensor:
        """An initializer (or Constant node output) as converted for this executor."""
        return self._constants[name]

    @torch.inference_mode()
    def run(self, feeds: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Run the graph: `feeds` by input name (any batch in the leading dimension), on any device
        (moved to this executor's). Floating outputs come back as float32."""
        if set(feeds) != set(self.input_names):
            raise ValueError(f"inputs must be exactly {sorted(self.input_names)}, not {sorted(feeds)}")
        env = dict(self._constants)
        batch = None
        for spec in self.inputs:
            value = feeds[spec.name]
            if not _fits(spec, value):
                raise ValueError(f"input {spec.name!r} must be {list(spec.shape)} (any batch), not {list(value.shape)}")
            value = value.to(self.device)
            env[spec.name] = value.to(self.dtype) if value.dtype.is_floating_point else value
            if batch is None and value.ndim:
                batch = value.shape[0]
        ctx = RunContext(self.device, self.dtype, self.opset, batch, self.declared_batch, self._cache)
        for step in self._steps:
            args = [env[name] if name else None for name in step.inputs]
            try:
                result = step.fn(ctx, step.attrs, args)
            except OnnxTorchError:
                raise
            except Exception as error:
                raise GraphRunError(f"node {step.name!r} ({step.op_type}) failed: {error}") from error
            results = (result,) if isinstance(result, torch.Tensor) else result
            for name, tensor in zip(step.outputs, results, strict=False):
                if name:
                    env[name] = tensor
            for name in step.release:
                env.pop(name, None)
        out = {}
        for name in self.output_names:
            tensor = env[name]
            tensor = tensor.to(self.device)  # shape arithmetic may have stayed on the host
            out[name] = tensor.float() if tensor.dtype.is_floating_point else tensor
        return out

    __call__ = run


def load_graph(path: str, device: torch.device | str = "cpu", half: bool = False) -> OnnxTorchGraph:
    """`onnx.load` the file and build its executor."""
    return OnnxTorchGraph(onnx.load(path), device, half)
