"""Reading a .tflite flatbuffer into plain Python: tensors with their constant data, and operators.

Only the file is read (with the pure-Python `tflite` flatbuffer bindings); no TFLite runtime is
involved. Constant data keeps the TFLite layout (NHWC activations, OHWI conv kernels, 1HWO
depthwise kernels); converting it is the model loader's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np
import tflite


class TfliteFileError(ValueError):
    """The file is not a .tflite model this reader understands."""


_DTYPES: Mapping[int, np.dtype] = MappingProxyType(
    {
        tflite.TensorType.FLOAT32: np.dtype("<f4"),
        tflite.TensorType.FLOAT16: np.dtype("<f2"),
        tflite.TensorType.INT32: np.dtype("<i4"),
        tflite.TensorType.INT64: np.dtype("<i8"),
    }
)
_OPERATOR_NAMES: Mapping[int, str] = MappingProxyType(
    {code: name for name, code in vars(tflite.BuiltinOperator).items() if not name.startswith("_")}
)
_PADDINGS = {tflite.Padding.SAME: "SAME", tflite.Padding.VALID: "VALID"}
_ACTIVATIONS: Mapping[int, str] = MappingProxyType(
    {code: name for name, code in vars(tflite.ActivationFunctionType).items() if not name.startswith("_")}
)


@dataclass(frozen=True)
class TfliteTensor:
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    data: np.ndarray | None  # constant contents (read-only, TFLite layout); None for activations


@dataclass(frozen=True)
class TfliteOperator:
    kind: str  # builtin operator name: "CONV_2D", "DEPTHWISE_CONV_2D", "PRELU", ...
    inputs: tuple[int, ...]  # tensor indices; -1 marks an omitted optional input
    outputs: tuple[int, ...]
    options: Mapping[str, int | str]  # padding, strides, fused activation, ... (the kinds below)


@dataclass(frozen=True)
class TfliteGraph:
    tensors: tuple[TfliteTensor, ...]
    operators: tuple[TfliteOperator, ...]  # in execution order
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    description: str

    def tensor(self, name: str) -> TfliteTensor:
        for tensor in self.tensors:
            if tensor.name == name:
                return tensor
        raise TfliteFileError(f"the graph has no tensor named {name!r}")

    def constant(self, name: str) -> np.ndarray:
        data = self.tensor(name).data
        if data is None:
            raise TfliteFileError(f"tensor {name!r} is not a constant")
        return data

    def consumers(self, index: int) -> tuple[TfliteOperator, ...]:
        return tuple(op for op in self.operators if index in op.inputs)


def read_tflite(path: Path) -> TfliteGraph:
    """The first subgraph of a .tflite file."""
    raw = path.read_bytes()
    try:
        model = tflite.Model.GetRootAsModel(raw, 0)
        if model.SubgraphsLength() < 1:
            raise TfliteFileError(f"{path} holds no subgraph")
        graph = model.Subgraphs(0)
        tensors = tuple(_tensor(model, graph, i, raw) for i in range(graph.TensorsLength()))
        codes = [model.OperatorCodes(i) for i in range(model.OperatorCodesLength())]
        operators = tuple(_operator(graph.Operators(i), codes) for i in range(graph.OperatorsLength()))
        description = (model.Description() or b"").decode("utf-8", "replace")
        return TfliteGraph(
            tensors,
            operators,
            tuple(int(i) for i in graph.InputsAsNumpy()),
            tuple(int(i) for i in graph.OutputsAsNumpy()),
            description,
        )
    except TfliteFileError:
        raise
    except Exception as exc:  # a truncated or foreign file makes the flatbuffer accessors fail anywhere
        raise TfliteFileError(f"{path} is not a readable .tflite model: {exc}") from exc


def _tensor(model: tflite.Model, graph: tflite.SubGraph, index: int, raw: bytes) -> TfliteTensor:
    tensor = graph.Tensors(index)
    name = tensor.Name().decode("utf-8")
    shape = tuple(int(d) for d in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()
    type_code = tensor.Type()
    dtype = _DTYPES.get(type_code)
    buffer = model.Buffers(tensor.Buffer())
    payload: bytes | None = None
    if buffer is not None and buffer.DataLength() > 0:
        payload = buffer.DataAsNumpy().tobytes()
    elif buffer is not None and buffer.Offset() > 1:  # large models keep data after the flatbuffer
        payload = raw[buffer.Offset() : buffer.Offset() + buffer.Size()]
    data = None
    if payload is not None:
        if dtype is None:
            raise TfliteFileError(f"tensor {name!r} has a type this reader does not know ({type_code})")
        data = np.frombuffer(payload, dtype=dtype).reshape(shape)
    return TfliteTensor(index, name, shape, dtype if dtype is not None else np.dtype("V1"), data)


def _operator(op: tflite.Operator, codes: list[tflite.OperatorCode]) -> TfliteOperator:
    code = codes[op.OpcodeIndex()]
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())  # codes > 127 live in BuiltinCode only
    kind = _OPERATOR_NAMES.get(builtin, f"BUILTIN_{builtin}")
    if code.CustomCode():
        kind = "CUSTOM:" + code.CustomCode().decode("utf-8", "replace")
    return TfliteOperator(
        kind,
        tuple(int(i) for i in op.InputsAsNumpy()),
        tuple(int(i) for i in op.OutputsAsNumpy()),
        MappingProxyType(_options(kind, op)),
    )


def _options(kind: str, op: tflite.Operator) -> dict[str, int | str]:
    table = op.BuiltinOptions()
    if table is None:
        return {}
    if kind == "CONV_2D":
        conv = tflite.Conv2DOptions()
        conv.Init(table.Bytes, table.Pos)
        return {
            "padding": _PADDINGS[conv.Padding()],
            "stride_h": conv.StrideH(),
            "stride_w": conv.StrideW(),
            "dilation_h": conv.DilationHFactor(),
            "dilation_w": conv.DilationWFactor(),
            "activation": _ACTIVATIONS[conv.FusedActivationFunction()],
        }
    if kind == "DEPTHWISE_CONV_2D":
        depthwise = tflite.DepthwiseConv2DOptions()
        depthwise.Init(table.Bytes, table.Pos)
        return {
            "padding": _PADDINGS[depthwise.Padding()],
            "stride_h": depthwise.StrideH(),
            "stride_w": depthwise.StrideW(),
            "dilation_h": depthwise.DilationHFactor(),
            "dilation_w": depthwise.DilationWFactor(),
            "depth_multiplier": depthwise.DepthMultiplier(),
            "activation": _ACTIVATIONS[depthwise.FusedActivationFunction()],
        }
    if kind in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
        pool = tflite.Pool2DOptions()
        pool.Init(table.Bytes, table.Pos)
        return {
            "padding": _PADDINGS[pool.Padding()],
            "stride_h": pool.StrideH(),
            "stride_w": pool.StrideW(),
            "filter_h": pool.FilterHeight(),
            "filter_w": pool.FilterWidth(),
            "activation": _ACTIVATIONS[pool.FusedActivationFunction()],
        }
    if kind == "RESIZE_BILINEAR":
        resize = tflite.ResizeBilinearOptions()
        resize.Init(table.Bytes, table.Pos)
        return {"align_corners": int(resize.AlignCorners()), "half_pixel_centers": int(resize.HalfPixelCenters())}
    if kind == "CONCATENATION":
        concat = tflite.ConcatenationOptions()
        concat.Init(table.Bytes, table.Pos)
        return {"axis": concat.Axis(), "activation": _ACTIVATIONS[concat.FusedActivationFunction()]}
    if kind == "ADD":
        add = tflite.AddOptions()
        add.Init(table.Bytes, table.Pos)
        return {"activation": _ACTIVATIONS[add.FusedActivationFunction()]}
    return {}
