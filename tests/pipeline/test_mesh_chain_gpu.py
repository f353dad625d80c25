"""The mesh chain on CUDA: agrees with the CPU, and device memory stays flat over a long session."""

import av
import numpy as np
import pytest
import torch

from pipeline.chain import ChainItem
from pipeline.chains import create_chain
from pipeline.faces import FaceLibrary
from support.photos import face_i420, face_rgb

pytestmark = pytest.mark.gpu


def chain_with_face(device: str):
    faces = FaceLibrary()
    chain = create_chain("mesh", torch.device(device), faces)
    chain.warm_up()
    source = face_rgb("biden.jpg")
    face_id = faces.add(source, owner="gpu", format="jpeg", size_bytes=0, analysis=chain.analysis.analyse(source)).id
    return chain, face_id


def target() -> np.ndarray:
    return face_i420("obama.jpg")


@pytest.fixture
def cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")


def test_cuda_output_agrees_with_cpu(cuda):
    """fp32 on both devices; the server's CUDA default (fp16 models) is checked below."""
    from pipeline.chains.face_swap import FaceSwapChain
    from pipeline.identity.face_analysis import FaceAnalysis

    frame = target()
    outputs = []
    for device in ("cpu", "cuda"):
        faces = FaceLibrary()
        chain = FaceSwapChain(torch.device(device), faces, FaceAnalysis(torch.device(device), half=False))
        source = face_rgb("biden.jpg")
        face_id = faces.add(
            source, owner="gpu", format="jpeg", size_bytes=0, analysis=chain.analysis.analyse(source)
        ).id
        outputs.append(chain.run([ChainItem("s", frame, {"face_id": face_id})])[0].astype(np.int16))
    difference = np.abs(outputs[0] - outputs[1])
    print(f"CPU vs CUDA: mean {difference.mean():.3f}, max {difference.max()} grey levels")
    assert difference.mean() < 0.5 and np.percentile(difference, 99.9) <= 8


def test_device_memory_is_flat_over_1000_batches(cuda):
    chain, face_id = chain_with_face("cuda")
    items = [ChainItem(f"s{n}", target(), {"face_id": face_id}) for n in range(4)]
    for _ in range(20):
        chain.run(items)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(1000):
        chain.run(items)
    torch.cuda.synchronize()
    after = torch.cuda.memory_allocated()
    print(f"allocated {before / 2**20:.1f} -> {after / 2**20:.1f} MiB")
    assert after - before < 16 * 2**20


def test_fp16_swaps_without_nan(cuda):
    chain, face_id = chain_with_face("cuda")  # create_chain uses fp16 models on CUDA
    assert chain.detector.dtype == torch.float16
    frame = target()
    out = chain.run([ChainItem("h", frame, {"face_id": face_id})])[0]
    assert out is not None
    frames = torch.from_numpy(av.VideoFrame.from_ndarray(out, format="yuv420p").to_ndarray(format="rgb24")).float()
    assert torch.isfinite(frames).all() and (out != frame).mean() > 0.01


def test_the_warm_up_runs_every_batch_size_the_server_may_form(cuda, monkeypatch):
    """The H200's first batches of each new size took 0.8-1.9 s (kernels loaded on first use): the
    server's warm-up swaps the average face at every size up to --max-batch (fp16 models, as
    served), and the chain swaps as before afterwards."""
    chain, face_id = chain_with_face("cuda")
    sizes = []
    real_render = chain.swapper.render

    def render(frames, points, index, sources, origin=(0, 0)):
        result = real_render(frames, points, index, sources, origin)
        assert torch.isfinite(result.frames).all() and float(result.support.sum()) > 1000
        sizes.append(len(points))
        return result

    monkeypatch.setattr(chain.swapper, "render", render)
    chain.warm_up(8)
    assert sizes == list(range(1, 9))
    out = chain.run([ChainItem(f"w{n}", target(), {"face_id": face_id}) for n in range(8)])
    assert all(frame is not None for frame in out)


def test_a_head_on_its_side_is_found_on_cuda_where_the_cpu_finds_it(cuda):
    from pipeline.detect import FaceDetector
    from pipeline.detect.turned import detect_turned

    frame = torch.rot90(
        torch.from_numpy(np.ascontiguousarray(face_rgb("biden.jpg")))[None], 1, dims=(1, 2)
    ).contiguous()
    [on_cpu] = detect_turned(FaceDetector(torch.device("cpu")), frame, 3)
    [on_cuda] = detect_turned(FaceDetector(torch.device("cuda"), half=True), frame.cuda(), 3)
    assert len(on_cpu) == len(on_cuda) == 1
    side = float((on_cpu.boxes[0, 2:] - on_cpu.boxes[0, :2]).amax())
    assert torch.allclose(
        on_cuda.keypoints[0].cpu(), on_cpu.keypoints[0], atol=0.04 * side
    )  # fp16: within 4 % of the face
