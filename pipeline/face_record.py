"""A face as bytes, for the store several nodes share (signaling/shared_faces.py): what the chain
computed of the photo (its analysis, its checks, its thumbnail) and the photo's description.

No pickle: a record from Redis must not be able to run code on the node that reads it. The arrays
go into a NumPy .npz (allow_pickle off), and the structure into JSON beside them, naming only the
dataclasses listed in RECORD_TYPES. The arrays keep their dtype, so a swap from a face read back
is the same as from the face uploaded on this node.
"""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile
from typing import Any

import numpy as np
import torch

from pipeline.faces import Face
from pipeline.identity.source_checks import Check, SourceChecks
from pipeline.swap.source import SourceFace
from pipeline.swap.source_texture import SourceTexture

RECORD_FORMAT = 1
# The only types a record may build.
RECORD_TYPES = {cls.__name__: cls for cls in (SourceFace, SourceTexture, SourceChecks, Check)}
_META = "__meta__"


class BadFaceRecord(ValueError):
    """Bytes that are not a face record this code can read (another format, damaged, unknown type)."""


def encode_face(face: Face) -> bytes:
    arrays: dict[str, np.ndarray] = {}
    meta = {
        "format": RECORD_FORMAT,
        "face": {
            "id": face.id,
            "owner": face.owner,
            "width": face.width,
            "height": face.height,
            "format": face.format,
            "size_bytes": face.size_bytes,
            "created_at": face.created_at,
        },
        "analysis": _pack(face.analysis, "analysis", arrays),
        "checks": _pack(face.checks, "checks", arrays),
        "thumbnail": None
        if face.thumbnail is None
        else _pack(np.frombuffer(face.thumbnail, np.uint8), "thumb", arrays),
    }
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **{_META: np.frombuffer(json.dumps(meta).encode(), np.uint8)}, **arrays)
    return buffer.getvalue()


def decode_face(data: bytes, device: torch.device | str = "cpu") -> Face:
    """The face; its tensors on `device` (where the chain's own analysis would have put them)."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
        meta = json.loads(arrays.pop(_META).tobytes())
        if meta.get("format") != RECORD_FORMAT:
            raise BadFaceRecord(f"face record format {meta.get('format')!r}, this node reads {RECORD_FORMAT}")
        thumbnail = meta["thumbnail"]
        return Face(
            **meta["face"],
            analysis=_unpack(meta["analysis"], arrays, device),
            checks=_unpack(meta["checks"], arrays, device),
            thumbnail=None if thumbnail is None else _unpack(thumbnail, arrays, device).tobytes(),
        )
    except BadFaceRecord:
        raise
    except (ValueError, KeyError, TypeError, OSError, EOFError, zipfile.BadZipFile) as exc:  # np.load's, json's
        raise BadFaceRecord(f"unreadable face record: {exc}") from exc


def _pack(value: Any, path: str, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(value, torch.Tensor):
        arrays[path] = value.detach().cpu().numpy()
        return {"tensor": path}
    if isinstance(value, np.ndarray):
        arrays[path] = value
        return {"array": path}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if RECORD_TYPES.get(name) is not type(value):
            raise TypeError(f"a face record cannot hold a {type(value).__qualname__}")
        fields = {f.name: _pack(getattr(value, f.name), f"{path}.{f.name}", arrays) for f in dataclasses.fields(value)}
        return {"dataclass": name, "fields": fields}
    if isinstance(value, dict):
        return {"dict": {str(key): _pack(item, f"{path}.{key}", arrays) for key, item in value.items()}}
    if isinstance(value, (list, tuple)):
        return {
            "list" if isinstance(value, list) else "tuple": [
                _pack(v, f"{path}.{i}", arrays) for i, v in enumerate(value)
            ]
        }
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    raise TypeError(f"a face record cannot hold a {type(value).__qualname__}")


def _unpack(packed: dict[str, Any], arrays: dict[str, np.ndarray], device: torch.device | str) -> Any:
    if "tensor" in packed:
        return torch.from_numpy(arrays[packed["tensor"]].copy()).to(device)
    if "array" in packed:
        return arrays[packed["array"]]
    if "dataclass" in packed:
        cls = RECORD_TYPES.get(packed["dataclass"])
        if cls is None:
            raise BadFaceRecord(f"a face record names an unknown type {packed['dataclass']!r}")
        return cls(**{name: _unpack(item, arrays, device) for name, item in packed["fields"].items()})
    if "dict" in packed:
        return {key: _unpack(item, arrays, device) for key, item in packed["dict"].items()}
    if "list" in packed:
        return [_unpack(item, arrays, device) for item in packed["list"]]
    if "tuple" in packed:
        return tuple(_unpack(item, arrays, device) for item in packed["tuple"])
    if "value" in packed:
        return packed["value"]
    raise BadFaceRecord(f"a face record holds an unknown entry {sorted(packed)!r}")
