"""Which faces a session swaps: `options.swap` of its offer, or later the data channel's
`set_swap` command. Every face (the default), the largest, or only those matching an uploaded
photo of one person (`reference_face_id`), by an SFace similarity of at least
`reference_threshold` (default 0.5, pipeline/chains/face_swap.py)."""

from __future__ import annotations

from collections.abc import Mapping

from pipeline.faces import FaceLibrary

SWAP_MODES = ("all", "largest", "reference")
SWAP_KEYS = ("swap", "reference_face_id", "reference_threshold")  # the keys of a session's options that these set


class InvalidSwapOptions(ValueError):
    code = "invalid_body"


def checked_swap_options(
    options: Mapping[str, object], faces: FaceLibrary, account_id: str | None
) -> dict[str, object]:
    """The options a session keeps: a reference photo's id only with mode 'reference' (with another
    mode it is dropped unread: it was once kept and echoed, whatever it held, in every stats event).
    InvalidSwapOptions for an option or mode we do not know or 'reference' without a photo's id;
    FaceNotFound / FaceForbidden for a reference photo the account cannot use."""
    unknown = sorted(str(key)[:40] for key in options if key not in SWAP_KEYS)
    if unknown:  # a typo, or a payload: options are echoed in every stats event
        raise InvalidSwapOptions(f"unknown option {unknown[0]!r}; the options are {', '.join(SWAP_KEYS)}")
    mode = options.get("swap", "all")
    if mode not in SWAP_MODES:
        raise InvalidSwapOptions(f"options.swap must be one of {', '.join(SWAP_MODES)}")
    if mode == "reference":
        reference = options.get("reference_face_id")
        if not isinstance(reference, str):
            raise InvalidSwapOptions("options.swap 'reference' needs options.reference_face_id")
        faces.get(reference, account_id)
    if "reference_threshold" in options:
        threshold = options["reference_threshold"]
        if mode != "reference":
            raise InvalidSwapOptions("options.reference_threshold goes only with options.swap 'reference'")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold < 1:
            raise InvalidSwapOptions(
                "options.reference_threshold must be a number between 0 and 1: the SFace similarity from which a face "
                "counts as the reference person (default 0.5; the same person scores about 0.6-0.8, two people under 0.3)"
            )
    if mode == "reference":
        return dict(options)
    return {key: value for key, value in options.items() if key != "reference_face_id"}
