"""Small stand-in ONNX files with the interfaces of the models users bring (inswapper_128,
ArcFace w600k_r50): random weights, same input/output names and shapes. Tests build them in
a temporary folder; the real files cannot ship here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

node = helper.make_node


def _rand(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _save(path: Path, nodes, inputs, outputs, initializers, opset: int = 15) -> Path:
    # opset >= 14: the reference evaluator runs opset-9..13 BatchNormalization in training mode
    graph = helper.make_graph(
        nodes,
        "stand-in",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        initializer=[numpy_helper.from_array(a, n) for n, a in initializers],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def make_arcface(path: Path, seed: int = 1) -> Path:
    """Like w600k_r50 in interface: [1, 3, 112, 112] -> convs, BN, PRelu, pooling, Gemm, BN -> [1, 512]."""
    rng = np.random.default_rng(seed)
    nodes = [
        node("Conv", ["input.1", "w1", "b1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c1", "s1", "o1", "m1", "v1"], ["n1"]),
        node("PRelu", ["n1", "p1"], ["a1"]),
        node("Conv", ["a1", "w2"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c2", "s2", "o2", "m2", "v2"], ["n2"]),
        node("PRelu", ["n2", "p2"], ["a2"]),
        node("AveragePool", ["a2"], ["pool"], kernel_shape=[4, 4], strides=[4, 4]),
        node("Flatten", ["pool"], ["flat"]),
        node("Gemm", ["flat", "fc", "fcb"], ["emb"], transB=1),
        node("BatchNormalization", ["emb", "s3", "o3", "m3", "v3"], ["683"]),
    ]
    inits = [
        ("w1", _rand(rng, 8, 3, 3, 3, scale=0.3)),
        ("b1", _rand(rng, 8, scale=0.1)),
        ("s1", 1 + _rand(rng, 8, scale=0.1)),
        ("o1", _rand(rng, 8, scale=0.1)),
        ("m1", _rand(rng, 8, scale=0.1)),
        ("v1", np.abs(_rand(rng, 8)) + 0.5),
        ("p1", np.full((8, 1, 1), 0.25, np.float32)),
        ("w2", _rand(rng, 16, 8, 3, 3, scale=0.2)),
        ("s2", 1 + _rand(rng, 16, scale=0.1)),
        ("o2", _rand(rng, 16, scale=0.1)),
        ("m2", _rand(rng, 16, scale=0.1)),
        ("v2", np.abs(_rand(rng, 16)) + 0.5),
        ("p2", _rand(rng, 16, 1, 1, scale=0.2)),
        ("fc", _rand(rng, 512, 16 * 7 * 7, scale=0.05)),
        ("fcb", _rand(rng, 512, scale=0.1)),
        ("s3", 1 + _rand(rng, 512, scale=0.1)),
        ("o3", _rand(rng, 512, scale=0.1)),
        ("m3", _rand(rng, 512, scale=0.1)),
        ("v3", np.abs(_rand(rng, 512)) + 0.5),
    ]
    return _save(path, nodes, [("input.1", [1, 3, 112, 112])], [("683", [1, 512])], inits)


def make_inswapper(path: Path, seed: int = 2, names=("target", "source"), emap_shape=(512, 512)) -> Path:
    """Like inswapper_128 in interface: `target` [1, 3, 128, 128] and `source` [1, 512] -> convs,
    a style modulation from `source` (Gemm -> per-channel scale and shift, literal batch-1
    Reshapes), Sigmoid -> `output` [1, 3, 128, 128]; the 512 x 512 emap is the LAST initializer."""
    rng = np.random.default_rng(seed)
    target, source = names
    nodes = [
        node("Pad", [target, "pads"], ["padded"], mode="reflect"),
        node("Conv", ["padded", "w1", "b1"], ["c1"]),
        node("LeakyRelu", ["c1"], ["a1"], alpha=0.2),
        node("Conv", ["a1", "w2"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1]),
        node("InstanceNormalization", ["c2", "in_s", "in_b"], ["norm"]),
        node("Gemm", [source, "style_w", "style_b"], ["style"], transB=1),
        node("Split", ["style", "halves"], ["scale", "shift"], axis=1),
        node("Reshape", ["scale", "as_map"], ["scale4"]),
        node("Reshape", ["shift", "as_map"], ["shift4"]),
        node("Add", ["scale4", "one"], ["gain"]),
        node("Mul", ["norm", "gain"], ["styled"]),
        node("Add", ["styled", "shift4"], ["modulated"]),
        node("Relu", ["modulated"], ["a2"]),
        node("Resize", ["a2", "", "up"], ["big"], mode="nearest"),
        node("Conv", ["big", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
        node("Sigmoid", ["c3"], ["sig"]),
        node("Mul", ["sig", "stretch"], ["wide"]),
        node("Sub", ["wide", "offset"], ["output"]),
    ]
    inits = [
        ("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
        ("w1", _rand(rng, 8, 3, 3, 3, scale=0.4)),
        ("b1", _rand(rng, 8, scale=0.1)),
        ("w2", _rand(rng, 8, 8, 3, 3, scale=0.2)),
        ("in_s", np.ones(8, np.float32)),
        ("in_b", np.zeros(8, np.float32)),
        ("style_w", _rand(rng, 16, 512, scale=0.5)),
        ("style_b", _rand(rng, 16, scale=0.1)),
        ("halves", np.array([8, 8], np.int64)),
        ("as_map", np.array([1, 8, 1, 1], np.int64)),
        ("one", np.ones(1, np.float32)),
        ("up", np.array([1, 1, 2, 2], np.float32)),
        ("w3", _rand(rng, 3, 8, 3, 3, scale=0.5)),
        ("b3", _rand(rng, 3, scale=0.1)),
        ("stretch", np.array([1.4], np.float32)),
        ("offset", np.array([0.2], np.float32)),
        ("emap", _rand(rng, *emap_shape, scale=0.05)),  # last: the emap
    ]
    return _save(path, nodes, [(target, [1, 3, 128, 128]), (source, [1, 512])], [("output", [1, 3, 128, 128])], inits)
