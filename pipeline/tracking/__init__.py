"""Face tracking across frames: detect rarely, crop from the last landmarks, smooth, hold lost faces."""

from pipeline.tracking.look_schedule import LookSchedule, periodic_look_size
from pipeline.tracking.one_euro import (
    OneEuroFilter,
    OneEuroSettings,
    OneEuroState,
    one_euro_step,
)
from pipeline.tracking.tracker import (
    FaceCrop,
    Observation,
    Plan,
    SessionPlan,
    SessionTracks,
    Track,
    Tracker,
    TrackingSettings,
    stack_crops,
)

__all__ = [
    "FaceCrop",
    "LookSchedule",
    "Observation",
    "OneEuroFilter",
    "OneEuroSettings",
    "OneEuroState",
    "Plan",
    "SessionPlan",
    "SessionTracks",
    "Track",
    "Tracker",
    "TrackingSettings",
    "one_euro_step",
    "periodic_look_size",
    "stack_crops",
]
