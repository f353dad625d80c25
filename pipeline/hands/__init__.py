"""Hands in front of a face, found so the swap leaves them in front: palms (palm_detector.py), then
21 landmarks per palm, which also drop the palm detector's false alarms (hand_landmarks.py), then
a soft mask (hand_mask.py); per session, a found hand is followed by its landmarks alone
(hand_tracker.py)."""

from pipeline.hands.hand_landmarks import HandLandmarker, Hands
from pipeline.hands.hand_mask import hand_masks
from pipeline.hands.hand_tracker import HandTracker
from pipeline.hands.palm_detector import PalmDetector, Palms

__all__ = ["HandLandmarker", "HandTracker", "Hands", "PalmDetector", "Palms", "hand_masks"]
