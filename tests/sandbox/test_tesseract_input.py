"""The PNG airlock hands tesseract (sandbox/extractors/ocr.py, ``encode_for_tesseract``) holds
exactly the frame's pixels, read back by an independent decoder (Pillow's and libpng's), in
every mode and at widths that do not fill a byte; tesseract itself reads it in every OCR test."""

from __future__ import annotations

import io
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from sandbox.extractors import ocr


def _noise(mode: str, size: tuple[int, int], seed: int) -> Image.Image:
    bands = len(Image.new(mode, (1, 1)).getbands())
    rng = random.Random(seed)
    if mode == "1":
        grey = Image.frombytes("L", size, rng.randbytes(size[0] * size[1]))
        return grey.convert("1", dither=Image.Dither.NONE)
    return Image.frombytes(mode, size, rng.randbytes(size[0] * size[1] * bands))


def _read_back(png: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(png), formats=["PNG"])
    image.load()
    return image


@given(
    mode=st.sampled_from(["1", "L", "RGB"]),
    width=st.integers(1, 70),
    height=st.integers(1, 9),
    seed=st.integers(0, 2**16),
)
def test_the_png_holds_the_frame_s_own_pixels(
    mode: str, width: int, height: int, seed: int
) -> None:
    frame = _noise(mode, (width, height), seed)
    back = _read_back(ocr.encode_for_tesseract(frame))
    assert (back.mode, back.size) == (mode, (width, height))
    assert back.tobytes() == frame.tobytes()


@pytest.mark.parametrize(("mode", "handed"), [("P", "L"), ("I;16", "L"), ("CMYK", "RGB")])
def test_other_modes_are_handed_on_as_grey_or_rgb_by_their_bands(mode: str, handed: str) -> None:
    frame = _noise("RGB", (33, 7), 1).convert(mode)
    back = _read_back(ocr.encode_for_tesseract(frame))
    assert back.mode == handed and back.tobytes() == frame.convert(handed).tobytes()


def test_transparent_pixels_are_laid_on_white() -> None:
    """Converted straight to RGB, a transparent background turns black and hides dark text."""
    frame = Image.new("RGBA", (20, 10), (0, 0, 0, 0))
    frame.putpixel((3, 3), (0, 0, 0, 255))
    back = _read_back(ocr.encode_for_tesseract(frame))
    assert back.getpixel((0, 0)) == (255, 255, 255) and back.getpixel((3, 3)) == (0, 0, 0)


def test_a_page_s_png_is_far_smaller_than_its_pixels() -> None:
    """tesseract reads stdin a byte at a time: what it is handed must stay compressed."""
    page = Image.new("L", (2480, 3508), 255)
    for row in range(100, 3400, 40):
        page.paste(_noise("L", (2000, 20), row), (200, row))
    assert len(ocr.encode_for_tesseract(page)) < 2480 * 3508 / 2
