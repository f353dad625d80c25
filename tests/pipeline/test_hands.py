"""Hands in front of the face (pipeline/hands): MediaPipe's palm detector and hand landmarks, run
by our own TFLite graph executor in torch, on real photos (facetorch's grid, tests/support/sdist_photos.py),
and the masks drawn from the landmarks.

No TFLite runtime is installed to compare against: the checks are what the models must do on real
photos (palms found by hands, none left where there is no hand, landmarks on the hand)."""

import numpy as np
import pytest
import torch

from pipeline.hands import HandLandmarker, Hands, PalmDetector, hand_masks
from pipeline.hands.hand_landmarks import Rois, rois_from_palms
from pipeline.hands.palm_detector import anchor_centres
from support.sdist_photos import grid_tile

CPU = torch.device("cpu")
WITH_A_HAND = {"hand over the mouth": (3, 3), "hand over the eyes": (0, 3), "chin on a hand": (1, 0)}
WITHOUT = {"screaming": (1, 1), "frontal": (0, 0), "tongue out": (4, 0)}


@pytest.fixture(scope="module")
def detector() -> PalmDetector:
    return PalmDetector(CPU)


@pytest.fixture(scope="module")
def landmarker() -> HandLandmarker:
    return HandLandmarker(CPU)


def test_anchors_follow_the_models_output_order():
    centres = anchor_centres(CPU)
    assert centres.shape == (2016, 2)
    assert torch.allclose(centres[0], centres[1]) and torch.allclose(centres[0], torch.tensor([0.5 / 24, 0.5 / 24]))
    assert torch.allclose(centres[1152], torch.tensor([0.5 / 12, 0.5 / 12]))  # the 12x12 grid starts here


@pytest.mark.parametrize("case", list(WITH_A_HAND))
def test_a_hand_by_the_face_is_found(detector, case):
    frame = torch.from_numpy(grid_tile(*WITH_A_HAND[case]))[None]
    (palms,) = detector.detect(frame)
    print(f"\n{case}: scores {palms.scores.tolist()}")
    assert len(palms) >= 1 and float(palms.scores.max()) > 0.8
    box, points = palms.boxes[0], palms.keypoints[0]
    grown = torch.cat((box[:2] - (box[2:] - box[:2]), box[2:] + (box[2:] - box[:2])))  # key points reach past the palm
    assert (points >= grown[:2]).all() and (points <= grown[2:]).all()


@pytest.mark.parametrize("case", list(WITH_A_HAND))
def test_the_landmarks_confirm_the_hand_and_lie_on_it(detector, landmarker, case):
    frame = torch.from_numpy(grid_tile(*WITH_A_HAND[case]))[None]
    palms = detector.detect(frame)
    (hands,) = landmarker.landmarks(frame, palms)
    print(f"\n{case}: presence {hands.presence.tolist()}")
    assert len(hands) >= 1 and float(hands.presence.max()) > 0.9
    wrist, middle_base = hands.points[0, 0], hands.points[0, 9]
    palm = palms[0].boxes[0]
    margin = float((palm[2:] - palm[:2]).max()) / 2
    for point in (wrist, middle_base):  # the landmarks' palm agrees with the detector's palm
        assert (point >= palm[:2] - margin).all() and (point <= palm[2:] + margin).all()


@pytest.mark.parametrize("case", list(WITHOUT))
def test_no_hand_leaves_no_hand(detector, landmarker, case):
    """The palm detector alone has false alarms here (up to 0.81 on these tiles); the landmark
    model's presence score drops them (0.00-0.01)."""
    frame = torch.from_numpy(grid_tile(*WITHOUT[case]))[None]
    (hands,) = landmarker.landmarks(frame, detector.detect(frame))
    assert len(hands) == 0


def test_a_batch_equals_single_frames(detector, landmarker):
    tiles = torch.from_numpy(np.stack([grid_tile(*position) for position in (*WITH_A_HAND.values(), (4, 0))]))
    together = landmarker.landmarks(tiles, detector.detect(tiles))
    for index in range(len(tiles)):
        frame = tiles[index : index + 1]
        (alone,) = landmarker.landmarks(frame, detector.detect(frame))
        assert len(alone) == len(together[index])
        torch.testing.assert_close(together[index].points, alone.points, atol=1e-2, rtol=0)


