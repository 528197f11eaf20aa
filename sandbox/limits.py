"""The ceilings a sandboxed job runs under: ``ParseLimits`` (into the child with each job) and
``SandboxLimits`` (kernel-enforced). See docs/sandbox.md, "Limits".
"""

from __future__ import annotations

from dataclasses import dataclass, fields

MIB = 1024 * 1024


@dataclass(frozen=True)
class ParseLimits:
    """Ceilings checked by the extractors themselves, inside the child.

    ``max_pixels`` bounds one decoded image or frame: a 50000x50000 PNG is a few kilobytes on
    the wire and 7.5 GB once decoded, so the declared size is refused from the header before
    any decoder allocates. ``max_text_chars`` lets an extractor stop early instead of building
    a string the bridge will refuse anyway. With ``ocr`` off, a document that needs OCR is
    answered "needs OCR" instead of being read: a light worker hands it to the OCR queue rather
    than holding its slot for the minutes tesseract takes.

    ``ocr_language`` is a tesseract language ("eng", or "eng+deu" to read with both models), or
    several separated by commas ("eng,hin,kor"): tesseract's script detection then picks, for
    each image, the first one that reads the script it sees. ``admit_unreadable`` hands on text
    the quality check finds unreadable under a first line that says so, instead of refusing it.

    ``fan_out_pages`` is read by the PDF splitter only: a document with more pages than this is
    split for its OCR pages to be read in parallel (0: never split).

    ``max_members`` and ``max_unpacked_bytes`` bound what an e-mail's or an archive's unpacking
    hands back: the files it answers and their decoded bytes together. Past either, the rest
    are named as left out rather than decoded, so a 10,000-attachment message or base64 that
    decodes to gigabytes costs the child a count, not its memory.
    """

    max_pages: int = 20
    max_pixels: int = 40_000_000
    max_text_chars: int = 50_000
    ocr_language: str = "eng"
    ocr: bool = True
    admit_unreadable: bool = False
    fan_out_pages: int = 0
    max_members: int = 1024
    max_unpacked_bytes: int = 8 * MIB

    def __post_init__(self) -> None:
        if (
            min(
                self.max_pages,
                self.max_pixels,
                self.max_text_chars,
                self.max_members,
                self.max_unpacked_bytes,
            )
            < 1
        ):
            raise ValueError("parse limits must be positive")
        if self.fan_out_pages < 0:
            raise ValueError("fan_out_pages must not be negative")
        if not all(
            part.isascii() and part.replace("_", "").isalnum()
            for choice in self.ocr_languages
            for part in choice.split("+")
        ):
            # The language travels to tesseract's command line; only names like 'eng' or
            # 'eng+deu' may, never an option or a path.
            raise ValueError(f"OCR language {self.ocr_language!r} is not a tesseract language name")

    @property
    def ocr_languages(self) -> tuple[str, ...]:
        """The languages to choose among, in order of preference, each once: a choice named
        twice would read a page twice for nothing."""
        return tuple(dict.fromkeys(self.ocr_language.split(",")))


@dataclass(frozen=True)
class SandboxLimits:
    """Kernel-enforced ceilings for one child (defaults documented in docs/sandbox.md)."""

    memory_bytes: int = 1024 * MIB
    cpu_seconds: int = 60
    wall_seconds: float = 120.0
    output_bytes: int = 4 * MIB
    processes: int = 8
    file_size_bytes: int = 64 * MIB
    open_files: int = 64

    def __post_init__(self) -> None:
        for field in fields(self):
            if getattr(self, field.name) <= 0:
                raise ValueError(f"sandbox limit {field.name} must be positive")
