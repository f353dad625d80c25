"""The `inswapper` chain with stand-in model files: the learned swapper in the batched face path."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline.chain import ChainItem
from pipeline.chains import UnknownChain, create_chain
from pipeline.faces import FaceLibrary
from pipeline.learned import ModelFileInvalid, ModelFileMissing, file_sha256
from support.face_zone import changed_outside, detected_face_zone
from support.photos import face_i420, face_rgb
from support.standin_models import make_arcface, make_inswapper


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    files = [make_arcface(folder / "w600k_r50.onnx"), make_inswapper(folder / "inswapper_128.onnx")]
    (folder / "SHA256SUMS").write_text("".join(f"{file_sha256(path)}  {path.name}\n" for path in files))
    return folder


@pytest.fixture(scope="module")
def chain_and_face(models_dir):
    faces = FaceLibrary()
    chain = create_chain("inswapper", torch.device("cpu"), faces, models_dir=models_dir)
    assert chain.name == "inswapper"
    source = face_rgb("biden.jpg")
    analysis = chain.analysis.analyse(source)
    assert analysis.latent is not None and analysis.latent.shape == (512,)
    assert torch.isclose(analysis.latent.norm(), torch.tensor(1.0), atol=1e-4), "inswapper latents are renormalised"
    face = faces.add(source, owner="t", format="jpeg", size_bytes=0, analysis=analysis)
    return chain, face.id


def test_swaps_inside_the_face_box_only(chain_and_face):
    chain, face_id = chain_and_face
    target = face_i420("obama2.jpg")
    out = chain.run([ChainItem("a", target, {"face_id": face_id})])[0]
    assert out is not None
    changed = (out != target)[:480]
    assert changed.mean() > 0.01
    # the aligned 128 px crop reaches well past the detector's box (about twice the face's width)
    zone = detected_face_zone(chain.detector, target, grow=0.75)
    assert changed_outside(target, out, zone) == 0, "only the face region is pasted"


def test_a_batch_equals_its_frames_one_by_one(chain_and_face):
    chain, face_id = chain_and_face
    frames = [face_i420("obama.jpg"), face_i420("obama3.jpg")]
    together = chain.run([ChainItem(f"t{n}", f, {"face_id": face_id}) for n, f in enumerate(frames)])
    alone = [chain.run([ChainItem(f"s{n}", f, {"face_id": face_id})])[0] for n, f in enumerate(frames)]
    for a, b in zip(together, alone):
        assert np.abs(a.astype(int) - b.astype(int)).max() <= 1


def test_digests_are_checked(models_dir, tmp_path):
    for name in ("w600k_r50.onnx", "inswapper_128.onnx"):
        (tmp_path / name).write_bytes((models_dir / name).read_bytes())
    # no SHA256SUMS: the known public digests for these names, which stand-ins do not match
    with pytest.raises(ModelFileInvalid, match="SHA-256"):
        create_chain("inswapper", torch.device("cpu"), FaceLibrary(), models_dir=tmp_path)
    (tmp_path / "SHA256SUMS").write_text("0" * 64 + "  inswapper_128.onnx\n")
    with pytest.raises(ModelFileInvalid, match="SHA-256"):
        create_chain("inswapper", torch.device("cpu"), FaceLibrary(), models_dir=tmp_path)


def test_missing_model_files_are_named(tmp_path):
    with pytest.raises(ModelFileMissing) as caught:
        create_chain("inswapper", torch.device("cpu"), FaceLibrary(), models_dir=tmp_path)
    assert "inswapper_128.onnx" in str(caught.value) and str(tmp_path) in str(caught.value)
    with pytest.raises(UnknownChain):
        create_chain("inswapper", torch.device("cpu"), FaceLibrary())


def test_server_refuses_to_start_without_the_files(tmp_path):
    facefuse = str(Path(sys.executable).with_name("facefuse"))
    result = subprocess.run(
        [facefuse, "serve", "--port", "0", "--chain", "inswapper", "--models-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "no inswapper model" in result.stderr