def test_the_mask_covers_the_hand_and_nothing_far_away():
    # an upright hand: wrist at (100, 250), the fingers' bases at y = 170, 12 px apart, fingers 60 px long
    points = torch.zeros(21, 2)
    points[0] = torch.tensor([100.0, 250.0])
    for finger, x in enumerate((70.0, 88.0, 100.0, 112.0, 124.0)):  # thumb, index, middle, ring, little
        base = 1 + 4 * finger
        for joint in range(4):
            points[base + joint] = torch.tensor([x, 170.0 - 20.0 * joint])
    hands = Hands(points[None], torch.tensor([0.99]))
    none = Hands(torch.zeros(0, 21, 2), torch.zeros(0))
    mask = hand_masks([hands, none], 300, 200, CPU)
    assert mask.shape == (2, 1, 300, 200)
    assert float(mask[0, 0, 210, 100]) == 1.0  # palm
    assert float(mask[0, 0, 115, 100]) == 1.0  # the middle finger, near its tip
    assert float(mask[0, 0, 150, 20]) == 0.0 and float(mask[0, 0, 290, 100]) == 0.0  # beside and below
    assert float(mask[1].max()) == 0.0  # no hand, no mask


def test_float_frames_find_the_same_hands_as_uint8(detector, landmarker):
    """The chain hands the models float RGB frames (model_input.py), uploads and tests uint8."""
    frame = torch.from_numpy(grid_tile(*WITH_A_HAND[next(iter(WITH_A_HAND))]))[None]
    as_float = frame.permute(0, 3, 1, 2).float() / 255.0
    (palms_u8,), (palms_float,) = detector.detect(frame), detector.detect(as_float)
    assert len(palms_u8) == len(palms_float) >= 1
    assert torch.allclose(palms_u8.boxes, palms_float.boxes, atol=1e-3)
    (hands_u8,) = landmarker.landmarks(frame, [palms_u8])
    (hands_float,) = landmarker.landmarks(as_float, [palms_u8])
    assert torch.allclose(hands_u8.points, hands_float.points, atol=1e-3)
    with pytest.raises(ValueError, match="float or"):
        detector.detect(frame[..., :2])


def test_each_hand_says_which_crop_it_was_found_in(detector, landmarker):
    """What following needs to smooth a hand from its own last landmarks: a crop with no hand in
    it (the tile's top left corner) gives none, and the hand keeps its crop's number."""
    frame = torch.from_numpy(grid_tile(*WITH_A_HAND["hand over the mouth"]))[None]
    (palms,) = detector.detect(frame)
    hand = rois_from_palms(palms)
    empty = Rois(torch.tensor([[30.0, 30.0]]), torch.tensor([50.0]), torch.tensor([0.0]))
    (found,) = landmarker.landmarks_in(frame, [Rois.cat([empty, hand], CPU)])
    assert len(found) == len(hand) >= 1
    assert found.crops.tolist() == list(range(1, len(hand) + 1))


def test_a_hand_whose_landmarks_are_not_finite_is_dropped(detector, landmarker, monkeypatch):
    """A model gone NaN (fp16 overflow) must not draw a NaN mask over the swap."""
    frame = torch.from_numpy(grid_tile(*WITH_A_HAND["hand over the mouth"]))[None]
    (palms,) = detector.detect(frame)
    (found,) = landmarker.landmarks(frame, [palms])
    assert len(found) >= 1
    run = landmarker.net.run

    def broken(crops):
        points, presence, *rest = run(crops)
        return (points * float("nan"), presence, *rest)

    monkeypatch.setattr(landmarker.net, "run", broken)
    (found,) = landmarker.landmarks(frame, [palms])
    assert len(found) == 0


def test_a_mask_of_a_window_is_that_window_of_the_frames_mask():
    points = torch.tensor([[100.0 + 2 * i, 200.0 - 5 * i] for i in range(21)])
    hands = [Hands(points[None], torch.tensor([0.99]))]
    whole = hand_masks(hands, 300, 200, CPU)
    window = hand_masks(hands, 120, 90, CPU, origin=(100, 60))
    assert float(whole.sum()) > 0 and torch.allclose(window, whole[:, :, 100:220, 60:150], atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_finds_the_same_hands(detector, landmarker):
    tiles = torch.from_numpy(np.stack([grid_tile(*position) for position in WITH_A_HAND.values()]))
    cuda = torch.device("cuda")
    on_gpu = HandLandmarker(cuda).landmarks(tiles.cuda(), PalmDetector(cuda).detect(tiles.cuda()))
    for cpu, gpu in zip(landmarker.landmarks(tiles, detector.detect(tiles)), on_gpu):
        assert len(cpu) == len(gpu)
        torch.testing.assert_close(gpu.points.cpu(), cpu.points, atol=1.0, rtol=0)
