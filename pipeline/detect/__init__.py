"""Face detection: RetinaFace-MobileNet0.25 as a native torch module, batched, on the device."""

from pipeline.detect.detector import Detections, FaceDetector

__all__ = ["Detections", "FaceDetector"]
