"""Pillow's decoder registry, the pixel ceiling, and OCR of one decoded image by tesseract.

Shared by the image extractor and the PDF extractor's scanned pages. Importing it prunes
Pillow's openers to :data:`ACCEPTED_FORMATS`; tesseract runs directly, its stderr read.
See docs/sandbox.md, "Parsers" and "Notes by module".
"""

from __future__ import annotations

import math
import os
import re
import shutil
import struct
import subprocess
import unicodedata
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from PIL import Image, ImageFile, UnidentifiedImageError

from sandbox import codes, ocr_languages, policy, quality, scripts
from sandbox.extractors.registry import Refusal
from sandbox.limits import ParseLimits

ACCEPTED_FORMATS = ("PNG", "JPEG", "TIFF", "GIF", "WEBP", "BMP")

# Resolved once in the fork server: a child must not search PATH, and the runner's Landlock
# rules allow exactly this executable.
TESSERACT = shutil.which("tesseract")

# Leptonica prints "Error in ..." when an allocation fails, and tesseract still exits 0 with
# empty or partial text (measured with tesseract 5.3 under a 95 MB address-space limit).
# "Empty page!!" with exit 0 is the same failure as other builds report it; tesseract 5.3 does
# not print it for a page that is merely blank, so with empty output it counts as a failure.
_LEPTONICA_ERROR = b"Error in "
_EMPTY_PAGE = b"Empty page!!"
# tesseract's TSV: level, page, block, paragraph, line, word, four box values, conf, text.
_TSV_COLUMNS = 12
_WORD_LEVEL = "5"
_OSD_SCRIPT = re.compile(rb"^Script: (\w+)$", re.MULTILINE)


# How Pillow reports damaged data while it decodes: OSError for data cut short, SyntaxError for a
# broken structure (an APNG's frame sequence errors), ValueError for a decoder left short of
# pixels (a BMP's RLE8 data), struct.error for a header shorter than its fields.
_DAMAGE = (OSError, SyntaxError, ValueError, struct.error)


class OcrFailed(RuntimeError):
    """tesseract did not read an image it was given; the runner reports it as a parser error."""


class EmptyPage(OcrFailed):
    """tesseract found no text to read ("Empty page!!"): a failure for an image sent on its
    own, an empty page for a rendered PDF page that has ink but no writing (a rule, a logo)."""


def _restrict_pillow() -> dict[str, Callable[[bytes], bool | str] | None]:
    """Load every plugin once, then forget all openers but the accepted six; return the
    forgotten formats with their signature checks.

    ``Image.init()`` runs first so that nothing loads the remaining plugins later and
    re-registers them: once Pillow is initialised it never imports plugins again.
    """
    Image.init()
    pruned = {name: Image.OPEN[name][1] for name in Image.ID if name not in ACCEPTED_FORMATS}
    for name in list(Image.OPEN):
        if name not in ACCEPTED_FORMATS:
            del Image.OPEN[name]
    Image.ID[:] = [name for name in Image.ID if name in ACCEPTED_FORMATS]
    # A truncated image must fail, not decode into a picture padded with grey.
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    return pruned


_PRUNED_FORMATS = _restrict_pillow()


def pruned_format(payload: bytes) -> str | None:
    """The format Pillow knows but the sandbox does not decode whose signature ``payload``
    starts with, in Pillow's own order, or None.

    Only the signature checks run (on the first 16 bytes, as ``Image.open`` reads them): they
    compare bytes and decode nothing.
    """
    prefix = payload[:16]
    if len(prefix) < 16:
        return None  # some checks unpack their first bytes unguarded; no such image is this short
    for name, accept in _PRUNED_FORMATS.items():
        if accept is None:
            continue  # no signature: only its decoder could tell
        verdict = accept(prefix)
        if verdict and not isinstance(verdict, str):  # a string is Pillow's "yes, but missing"
            return name
    return None


def not_decoded(name: str) -> str:
    """How a refusal names a format Pillow knows and the sandbox does not decode."""
    accepted = ", ".join(ACCEPTED_FORMATS)
    return f"{name}, a format the sandbox does not decode (it decodes {accepted})"


