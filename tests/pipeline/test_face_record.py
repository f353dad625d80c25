"""A face as bytes for the shared store (pipeline/face_record.py): a real analysed photo goes in
and comes back the same, tensor for tensor; bytes that are not a record are refused, and a record
cannot build a type it does not list."""

from __future__ import annotations

import dataclasses
import io
import json

import numpy as np
import pytest
import torch

from pipeline.face_record import BadFaceRecord, decode_face, encode_face
from pipeline.faces import FaceLibrary
from pipeline.identity.face_analysis import FaceAnalysis
from pipeline.identity.thumbnail import face_thumbnail
from support.photos import face_rgb

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def biden():
    analysis = FaceAnalysis(CPU)
    image = face_rgb("biden.jpg")
    source = analysis.analyse(image)
    face = FaceLibrary().add(
        image,
        owner="ada",
        format="jpeg",
        size_bytes=123_456,
        analysis=source,
        checks=analysis.check(source),
        thumbnail=face_thumbnail(source),
    )
    return face


def _same(a, b, path="face"):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a.cpu(), b.cpu()), path
    elif dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        for field in dataclasses.fields(a):
            _same(getattr(a, field.name), getattr(b, field.name), f"{path}.{field.name}")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            _same(a[key], b[key], f"{path}[{key}]")
    else:
        assert a == b, path


def test_a_real_face_comes_back_the_same(biden):
    data = encode_face(biden)
    back = decode_face(data)
    _same(biden, back)
    assert back.describe() == biden.describe()
    print(f"\na face record: {len(data) / 1e6:.2f} MB (biden.jpg, the mesh chain's analysis with its texture)")


def test_bytes_that_are_not_a_record_are_refused():
    with pytest.raises(BadFaceRecord):
        decode_face(b"not a face")
    with pytest.raises(BadFaceRecord):
        decode_face(encode_face(dataclasses.replace(_plain_face(), analysis=None))[:-10])


def test_a_record_cannot_name_a_type_it_does_not_list():
    face = _plain_face()
    data = encode_face(face)
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    meta = json.loads(arrays["__meta__"].tobytes())
    meta["analysis"] = {"dataclass": "Popen", "fields": {"args": {"value": "rm -rf /"}}}
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    with pytest.raises(BadFaceRecord, match="unknown type 'Popen'"):
        decode_face(buffer.getvalue())


def test_a_pickled_array_is_refused():
    buffer = io.BytesIO()
    np.savez(buffer, __meta__=np.array([{"format": 1}], dtype=object))
    with pytest.raises(BadFaceRecord):
        decode_face(buffer.getvalue())


def _plain_face():
    return FaceLibrary().add(np.zeros((8, 8, 3), np.uint8), owner="ada", format="png", size_bytes=10)
