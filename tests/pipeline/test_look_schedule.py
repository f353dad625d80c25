"""The per-session schedule of detector looks (pipeline/tracking/look_schedule.py), on made-up tracks:
no model runs. The chain's own tests show what the schedule finds on real frames."""

from __future__ import annotations

import torch

from pipeline.landmarks.crops import RIGHT_EYE_CORNER
from pipeline.tracking import LookSchedule, Track, periodic_look_size
from pipeline.tracking.look_schedule import LOOK_TURNS, PERIODIC_LOOK_TURNS


def track_with_eye_line(dx: float, dy: float, misses: int) -> Track:
    """A track whose smoothed mesh has its right outer eye corner at (dx, dy) from the left one (at 0;
    image pixels, y down)."""
    points = torch.zeros(468, 3)
    points[RIGHT_EYE_CORNER, :2] = torch.tensor([dx, dy])
    box = torch.zeros(4)
    return Track(1, points, points, torch.zeros_like(points), 0.0, box, torch.zeros(2, 2), (0, 0, 1, 1), misses=misses)


def test_a_session_with_no_face_goes_through_the_turns_in_order():
    schedule = LookSchedule()
    looks = [schedule.turns("nobody", "no_faces", ()) for _ in range(6)]
    assert looks == [(0,), (1, 3), (0,), (2,), (0,), (1, 3)]
    assert [schedule.turns("other", "no_faces", ())] == [LOOK_TURNS[0]], "each session counts its own"


def test_periodic_looks_go_through_their_turns_and_end_a_run_of_looks_for_no_face():
    schedule = LookSchedule()
    schedule.turns("s", "no_faces", ())
    schedule.turns("s", "no_faces", ())  # the next look for no face would be upright, the third in turn
    periodic = [schedule.turns("s", "periodic", ()) for _ in range(len(PERIODIC_LOOK_TURNS) + 1)]
    assert periodic == [*PERIODIC_LOOK_TURNS, PERIODIC_LOOK_TURNS[0]]
    assert schedule.turns("s", "no_faces", ()) == LOOK_TURNS[0], "faces were followed: the looks for none start over"


def test_a_face_that_was_not_lost_does_not_end_a_run_of_looks_for_no_face():
    """A face found and lost again: the next look for no face tries the turn after the last one."""
    schedule = LookSchedule()
    schedule.turns("s", "no_faces", ())
    schedule.turns("s", "lost", (track_with_eye_line(10, 0, misses=1),))
    assert schedule.turns("s", "no_faces", ()) == LOOK_TURNS[1]


def test_a_lost_face_is_looked_for_at_the_turn_that_shows_it_upright():
    schedule = LookSchedule()
    followed = track_with_eye_line(10, 0, misses=0)
    assert schedule.turns("s", "lost", (followed, track_with_eye_line(10, 0, misses=2))) == (0,)
    assert schedule.turns("s", "lost", (followed, track_with_eye_line(0, 10, misses=1))) == (1,)  # on its side
    assert schedule.turns("s", "lost", (track_with_eye_line(-10, 0, misses=1),)) == (2,)  # upside down
    assert schedule.turns("s", "lost", (track_with_eye_line(0, -10, misses=1),)) == (3,)
    assert schedule.turns("s", "lost", (followed,)) == (0,), "no track missed: upright"


def turns_until_the_next_differs_from_the_first(turns: tuple[tuple[int, ...], ...]) -> int:
    """How many looks to take so that the next one, if nothing were forgotten, would not be the
    first again: only then does a schedule started afresh show."""
    return next(n for n in range(1, len(turns)) if turns[n] != turns[0])


def test_forgetting_a_session_starts_its_schedule_afresh():
    schedule = LookSchedule()
    for _ in range(turns_until_the_next_differs_from_the_first(PERIODIC_LOOK_TURNS)):
        schedule.turns("s", "periodic", ())
    for _ in range(turns_until_the_next_differs_from_the_first(LOOK_TURNS)):
        schedule.turns("t", "no_faces", ())
    schedule.forget("s")
    schedule.forget("t")
    assert schedule.turns("s", "periodic", ()) == PERIODIC_LOOK_TURNS[0]
    assert schedule.turns("t", "no_faces", ()) == LOOK_TURNS[0]


def test_a_periodic_look_reads_half_the_longer_side_up_to_a_multiple_of_32_at_most_full_size():
    assert periodic_look_size(480, 640, 640) == 320
    assert periodic_look_size(480, 960, 640) == 480
    assert periodic_look_size(720, 1280, 640) == 640
    assert periodic_look_size(1080, 1920, 640) == 640, "at most full size"
    assert periodic_look_size(481, 650, 640) == 352, "rounded up"