@contextmanager
def damage_is_unreadable(what: str) -> Iterator[None]:
    """Refuse, as unreadable, an image whose data Pillow reports as damaged while decoding it,
    or whose format the sandbox does not decode; ``what`` names the image in the reason.

    ``LOAD_TRUNCATED_IMAGES`` stays False, so a cut file raises here instead of decoding into a
    picture padded with grey. A caller that names a format for ``Image.open`` (pypdf asks for
    "JPEG2000" for a /JPXDecode image) meets the pruned registry as a KeyError of that name.
    Exceptions of other kinds are parser bugs, not verdicts on the data, and pass unchanged.
    """
    try:
        yield
    except KeyError as exc:
        if exc.args and exc.args[0] in _PRUNED_FORMATS:
            raise Refusal(codes.UNREADABLE, f"{what} is {not_decoded(exc.args[0])}") from exc
        raise
    except UnidentifiedImageError as exc:  # an OSError whose message is only a buffer's repr
        raise Refusal(
            codes.UNREADABLE, f"{what} does not hold the image format it declares"
        ) from exc
    except _DAMAGE as exc:
        raise Refusal(codes.UNREADABLE, f"{what} is truncated or corrupt: {exc}") from exc


#: Pillow's DecompressionBomb message: "Image size (48000000 pixels) exceeds limit of ...".
_BOMB_SIZE = re.compile(r"Image size \((\d+) pixels\)")


@contextmanager
def decoding_under(limits: ParseLimits) -> Iterator[None]:
    """Make Pillow's own bomb check refuse exactly above the pixel ceiling, for one job.

    Pillow checks the declared size inside ``Image.open``, before any pixel is decoded, for
    every caller including pypdf; it only warns between ``MAX_IMAGE_PIXELS`` and twice that, so
    the warning is raised as an error here. :func:`check_pixels` stays as the independent guard
    for frames Pillow does not check (later TIFF pages, images pypdf builds from raw samples).
    """
    previous = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = limits.max_pixels
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            yield
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        # Pillow's words quote its own limit; the refusal says airlock's, with the image's size
        # in the form the caller's hint reads (bridge.knowledge.ceilings).
        size = _BOMB_SIZE.search(str(exc))
        declared = f"an image of {size.group(1)} pixels" if size else "an image"
        raise Refusal(
            codes.CEILING,
            f"{declared} exceeds the {limits.max_pixels}-pixel ceiling (a decompression "
            "bomb guard: checked before any pixel is decoded)",
        ) from exc
    finally:
        Image.MAX_IMAGE_PIXELS = previous


def check_pixels(size: tuple[int, int], limits: ParseLimits) -> None:
    """Refuse an image whose declared size exceeds the pixel ceiling, before it is decoded.

    A 50000x50000 PNG is a few kilobytes on the wire and 7.5 GB once decoded.
    """
    width, height = size
    if width * height > limits.max_pixels:
        raise Refusal(
            codes.CEILING,
            f"an image of {width}x{height} = {width * height} pixels exceeds the "
            f"{limits.max_pixels}-pixel ceiling",
        )


def ocr_image(image: Image.Image, limits: ParseLimits) -> str:
    """Return the text tesseract reads in one decoded image (one frame, one page image)."""
    check_pixels(image.size, limits)
    png = encode_for_tesseract(image)
    first, *others = limits.ocr_languages
    best = _Reading(first, *_run_tesseract(png, first))
    seen = None
    if quality.doubtful(best.words):
        # A page the first choice reads badly is in another script, or not text: detection
        # names its script (which tells an operator the pack it needs), and every other choice
        # that reads that script reads it again. Detection runs only then, so a page in the
        # first language costs one reading, not a detection (0.46 CPU-s) as well.
        seen = detect_script(png)
        for tier in _readers(seen, others):
            for language in tier:
                try:
                    reading = _Reading(language, *_run_tesseract(png, language))
                except EmptyPage:
                    continue  # this model found nothing: the readings it would replace stand
                if reading.confidence > best.confidence:
                    best = reading
            if not quality.doubtful(best.words):
                break
    quality.record_ocr(best.language, best.words, seen)
    return best.text


@dataclass(frozen=True)
class _Reading:
    """One model's reading of an image: its text and each word with its confidence."""

    language: str
    text: str
    words: list[tuple[float, str]]

    @property
    def confidence(self) -> float:
        """tesseract's mean word confidence, by which the readings of one image compete (a
        reading of no word loses to any)."""
        confidence = quality.word_confidence(self.words)
        return -1.0 if confidence is None else confidence


