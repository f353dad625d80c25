"""Loaders for the models users bring, on small stand-in ONNX files with the same interfaces,
and the paste-back of swapped crops."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

from pipeline.identity.align import align_faces, warp_crops
from pipeline.learned import (
    ARCFACE_128,
    INSWAPPER_128_FP16_SHA256,
    W600K_R50_SHA256,
    ModelFileInvalid,
    ModelFileMissing,
    ModelFileUnsupported,
    box_mask,
    file_sha256,
    load_arcface,
    load_inswapper,
    paste_back,
)
from pipeline.learned.paste import face_boxes
from support.standin_models import _save, make_arcface, make_inswapper, node  # noqa: F401


@pytest.fixture
def arcface_path(tmp_path: Path) -> Path:
    return make_arcface(tmp_path / "w600k_r50.onnx")


@pytest.fixture
def inswapper_path(tmp_path: Path) -> Path:
    return make_inswapper(tmp_path / "inswapper_128.onnx")


def reference(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return np.asarray(ReferenceEvaluator(str(path)).run(None, feeds)[0])


# ArcFace


def test_arcface_embeds_like_the_reference_and_batches(arcface_path: Path) -> None:
    model = load_arcface(arcface_path, "cpu")
    aligned = torch.rand(3, 3, 112, 112, generator=torch.Generator().manual_seed(0)) * 255
    embeddings = model.embed(aligned)
    assert embeddings.shape == (3, 512) and embeddings.dtype == torch.float32
    singles = torch.cat([model.embed(aligned[i : i + 1]) for i in range(3)])
    torch.testing.assert_close(embeddings, singles, rtol=1e-4, atol=1e-4)
    for i in range(3):
        x = ((aligned[i : i + 1].numpy() - 127.5) / 127.5).astype(np.float32)
        np.testing.assert_allclose(
            embeddings[i : i + 1].numpy(), reference(arcface_path, {"input.1": x}), rtol=1e-3, atol=1e-4
        )
    assert model.embed(torch.zeros(0, 3, 112, 112)).shape == (0, 512)


def test_arcface_takes_align_faces_crops(arcface_path: Path) -> None:
    model = load_arcface(arcface_path)
    frames = torch.randint(0, 256, (2, 120, 160, 3), dtype=torch.uint8)
    keypoints = torch.tensor([[[60.0, 50.0], [90.0, 50.0], [75.0, 65.0], [63.0, 82.0], [87.0, 82.0]]]).repeat(2, 1, 1)
    crops, _ = align_faces(frames, keypoints, torch.tensor([0, 1]))
    assert model.embed(crops).shape == (2, 512)
    with pytest.raises(ValueError, match="112"):
        model.embed(torch.zeros(1, 3, 128, 128))


def test_arcface_wrong_input_shape_is_invalid(tmp_path: Path) -> None:
    # a smaller input could not feed the 784-wide Gemm: change only the declared shape
    path = make_arcface(tmp_path / "wrong.onnx")
    model = onnx.load(str(path))
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 96
    onnx.save(model, str(path))
    with pytest.raises(ModelFileInvalid, match=r"input 'input.1' \[1,3,96,112\] should be \[1,3,112,112\]"):
        load_arcface(path)


# InSwapper


def test_inswapper_swaps_like_the_reference_and_batches(inswapper_path: Path) -> None:
    model = load_inswapper(inswapper_path, "cpu")
    generator = torch.Generator().manual_seed(1)
    crops = torch.rand(3, 3, 128, 128, generator=generator)
    latents = model.latent(torch.randn(3, 512, generator=generator))
    swapped = model.swap(crops, latents)
    assert swapped.shape == (3, 3, 128, 128) and swapped.dtype == torch.float32
    assert float(swapped.min()) >= 0.0 and float(swapped.max()) <= 1.0
    singles = torch.cat([model.swap(crops[i : i + 1], latents[i : i + 1]) for i in range(3)])
    torch.testing.assert_close(swapped, singles, rtol=1e-4, atol=1e-5)
    raw = reference(inswapper_path, {"target": crops[:1].numpy(), "source": latents[:1].numpy()})
    assert raw.min() < 0.0 or raw.max() > 1.0  # the stand-in overshoots, so the clip matters
    np.testing.assert_allclose(swapped[:1].numpy(), np.clip(raw, 0.0, 1.0), rtol=1e-4, atol=1e-4)
    assert model.swap(torch.zeros(0, 3, 128, 128), torch.zeros(0, 512)).shape == (0, 3, 128, 128)


def test_inswapper_latent_formula(inswapper_path: Path) -> None:
    model = load_inswapper(inswapper_path)
    emap = numpy_helper.to_array(onnx.load(str(inswapper_path)).graph.initializer[-1]).astype(np.float64)
    e = np.random.default_rng(3).standard_normal((4, 512)) * 7
    n = e / np.linalg.norm(e, axis=1, keepdims=True)
    latent = n @ emap
    expected = latent / np.linalg.norm(latent, axis=1, keepdims=True)
    got = model.latent(torch.from_numpy(e).float())
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        model.latent(torch.from_numpy(e).float(), renormalise=False).numpy(), latent, rtol=1e-4, atol=1e-5
    )
    assert model.emap.shape == (512, 512)


def test_arcface_128_template_is_shifted() -> None:
    assert ARCFACE_128[0] == pytest.approx((46.2946, 51.6963))


# file checks


def test_sha256(inswapper_path: Path, arcface_path: Path) -> None:
    digest = file_sha256(inswapper_path)
    assert load_inswapper(inswapper_path, expected_sha256=digest.upper()).emap.shape == (512, 512)
    with pytest.raises(ModelFileInvalid, match="SHA-256"):
        load_inswapper(inswapper_path, expected_sha256=INSWAPPER_128_FP16_SHA256)
    with pytest.raises(ModelFileInvalid, match="SHA-256"):
        load_arcface(arcface_path, expected_sha256=W600K_R50_SHA256)
    assert len(INSWAPPER_128_FP16_SHA256) == len(W600K_R50_SHA256) == 64


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "inswapper_128.onnx"
    with pytest.raises(ModelFileMissing, match="nowhere/inswapper_128.onnx"):
        load_inswapper(path)
    with pytest.raises(ModelFileMissing, match=str(tmp_path)):
        load_arcface(tmp_path)  # a directory


def test_not_onnx(tmp_path: Path) -> None:
    path = tmp_path / "inswapper_128.onnx"
    path.write_text("<html>404 Not Found</html>\n")
    with pytest.raises(ModelFileInvalid, match="not an ONNX model") as caught:
        load_inswapper(path)
    assert str(path) in str(caught.value)
    path.write_bytes(b"")
    with pytest.raises(ModelFileInvalid, match="not an ONNX model"):
        load_arcface(path)


def test_wrong_input_names(tmp_path: Path) -> None:
    path = make_inswapper(tmp_path / "renamed.onnx", names=("image", "identity"))
    with pytest.raises(ModelFileInvalid, match=r"inputs should be 'target' and 'source', not \['identity', 'image'\]"):
        load_inswapper(path)


def test_last_initializer_must_be_the_emap(tmp_path: Path) -> None:
    path = make_inswapper(tmp_path / "no_emap.onnx", emap_shape=(512, 256))
    with pytest.raises(ModelFileInvalid, match="emap"):
        load_inswapper(path)


def test_two_inputs_is_not_an_arcface(inswapper_path: Path) -> None:
    with pytest.raises(ModelFileInvalid, match="one input and one output"):
        load_arcface(inswapper_path)


def test_unsupported_op_is_reported(tmp_path: Path) -> None:
    path = make_arcface(tmp_path / "odd.onnx")
    model = onnx.load(str(path))
    model.graph.node[2].op_type = "Mish"
    model.graph.node[2].ClearField("input")
    model.graph.node[2].input.append("n1")
    onnx.save(model, str(path))
    with pytest.raises(ModelFileUnsupported, match="'Mish'"):
        load_arcface(path)


# paste-back


def similarity(scale: float, angle: float, dx: float, dy: float) -> torch.Tensor:
    c, s = scale * math.cos(angle), scale * math.sin(angle)
    return torch.tensor([[c, -s, dx], [s, c, dy]])


def test_paste_back_places_a_solid_crop() -> None:
    frames = torch.rand(2, 3, 120, 160, generator=torch.Generator().manual_seed(5))
    colours = torch.tensor([[0.1, 0.9, 0.3], [0.8, 0.2, 0.6]])
    swapped = colours[:, :, None, None].expand(2, 3, 128, 128).contiguous()
    transforms = torch.stack((similarity(0.4, 0.3, 30.0, 20.0), similarity(0.3, -0.2, 110.0, 60.0)))
    frame_index = torch.tensor([1, 1])
    out = paste_back(frames, swapped, transforms, frame_index)
    assert out.shape == frames.shape and out.dtype == frames.dtype
    torch.testing.assert_close(out[0], frames[0], rtol=0, atol=0)  # no face in frame 0
    for face in range(2):
        centre = transforms[face] @ torch.tensor([64.0, 64.0, 1.0])
        x, y = int(centre[0]), int(centre[1])
        torch.testing.assert_close(out[1, :, y, x], colours[face], rtol=0, atol=1e-4)
    boxes = face_boxes(transforms, 128, 120, 160)
    changed = (out[1] != frames[1]).any(dim=0)
    inside_any = torch.zeros(120, 160, dtype=torch.bool)
    for x0, y0, x1, y1 in boxes.tolist():
        inside_any[y0:y1, x0:x1] = True
    assert changed.any() and not (changed & ~inside_any).any()  # nothing outside the boxes moved
    # the feathered edge: the crop's border is the frame's own colour
    corner = transforms[0] @ torch.tensor([1.0, 1.0, 1.0])
    torch.testing.assert_close(
        out[1, :, int(corner[1]), int(corner[0])], frames[1, :, int(corner[1]), int(corner[0])], rtol=0, atol=0.02
    )


def test_paste_back_inverts_warp_crops() -> None:
    """A crop taken with align.warp_crops and pasted back lands where it came from."""
    ys, xs = torch.meshgrid(torch.arange(120.0), torch.arange(160.0), indexing="ij")
    image = torch.stack((xs * 1.5, ys * 2.0, 255 - xs - ys / 2), dim=-1).clamp(0, 255)
    frames = image.round().to(torch.uint8)[None]
    transform = similarity(0.7, 0.25, 50.0, 10.0)[None]
    crops = warp_crops(frames, transform, torch.tensor([0]), 128) / 255.0
    blank = torch.zeros(1, 3, 120, 160)
    out = paste_back(blank, crops, transform, torch.tensor([0]))
    mask = box_mask(128, 0.3, torch.device("cpu"))
    # frame pixels whose crop position is deep inside the mask
    centre = transform[0] @ torch.tensor([64.0, 64.0, 1.0])
    cx, cy = int(centre[0]), int(centre[1])
    window = (slice(cy - 15, cy + 15), slice(cx - 15, cx + 15))
    assert float(mask[44:84, 44:84].min()) > 0.999
    expected = frames[0].permute(2, 0, 1).float()[:, window[0], window[1]] / 255.0
    torch.testing.assert_close(out[0][:, window[0], window[1]], expected, rtol=0, atol=1.5 / 255)


def test_box_mask_shape() -> None:
    mask = box_mask(128, 0.3, torch.device("cpu"))
    assert mask.shape == (128, 128)
    assert float(mask[64, 64]) == pytest.approx(1.0, abs=1e-4)
    assert float(mask[0, 64]) < 0.05 and float(mask[64, 127]) < 0.05
    assert float(mask.min()) >= 0.0 and float(mask.max()) <= 1.0 + 1e-6


def test_paste_back_with_no_faces() -> None:
    frames = torch.rand(1, 3, 16, 16)
    out = paste_back(frames, torch.zeros(0, 3, 128, 128), torch.zeros(0, 2, 3), torch.zeros(0, dtype=torch.long))
    torch.testing.assert_close(out, frames, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu(arcface_path: Path, inswapper_path: Path) -> None:
    cuda = torch.device("cuda")
    generator = torch.Generator().manual_seed(9)
    aligned = torch.rand(3, 3, 112, 112, generator=generator) * 255
    crops = torch.rand(3, 3, 128, 128, generator=generator)
    cpu_arc, gpu_arc = load_arcface(arcface_path), load_arcface(arcface_path, cuda)
    embeddings = cpu_arc.embed(aligned)
    gpu_embeddings = gpu_arc.embed(aligned.to(cuda))
    assert gpu_embeddings.device.type == "cuda"
    torch.testing.assert_close(gpu_embeddings.cpu(), embeddings, rtol=1e-2, atol=1e-2)
    cpu_swap, gpu_swap = load_inswapper(inswapper_path), load_inswapper(inswapper_path, cuda)
    latents = cpu_swap.latent(embeddings)
    torch.testing.assert_close(gpu_swap.latent(embeddings.to(cuda)).cpu(), latents, rtol=1e-4, atol=1e-5)
    swapped = cpu_swap.swap(crops, latents)
    gpu_swapped = gpu_swap.swap(crops.to(cuda), latents.to(cuda))
    torch.testing.assert_close(gpu_swapped.cpu(), swapped, rtol=1e-3, atol=2e-3)
    half = load_inswapper(inswapper_path, cuda, half=True).swap(crops.to(cuda), latents.to(cuda))
    torch.testing.assert_close(half.cpu(), swapped, rtol=2e-2, atol=2e-2)
    frames = torch.rand(2, 3, 120, 160, generator=generator)
    transforms = torch.stack(
        (similarity(0.4, 0.3, 30.0, 20.0), similarity(0.3, -0.2, 110.0, 60.0), similarity(0.5, 0.0, 40.0, 40.0))
    )
    index = torch.tensor([0, 1, 1])
    pasted = paste_back(frames, swapped, transforms, index)
    gpu_pasted = paste_back(frames.to(cuda), gpu_swapped, transforms.to(cuda), index.to(cuda))
    torch.testing.assert_close(gpu_pasted.cpu(), pasted, rtol=1e-3, atol=2e-3)
