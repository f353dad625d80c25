"""The torch ONNX executor against onnx's ReferenceEvaluator: one small random graph per op form,
the batch rule, unsupported ops, and CUDA against the CPU."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from pipeline.onnx_torch import (
    OnnxTorchGraph,
    UnsupportedOperator,
    batch_rule,
    load_graph,
)

RNG = np.random.default_rng(7)
node = helper.make_node


def rand(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def i64(*values: int) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def f32(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def make_model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, np.ndarray],
    initializers: dict[str, np.ndarray] | None = None,
    outputs: tuple[str, ...] = ("y",),
    opset: int = 17,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "case",
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for name, a in inputs.items()
        ],
        [helper.make_empty_tensor_value_info(name) for name in outputs],
        initializer=[numpy_helper.from_array(a, name) for name, a in (initializers or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


@dataclass
class Case:
    id: str
    nodes: list[onnx.NodeProto]
    inputs: dict[str, np.ndarray]
    initializers: dict[str, np.ndarray] = field(default_factory=dict)
    opset: int = 17
    outputs: tuple[str, ...] = ("y",)

    def model(self) -> onnx.ModelProto:
        return make_model(self.nodes, self.inputs, self.initializers, self.outputs, self.opset)


def unary(op: str, low: float = -2.0, high: float = 2.0, **attrs: object) -> Case:
    return Case(op, [node(op, ["x"], ["y"], **attrs)], {"x": rand(2, 3, 4, 5, low=low, high=high)})


def binary(op: str, low: float = -2.0, high: float = 2.0) -> Case:
    return Case(
        op,
        [node(op, ["a", "b"], ["y"])],
        {"a": rand(2, 3, 4, 5, low=low, high=high), "b": rand(3, 1, 5, low=low, high=high)},
    )


CASES = [
    # convolutions
    Case(
        "Conv", [node("Conv", ["x", "w", "b"], ["y"])], {"x": rand(2, 3, 9, 9)}, {"w": rand(4, 3, 3, 3), "b": rand(4)}
    ),
    Case(
        "Conv-groups-strides-pads-dilations",
        [node("Conv", ["x", "w"], ["y"], group=2, strides=[2, 1], pads=[1, 2, 1, 2], dilations=[1, 2])],
        {"x": rand(1, 4, 11, 10)},
        {"w": rand(6, 2, 3, 3)},
    ),
    Case(
        "Conv-asymmetric-pads",
        [node("Conv", ["x", "w"], ["y"], pads=[0, 1, 2, 0])],
        {"x": rand(1, 2, 7, 7)},
        {"w": rand(3, 2, 3, 3)},
    ),
    Case(
        "Conv-same-upper",
        [node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])],
        {"x": rand(1, 2, 8, 7)},
        {"w": rand(3, 2, 4, 4)},
    ),
    Case(
        "Conv-depthwise",
        [node("Conv", ["x", "w"], ["y"], group=4, pads=[1, 1, 1, 1])],
        {"x": rand(2, 4, 6, 6)},
        {"w": rand(4, 1, 3, 3)},
    ),
    Case(
        "Conv-1d",
        [node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1])],
        {"x": rand(2, 3, 10)},
        {"w": rand(5, 3, 3), "b": rand(5)},
    ),
    Case(
        "ConvTranspose",
        [node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])],
        {"x": rand(2, 3, 5, 5)},
        {"w": rand(3, 4, 4, 4), "b": rand(4)},
    ),
    Case(
        "ConvTranspose-output-padding-asymmetric-pads",
        [node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 3], output_padding=[1, 2], pads=[0, 1, 1, 0])],
        {"x": rand(1, 4, 4, 3)},
        {"w": rand(4, 2, 3, 3)},
    ),
    # normalisation
    Case(
        "BatchNormalization",
        [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
        {"x": rand(2, 3, 4, 4)},
        {"s": rand(3), "b": rand(3), "m": rand(3), "v": rand(3, low=0.5, high=2.0)},
    ),
    Case(
        "BatchNormalization-2d",
        [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
        {"x": rand(4, 6)},
        {"s": rand(6), "b": rand(6), "m": rand(6), "v": rand(6, low=0.5, high=2.0)},
    ),
    Case(
        "InstanceNormalization",
        [node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)],
        {"x": rand(2, 3, 5, 4)},
        {"s": rand(3), "b": rand(3)},
    ),
    # arithmetic and activations
    binary("Add"),
    binary("Sub"),
    binary("Mul"),
    Case("Div", [node("Div", ["a", "b"], ["y"])], {"a": rand(2, 3, 4), "b": rand(4, low=0.5, high=2.0)}),
    Case(
        "Pow", [node("Pow", ["a", "b"], ["y"])], {"a": rand(2, 3, 4, low=0.1, high=2.0), "b": rand(1, low=-2, high=2)}
    ),
    Case("Pow-square", [node("Pow", ["a", "e"], ["y"])], {"a": rand(2, 3, 4)}, {"e": f32(2.0)}),
    unary("Sqrt", 0.0, 4.0),
    unary("Neg"),
    unary("Exp"),
    unary("Reciprocal", 0.5, 2.0),
    unary("Relu"),
    unary("LeakyRelu", alpha=0.2),
    Case("PRelu", [node("PRelu", ["x", "s"], ["y"])], {"x": rand(2, 3, 4, 4)}, {"s": rand(3, 1, 1)}),
    unary("Sigmoid", -5.0, 5.0),
    unary("Tanh"),
    unary("Erf"),
    unary("Abs"),
    Case("Max", [node("Max", ["a", "b", "c"], ["y"])], {"a": rand(2, 3), "b": rand(3), "c": rand(2, 1)}),
    Case("Min", [node("Min", ["a", "b"], ["y"])], {"a": rand(2, 3), "b": rand(3)}),
    Case(
        "Where",
        [node("Greater", ["a", "b"], ["c"]), node("Where", ["c", "a", "b"], ["y"])],
        {"a": rand(2, 3), "b": rand(3)},
    ),
    Case(
        "Clip",
        [node("Clip", ["x", "lo", "hi"], ["y"])],
        {"x": rand(2, 3, 4)},
        {"lo": f32(-0.3).reshape(()), "hi": f32(0.5).reshape(())},
    ),
    Case("Clip-min-only", [node("Clip", ["x", "lo"], ["y"])], {"x": rand(2, 3, 4)}, {"lo": f32(0.1).reshape(())}),
    Case("Clip-opset6", [node("Clip", ["x"], ["y"], min=-0.2, max=0.4)], {"x": rand(2, 3, 4)}, opset=6),
    Case("Cast-to-int", [node("Cast", ["x"], ["y"], to=TensorProto.INT64)], {"x": rand(2, 3, low=-5, high=5)}),
    Case(
        "Cast-to-float",
        [node("Shape", ["x"], ["s"]), node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)],
        {"x": rand(2, 3)},
    ),
    Case("Softmax", [node("Softmax", ["x"], ["y"], axis=1)], {"x": rand(2, 3, 4, 5)}),
    Case("Softmax-opset11", [node("Softmax", ["x"], ["y"], axis=1)], {"x": rand(2, 7)}, opset=11),
    # matrix products
    Case(
        "Gemm-transB",
        [node("Gemm", ["a", "w", "c"], ["y"], transB=1)],
        {"a": rand(3, 6)},
        {"w": rand(5, 6), "c": rand(5)},
    ),
    Case(
        "Gemm-transA-alpha-beta",
        [node("Gemm", ["a", "w", "c"], ["y"], transA=1, alpha=0.5, beta=2.0)],
        {"a": rand(6, 3)},
        {"w": rand(6, 5), "c": rand(1, 5)},
    ),
    Case("MatMul", [node("MatMul", ["a", "b"], ["y"])], {"a": rand(2, 3, 4)}, {"b": rand(4, 5)}),
    # layout and shape
    Case("Flatten", [node("Flatten", ["x"], ["y"], axis=2)], {"x": rand(2, 3, 4, 5)}),
    Case("Reshape", [node("Reshape", ["x", "s"], ["y"])], {"x": rand(2, 3, 4)}, {"s": i64(0, -1, 2)}),
    Case("Transpose", [node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])], {"x": rand(2, 3, 4, 5)}),
    Case("Concat", [node("Concat", ["a", "b"], ["y"], axis=1)], {"a": rand(2, 3, 4), "b": rand(2, 2, 4)}),
    Case(
        "Split-input",
        [node("Split", ["x", "s"], ["y", "z"], axis=1)],
        {"x": rand(2, 5, 3)},
        {"s": i64(2, 3)},
        outputs=("y", "z"),
    ),
    Case(
        "Split-attr-opset11",
        [node("Split", ["x"], ["y", "z"], axis=-1, split=[1, 2])],
        {"x": rand(2, 3)},
        opset=11,
        outputs=("y", "z"),
    ),
    Case(
        "Split-num-outputs",
        [node("Split", ["x"], ["y", "z"], axis=1, num_outputs=2)],
        {"x": rand(2, 5)},
        opset=18,
        outputs=("y", "z"),
    ),
    Case(
        "Slice",
        [node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
        {"x": rand(4, 6, 5)},
        {"st": i64(1, -1), "en": i64(100, 0), "ax": i64(1, 2), "sp": i64(2, -2)},
    ),
    Case(
        "Slice-opset9",
        [node("Slice", ["x"], ["y"], starts=[0, 1], ends=[2, -1], axes=[0, 2])],
        {"x": rand(3, 4, 5)},
        opset=9,
    ),
    Case("Squeeze", [node("Squeeze", ["x", "a"], ["y"])], {"x": rand(2, 1, 3, 1)}, {"a": i64(1, -1)}),
    Case("Squeeze-opset11", [node("Squeeze", ["x"], ["y"], axes=[1])], {"x": rand(2, 1, 3)}, opset=11),
    Case("Unsqueeze", [node("Unsqueeze", ["x", "a"], ["y"])], {"x": rand(2, 3)}, {"a": i64(-1, 1)}),
    Case("Unsqueeze-opset11", [node("Unsqueeze", ["x"], ["y"], axes=[0, 3])], {"x": rand(2, 3)}, opset=11),
    Case(
        "Gather", [node("Gather", ["x", "i"], ["y"], axis=1)], {"x": rand(2, 5, 3)}, {"i": i64(4, -1, 0).reshape(3, 1)}
    ),
    Case(
        "Gather-scalar",
        [node("Gather", ["x", "i"], ["y"], axis=0)],
        {"x": rand(4, 3)},
        {"i": np.array(2, dtype=np.int64)},
    ),
    Case("Shape", [node("Shape", ["x"], ["y"])], {"x": rand(2, 3, 4)}),
    Case("Shape-start", [node("Shape", ["x"], ["y"], start=1, end=-1)], {"x": rand(2, 3, 4, 5)}, opset=15),
    Case(
        "Constant",
        [node("Constant", [], ["c"], value=numpy_helper.from_array(rand(3), "c")), node("Add", ["x", "c"], ["y"])],
        {"x": rand(2, 3)},
    ),
    Case(
        "ConstantOfShape",
        [node("ConstantOfShape", ["s"], ["y"], value=numpy_helper.from_array(f32(1.5), "v"))],
        {"s": i64(2, 3)},
    ),
    Case("Identity", [node("Identity", ["x"], ["y"])], {"x": rand(2, 3)}),
    Case(
        "shape-arithmetic-reshape",
        [
            node("Shape", ["x"], ["s"]),
            node("Gather", ["s", "zero"], ["n"], axis=0),
            node("Unsqueeze", ["n", "axes"], ["n1"]),
            node("Concat", ["n1", "minus1"], ["target"], axis=0),
            node("Reshape", ["x", "target"], ["y"]),
        ],
        {"x": rand(3, 2, 4)},
        {"zero": np.array(0, dtype=np.int64), "axes": i64(0), "minus1": i64(-1)},
    ),
    Case("Expand", [node("Expand", ["x", "s"], ["y"])], {"x": rand(3, 1)}, {"s": i64(2, 1, 4)}),
    Case("Tile", [node("Tile", ["x", "r"], ["y"])], {"x": rand(2, 3)}, {"r": i64(2, 1)}),
    # padding and resampling
    Case(
        "Pad-constant",
        [node("Pad", ["x", "p", "v"], ["y"], mode="constant")],
        {"x": rand(1, 2, 3, 4)},
        {"p": i64(0, 0, 1, 2, 0, 0, 2, 0), "v": f32(0.7).reshape(())},
    ),
    Case(
        "Pad-reflect",
        [node("Pad", ["x", "p"], ["y"], mode="reflect")],
        {"x": rand(2, 2, 5, 6)},
        {"p": i64(0, 0, 2, 1, 0, 0, 1, 3)},
    ),
    Case(
        "Pad-edge",
        [node("Pad", ["x", "p"], ["y"], mode="edge")],
        {"x": rand(2, 2, 4, 4)},
        {"p": i64(0, 0, 1, 3, 0, 0, 2, 0)},
    ),
    Case(
        "Pad-opset2",
        [node("Pad", ["x"], ["y"], mode="reflect", pads=[0, 0, 1, 1, 0, 0, 1, 1])],
        {"x": rand(1, 2, 4, 4)},
        opset=2,
    ),
    Case(
        "Resize-nearest-scales",
        [
            node(
                "Resize",
                ["x", "", "sc"],
                ["y"],
                mode="nearest",
                coordinate_transformation_mode="asymmetric",
                nearest_mode="floor",
            )
        ],
        {"x": rand(1, 2, 4, 5)},
        {"sc": f32(1, 1, 2, 3)},
    ),
    Case(
        "Resize-nearest-half-pixel-down",
        [node("Resize", ["x", "", "sc"], ["y"], mode="nearest")],
        {"x": rand(1, 2, 8, 8)},
        {"sc": f32(1, 1, 0.5, 0.5)},
    ),
    Case(
        "Resize-linear-half-pixel",
        [node("Resize", ["x", "", "sc"], ["y"], mode="linear")],
        {"x": rand(2, 2, 4, 5)},
        {"sc": f32(1, 1, 2, 1.5)},
    ),
    Case(
        "Resize-linear-align-corners-sizes",
        [node("Resize", ["x", "", "", "sz"], ["y"], mode="linear", coordinate_transformation_mode="align_corners")],
        {"x": rand(1, 3, 5, 4)},
        {"sz": i64(1, 3, 9, 7)},
    ),
    Case(
        "Resize-linear-pytorch-half-pixel-down",
        [
            node(
                "Resize", ["x", "", "", "sz"], ["y"], mode="linear", coordinate_transformation_mode="pytorch_half_pixel"
            )
        ],
        {"x": rand(1, 1, 9, 8)},
        {"sz": i64(1, 1, 4, 3)},
    ),
    Case(
        "Upsample-opset9",
        [node("Upsample", ["x", "sc"], ["y"], mode="nearest")],
        {"x": rand(1, 2, 3, 4)},
        {"sc": f32(1, 1, 2, 2)},
        opset=9,
    ),
    # reductions and pooling
    Case("ReduceMean", [node("ReduceMean", ["x"], ["y"], axes=[2, 3])], {"x": rand(2, 3, 4, 5)}, opset=13),
    Case(
        "ReduceMean-axes-input",
        [node("ReduceMean", ["x", "a"], ["y"], keepdims=0)],
        {"x": rand(2, 3, 4)},
        {"a": i64(-1)},
        opset=18,
    ),
    Case("ReduceSum", [node("ReduceSum", ["x", "a"], ["y"])], {"x": rand(2, 3, 4)}, {"a": i64(1)}, opset=13),
    Case("ReduceSum-all", [node("ReduceSum", ["x"], ["y"], keepdims=0)], {"x": rand(2, 3, 4)}, opset=13),
    Case("ReduceL2", [node("ReduceL2", ["x"], ["y"], axes=[1], keepdims=0)], {"x": rand(2, 5, 3)}, opset=13),
    Case("GlobalAveragePool", [node("GlobalAveragePool", ["x"], ["y"])], {"x": rand(2, 3, 5, 4)}),
    Case(
        "AveragePool",
        [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
        {"x": rand(1, 2, 7, 7)},
    ),
    Case(
        "AveragePool-count-include-pad",
        [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)],
        {"x": rand(1, 2, 5, 5)},
    ),
    Case(
        "AveragePool-asymmetric",
        [node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], pads=[0, 0, 1, 1])],
        {"x": rand(1, 2, 5, 5)},
    ),
    Case(
        "MaxPool",
        [node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
        {"x": rand(1, 2, 8, 8)},
    ),
    Case(
        "MaxPool-ceil",
        [node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)],
        {"x": rand(1, 2, 7, 7)},
    ),
    Case(
        "MaxPool-asymmetric",
        [node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1, 0, 0, 1])],
        {"x": rand(1, 1, 5, 5)},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op_matches_reference(case: Case) -> None:
    model = case.model()
    expected = ReferenceEvaluator(model).run(None, case.inputs)
    graph = OnnxTorchGraph(model)
    got = graph.run({name: torch.from_numpy(a) for name, a in case.inputs.items()})
    for name, want in zip(case.outputs, expected, strict=True):
        mine = got[name].numpy()
        assert mine.shape == np.asarray(want).shape, (name, mine.shape, np.asarray(want).shape)
        if np.asarray(want).dtype.kind == "f":
            np.testing.assert_allclose(mine, want, rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_array_equal(mine, want)


def reference_output(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return np.asarray(ReferenceEvaluator(model).run(None, feeds)[0])


def ours(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return OnnxTorchGraph(model).run({k: torch.from_numpy(v) for k, v in feeds.items()})["y"].numpy()


def test_grouped_conv_transpose_equals_its_groups() -> None:
    # the reference evaluator has no grouped ConvTranspose: compare with one reference run per group
    x, w = rand(1, 4, 4, 3), rand(4, 3, 3, 3)
    attrs = {"strides": [2, 3], "output_padding": [1, 0], "pads": [1, 0, 0, 1]}
    grouped = make_model([node("ConvTranspose", ["x", "w"], ["y"], group=2, **attrs)], {"x": x}, {"w": w})
    parts = [
        reference_output(
            make_model(
                [node("ConvTranspose", ["x", "w"], ["y"], **attrs)],
                {"x": x[:, g * 2 : g * 2 + 2]},
                {"w": w[g * 2 : g * 2 + 2]},
            ),
            {"x": x[:, g * 2 : g * 2 + 2]},
        )
        for g in range(2)
    ]
    np.testing.assert_allclose(ours(grouped, {"x": x}), np.concatenate(parts, axis=1), rtol=1e-4, atol=1e-5)


def test_conv_transpose_output_shape_equals_the_pads_it_implies() -> None:
    # stride 2, kernel 3, 5 -> full 11; output_shape 10 leaves 1 to crop, at the start (not SAME_UPPER)
    x, w = rand(1, 2, 5, 5), rand(2, 3, 3, 3)
    shaped = make_model(
        [node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_shape=[10, 10])], {"x": x}, {"w": w}
    )
    padded = make_model(
        [node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 0, 0])], {"x": x}, {"w": w}
    )
    got = ours(shaped, {"x": x})
    assert got.shape == (1, 3, 10, 10)
    np.testing.assert_allclose(got, reference_output(padded, {"x": x}), rtol=1e-4, atol=1e-5)


def test_softmax_before_opset13_normalises_the_coerced_2d_input() -> None:
    x = rand(2, 3, 4)
    model = make_model([node("Softmax", ["x"], ["y"], axis=1)], {"x": x}, opset=11)
    flat = x.reshape(2, 12)
    expected = (np.exp(flat) / np.exp(flat).sum(axis=1, keepdims=True)).reshape(x.shape)
    np.testing.assert_allclose(ours(model, {"x": x}), expected, rtol=1e-5, atol=1e-6)


def test_resize_opset10_is_upsample() -> None:
    x = rand(1, 2, 3, 4)
    resize10 = make_model(
        [node("Resize", ["x", "sc"], ["y"], mode="nearest")], {"x": x}, {"sc": f32(1, 1, 2, 3)}, opset=10
    )
    upsample9 = make_model(
        [node("Upsample", ["x", "sc"], ["y"], mode="nearest")], {"x": x}, {"sc": f32(1, 1, 2, 3)}, opset=9
    )
    np.testing.assert_array_equal(ours(resize10, {"x": x}), reference_output(upsample9, {"x": x}))


def test_every_required_op_is_covered() -> None:
    required = [
        "Conv",
        "ConvTranspose",
        "BatchNormalization",
        "InstanceNormalization",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "Sqrt",
        "Neg",
        "Exp",
        "Reciprocal",
        "Relu",
        "LeakyRelu",
        "PRelu",
        "Sigmoid",
        "Tanh",
        "Gemm",
        "MatMul",
        "Flatten",
        "Reshape",
        "Transpose",
        "Concat",
        "Split",
        "Slice",
        "Squeeze",
        "Unsqueeze",
        "Gather",
        "Shape",
        "Constant",
        "ConstantOfShape",
        "Identity",
        "Pad",
        "Resize",
        "Upsample",
        "ReduceMean",
        "ReduceSum",
        "ReduceL2",
        "GlobalAveragePool",
        "AveragePool",
        "MaxPool",
        "Clip",
        "Cast",
        "Erf",
        "Softmax",
    ]
    tested = {n.op_type for case in CASES for n in case.nodes}
    assert set(required) <= tested, set(required) - tested


def batch1_model() -> onnx.ModelProto:
    """Like a file exported at batch 1: literal 1s in Reshape targets and Resize sizes."""
    nodes = [
        node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        node("Relu", ["c"], ["r"]),
        node("Resize", ["r", "", "", "sz"], ["up"], mode="nearest"),
        node("Reshape", ["up", "flat"], ["f"]),
        node("Gemm", ["f", "g", "gb"], ["h"], transB=1),
        node("Reshape", ["h", "back"], ["y"]),
    ]
    inputs = {"x": rand(1, 3, 4, 4)}
    inits = {
        "w": rand(2, 3, 3, 3),
        "b": rand(2),
        "sz": i64(1, 2, 8, 8),
        "flat": i64(1, -1),
        "g": rand(6, 128),
        "gb": rand(6),
        "back": i64(1, 6, 1, 1),
    }
    return make_model(nodes, inputs, inits)


def test_batch_of_n_equals_n_single_runs() -> None:
    model = batch1_model()
    graph = OnnxTorchGraph(model)
    x = torch.from_numpy(rand(3, 3, 4, 4))
    batched = graph.run({"x": x})["y"]
    singles = torch.cat([graph.run({"x": x[i : i + 1]})["y"] for i in range(3)])
    assert batched.shape == (3, 6, 1, 1)
    torch.testing.assert_close(batched, singles, rtol=1e-5, atol=1e-5)
    reference = ReferenceEvaluator(model)
    torch.testing.assert_close(
        singles[1:2], torch.from_numpy(reference.run(None, {"x": x[1:2].numpy()})[0]), rtol=1e-4, atol=1e-5
    )


def test_batch_rule() -> None:
    from pipeline.onnx_torch.core import RunContext

    ctx = RunContext(torch.device("cpu"), torch.float32, 17, batch=4, declared_batch=1)
    assert batch_rule(ctx, (4, 512), [1, -1]) == [4, -1]
    assert batch_rule(ctx, (4, 512), [1, 512, 1, 1]) == [4, 512, 1, 1]
    assert batch_rule(ctx, (2048,), [1, 2048]) == [1, 2048]  # leading dim is not the batch: untouched
    single = RunContext(torch.device("cpu"), torch.float32, 17, batch=1, declared_batch=1)
    assert batch_rule(single, (1, 512), [1, -1]) == [1, -1]


def test_unsupported_op_names_the_op_and_node() -> None:
    model = make_model(
        [node("Relu", ["x"], ["r"], name="first"), node("Hardmax", ["r"], ["y"], name="the_culprit")], {"x": rand(2, 3)}
    )
    with pytest.raises(UnsupportedOperator, match=r"'Hardmax'.*'the_culprit'"):
        OnnxTorchGraph(model)
    custom = make_model([node("FusedConv", ["x"], ["y"], name="ms", domain="com.microsoft")], {"x": rand(2, 3)})
    with pytest.raises(UnsupportedOperator, match="com.microsoft.FusedConv"):
        OnnxTorchGraph(custom)


def test_wrong_inputs_are_rejected() -> None:
    graph = OnnxTorchGraph(batch1_model())
    with pytest.raises(ValueError, match="inputs must be exactly"):
        graph.run({"nope": torch.zeros(1, 3, 4, 4)})
    with pytest.raises(ValueError, match="any batch"):
        graph.run({"x": torch.zeros(2, 3, 5, 4)})


def test_load_graph_and_constants_placement(tmp_path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(batch1_model(), str(path))
    graph = load_graph(str(path))
    assert graph.input_names == ("x",) and graph.output_names == ("y",)
    assert graph.initializer_names[-1] == "back"
    assert graph.constant("w").dtype == torch.float32
    assert graph.constant("flat").dtype == torch.int64 and graph.constant("flat").device.type == "cpu"


def test_float16_file_with_casts_runs_in_float32() -> None:
    """The pattern of fp16 files that keep float32 inputs: Cast in, fp16 weights, Cast out. Every
    floating type is the executor's compute dtype, so it runs in float32 here."""
    x = rand(2, 3, 4, 4)
    weight = rand(4, 3, 1, 1).astype(np.float16)
    model = make_model(
        [
            node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
            node("Conv", ["h", "w"], ["c"]),
            node("Cast", ["c"], ["y"], to=TensorProto.FLOAT),
        ],
        {"x": x},
        {"w": weight},
    )
    graph = OnnxTorchGraph(model)
    assert graph.constant("w").dtype == torch.float32
    np.testing.assert_allclose(ours(model, {"x": x}), reference_output(model, {"x": x}), rtol=1e-2, atol=1e-2)


def test_half_on_cpu_is_close() -> None:
    model = batch1_model()
    x = torch.from_numpy(rand(2, 3, 4, 4))
    full = OnnxTorchGraph(model).run({"x": x})["y"]
    half = OnnxTorchGraph(model, half=True).run({"x": x})["y"]
    assert half.dtype == torch.float32
    torch.testing.assert_close(half, full, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_cuda_matches_cpu(case: Case) -> None:
    model = case.model()
    feeds = {name: torch.from_numpy(a) for name, a in case.inputs.items()}
    on_cpu = OnnxTorchGraph(model).run(feeds)
    on_gpu = OnnxTorchGraph(model, device="cuda").run({k: v.cuda() for k, v in feeds.items()})
    for name, value in on_cpu.items():
        assert on_gpu[name].device.type == "cuda" or not value.dtype.is_floating_point
        torch.testing.assert_close(on_gpu[name].cpu(), value, rtol=1e-3, atol=1e-3)