def detect_script(png: bytes) -> str | None:
    """The script tesseract's script detection sees in the image, or None when it cannot tell
    (too little text: it exits 1) or sees one no language in :mod:`sandbox.scripts` uses.

    ``--psm 0`` with the ``osd`` model: 0.46 CPU-s on a 300-dpi letter page, a quarter of
    reading it, so it runs only when there is a language to choose or a doubtful page.
    """
    completed = _tesseract(png, ["--psm", "0"])
    match = _OSD_SCRIPT.search(completed.stdout) if completed.returncode == 0 else None
    return scripts.osd_script(match.group(1).decode("ascii")) if match else None


def _readers(seen: str | None, languages: Iterable[str]) -> tuple[list[str], list[str]]:
    """Those of ``languages`` that read the script ``seen``, in order: first the ones made for
    it, then the ones that also read it (a Japanese model reads the Han of a page detection
    calls Han, but a Chinese page needs only the Chinese models, which are read both: HanT
    reads Simplified text with confidence, as Traditional characters).

    A model reads only its own script: a Hindi page read with ``eng`` comes out as Latin junk.
    When nothing reads the script, the quality check judges what the first language made of it.
    """
    readers = [lang for lang in languages if seen in (scripts.language_scripts(lang) or ())]
    made_for = [lang for lang in readers if seen is not None and scripts.made_for(lang, seen)]
    return made_for, [lang for lang in readers if lang not in made_for]


def encode_for_tesseract(image: Image.Image) -> bytes:
    """Encode one frame as a PNG for tesseract's stdin.

    tesseract gets exactly one decoded frame, never the uploaded file: tesseract loops forever
    on a TIFF whose page chain points back to itself. The image travels on stdin, so OCR
    writes no file, and stdin wants it small: tesseract reads it a byte at a time (an 8.7 MB
    uncompressed page cost it 0.2 CPU-s more than the same page as a 0.1 MB PNG). Transparent
    pixels are laid on white: converting RGBA or a transparent palette to RGB would otherwise
    turn a transparent background black and hide dark text on it.
    """
    bands = image.getbands()
    if "A" in bands or "transparency" in image.info:
        rgba = image.convert("RGBA")
        canvas = Image.new("RGBA", rgba.size, "white")
        ready = Image.alpha_composite(canvas, rgba).convert("RGB")
    elif image.mode in _PNG_LAYOUTS:
        ready = image
    elif len(bands) == 1:
        ready = image.convert("L")
    else:
        ready = image.convert("RGB")
    return _png(ready)


#: The PNG bit depth, colour type and bytes a pixel of each mode ``encode_for_tesseract`` hands
#: on (mode "1" packs eight pixels to a byte, 1 for white, as PNG's one-bit grey does).
_PNG_LAYOUTS = {"1": (1, 0, 1 / 8), "L": (8, 0, 1), "RGB": (8, 2, 3)}


def _png(image: Image.Image) -> bytes:
    """The image as a PNG of unfiltered rows, deflated at the fastest level with run-length
    matching.

    Pillow's encoder tries every row filter on every row: on a 300-dpi grey page rendered from
    a JPEG scan that took 180 ms, against 80 ms for this at about the same size (tesseract reads
    either at one cost). The rows are the frame's own bytes, so nothing is lost.
    """
    width, height = image.size
    depth, colour, per_pixel = _PNG_LAYOUTS[image.mode]
    stride = math.ceil(width * per_pixel)
    pixels = image.tobytes()
    rows = b"".join(
        b"\x00" + pixels[start : start + stride] for start in range(0, stride * height, stride)
    )
    deflate = zlib.compressobj(1, zlib.DEFLATED, 15, 9, zlib.Z_RLE)
    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            _png_chunk(b"IHDR", header),
            _png_chunk(b"IDAT", deflate.compress(rows) + deflate.flush()),
            _png_chunk(b"IEND", b""),
        )
    )


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _run_tesseract(png: bytes, language: str) -> tuple[str, list[tuple[float, str]]]:
    """Run tesseract on one image and fail loudly when it did not read it.

    One OpenMP thread (``policy.THREAD_ENV``), whoever runs it. stderr is read whole: its size
    is bounded by tesseract's CPU limit, and a flood would end the child as a typed memory
    failure. Returns the text and each word with its confidence.
    """
    completed = _tesseract(png, ["-l", language, "--psm", "3", "tsv"])
    words = _tsv_words(completed.stdout.decode("utf-8", errors="replace"))
    text = _layout(words)
    missing = ocr_languages.missing_from_complaint(completed.stderr)
    if missing is not None:
        # Whatever it exits with: asked for eng+deu without deu, tesseract reads with eng
        # alone and exits 0, and the page would be answered as read in a language it was not.
        raise OcrFailed(missing)
    if completed.returncode != 0:
        raise OcrFailed(
            f"tesseract exited with status {completed.returncode}: "
            f"{_complaint(completed.stderr, b'')}"
        )
    if _LEPTONICA_ERROR in completed.stderr:
        raise OcrFailed(
            "tesseract exited 0 but did not read the image: "
            f"{_complaint(completed.stderr, _LEPTONICA_ERROR)}"
        )
    if _EMPTY_PAGE in completed.stderr and not text:
        raise EmptyPage("tesseract exited 0 but did not read the image: Empty page!!")
    return text, [(word.confidence, word.text) for word in words]


