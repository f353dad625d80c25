"""Why an uploaded image is refused; signaling/errors.py maps each to its HTTP status."""

from __future__ import annotations


class ImageError(ValueError):
    code = "invalid_image"


class UnsupportedImage(ImageError):
    code = "unsupported_media_type"


class UnreadableImage(ImageError):
    code = "unreadable_image"


class ImageTooLarge(ImageError):
    code = "image_too_large"


def refuse_if_too_large(size: tuple[int, int], max_pixels: int) -> None:
    if size[0] * size[1] > max_pixels:
        raise ImageTooLarge(f"the image is {size[0]}x{size[1]}; at most {max_pixels:,} pixels are accepted")
