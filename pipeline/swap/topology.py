"""Landmark index lists of the 468-point face mesh, from MediaPipe FaceMesh topology
(face_mesh_connections: FACEMESH_FACE_OVAL, FACEMESH_LEFT_EYE / RIGHT_EYE, the inner ring of
FACEMESH_LIPS), written here as closed polygons walked in order.

Left / right are as seen in a frontal image (image-left first), like pipeline.landmarks.
"""

from __future__ import annotations

# The outline of the face: forehead (10) round the image-right side, down to the chin (152), and back up.
FACE_OVAL = (
    10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378, 400, 377,
    152, 148, 176, 149, 150, 136, 172, 58, 132, 93, 234, 127, 162, 21, 54, 103, 67, 109,
)  # fmt: skip

# The lid margins of each eye: outer corner, along the upper lid, inner corner, back along the lower lid.
EYE_IMAGE_LEFT = (33, 246, 161, 160, 159, 158, 157, 173, 133, 155, 154, 153, 145, 144, 163, 7)
EYE_IMAGE_RIGHT = (263, 466, 388, 387, 386, 385, 384, 398, 362, 382, 381, 380, 374, 373, 390, 249)

# The inner edge of the lips (the mouth opening): left corner, along the upper lip, right corner, back.
INNER_LIPS = (78, 191, 80, 81, 82, 13, 312, 311, 310, 415, 308, 324, 318, 402, 317, 14, 87, 178, 88, 95)

# Aperture pairs: (upper, lower) points whose distance measures how open an eye or the mouth is.
EYE_IMAGE_LEFT_LIDS = (159, 145)
EYE_IMAGE_RIGHT_LIDS = (386, 374)
MOUTH_LIPS = (13, 14)

# Outer eye corners: their distance is the face's scale (inter-ocular distance).
EYE_OUTER_CORNERS = (33, 263)

# The outer edge of the lips: left corner, along the upper lip, right corner, back along the lower.
OUTER_LIPS = (61, 185, 40, 39, 37, 0, 267, 269, 270, 409, 291, 375, 321, 405, 314, 17, 84, 181, 91, 146)

# The eyebrows (FACEMESH_RIGHT_EYEBROW / LEFT_EYEBROW: image-left, then image-right).
BROW_IMAGE_LEFT = (46, 53, 52, 65, 55, 70, 63, 105, 66, 107)
BROW_IMAGE_RIGHT = (276, 283, 282, 295, 285, 300, 293, 334, 296, 336)
