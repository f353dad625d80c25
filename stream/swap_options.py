"""Which faces a session swaps: `options.swap` of its offer, or later the data channel's
`set_swap` command. Every face (the default), the largest, or only those matching an uploaded
photo of one person (`reference_face_id`)."""

from __future__ import annotations

from collections.abc import Mapping

from pipeline.faces import FaceLibrary

SWAP_MODES = ("all", "largest", "reference")
SWAP_KEYS = ("swap", "reference_face_id")  # the keys of a session's options that these set


class InvalidSwapOptions(ValueError):
    code = "invalid_body"


def check_swap_options(options: Mapping[str, object], faces: FaceLibrary, account_id: str | None) -> None:
    """InvalidSwapOptions for an option or mode we do not know or 'reference' without a photo's id;
    FaceNotFound / FaceForbidden for a reference photo the account cannot use."""
    unknown = sorted(str(key)[:40] for key in options if key not in SWAP_KEYS)
    if unknown:  # a typo, or a payload: options are echoed in every stats event
        raise InvalidSwapOptions(f"unknown option {unknown[0]!r}; the options are {' and '.join(SWAP_KEYS)}")
    mode = options.get("swap", "all")
    if mode not in SWAP_MODES:
        raise InvalidSwapOptions(f"options.swap must be one of {', '.join(SWAP_MODES)}")
    if mode == "reference":
        reference = options.get("reference_face_id")
        if not isinstance(reference, str):
            raise InvalidSwapOptions("options.swap 'reference' needs options.reference_face_id")
        faces.get(reference, account_id)