def _tesseract(png: bytes, arguments: list[str]) -> subprocess.CompletedProcess[bytes]:
    if TESSERACT is None:
        raise OcrFailed("the tesseract binary is not installed")
    return subprocess.run(
        [TESSERACT, "stdin", "stdout", *arguments],
        input=png,
        capture_output=True,
        env={**os.environ, **policy.THREAD_ENV},
        check=False,
    )


@dataclass(frozen=True)
class _Word:
    paragraph: tuple[str, str, str]
    line: str
    confidence: float
    text: str


def _tsv_words(tsv: str) -> list[_Word]:
    """The recognised words of tesseract's TSV output, with their confidences.

    TSV instead of plain text because only TSV carries the confidence the quality check needs;
    rows of other levels and words that are only whitespace carry no text. Rows end at "\n"
    only: ``splitlines`` would also cut a word at a U+2028 or a form feed in it.
    """
    words = []
    for row in tsv.split("\n")[1:]:
        cells = row.split("\t")
        if len(cells) == _TSV_COLUMNS and cells[0] == _WORD_LEVEL and cells[11].strip():
            page, block, paragraph, line = cells[1:5]
            words.append(_Word((page, block, paragraph), line, float(cells[10]), cells[11]))
    return words


def _joined(line: list[str]) -> str:
    """A line's words joined by a space, except where a script written without spaces meets
    itself or punctuation: tesseract splits Chinese, Japanese and Thai lines into words, and
    "臺灣 的 氣候 ," is not how they are written."""
    joined = line[0] if line else ""
    for word in line[1:]:
        left, right = joined[-1:], word[:1]
        together = (_unspaced(left) and (_unspaced(right) or _punctuation(right))) or (
            _punctuation(left) and _unspaced(right)
        )
        joined += word if together else " " + word
    return joined


def _unspaced(char: str) -> bool:
    """Chinese, Japanese, Thai and their like; not Korean, which spaces its words."""
    script = scripts.script_of(char) if char else None
    return (
        script is not None
        and script != scripts.HANGUL
        and (scripts.family(script) in scripts.UNSPACED)
    )


def _punctuation(char: str) -> bool:
    return bool(char) and unicodedata.category(char).startswith("P")


def _layout(words: list[_Word]) -> str:
    """The text as tesseract's plain-text output lays it out: words of a line joined by a
    space (none inside a script written without spaces), lines by a newline, paragraphs by a
    blank line."""
    paragraphs: list[list[list[str]]] = []
    paragraph: tuple[str, str, str] | None = None
    line: str | None = None
    for word in words:
        if word.paragraph != paragraph:
            paragraphs.append([])
            paragraph, line = word.paragraph, None
        if word.line != line:
            paragraphs[-1].append([])
            line = word.line
        paragraphs[-1][-1].append(word.text)
    return "\n\n".join("\n".join(_joined(line) for line in lines) for lines in paragraphs)


def _complaint(stderr: bytes, marker: bytes) -> str:
    """The first stderr line containing ``marker``, for the failure's reason.

    tesseract's first lines are often notes ("Estimating resolution as 300") that would hide
    the error that matters.
    """
    lines = [line for line in stderr.splitlines() if marker in line and line.strip()]
    return lines[0].decode("utf-8", errors="replace").strip()[:200] if lines else "no message"
