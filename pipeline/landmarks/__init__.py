"""Face landmarks: MediaPipe FaceMesh (468 points) as a native torch module, and the crops it reads."""

from pipeline.landmarks.crops import boxes_from_points, crop_extents, crop_faces, to_frame_coords
from pipeline.landmarks.mesher import FaceMesher, MeshResult

__all__ = ["FaceMesher", "MeshResult", "boxes_from_points", "crop_extents", "crop_faces", "to_frame_coords"]
