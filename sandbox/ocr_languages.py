"""tesseract's language names and the Debian packages that carry them.

A missing language pack is an operator's fix, so every message about one names the package
to install (``tesseract-ocr-chi-sim`` for ``chi_sim``, ``tesseract-ocr-script-latn`` for
``script/Latin``), not tesseract's "Error opening data file".
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

_MISSING_DATA = re.compile(rb"Error opening data file (\S+)\.traineddata")
#: tesseract's script models by the ISO 15924 code Debian names their packages with.
_SCRIPT_CODES = {
    "Arabic": "arab", "Armenian": "armn", "Bengali": "beng", "Canadian_Aboriginal": "cans",
    "Cherokee": "cher", "Cyrillic": "cyrl", "Devanagari": "deva", "Ethiopic": "ethi",
    "Fraktur": "frak", "Georgian": "geor", "Greek": "grek", "Gujarati": "gujr",
    "Gurmukhi": "guru", "Hangul": "hang", "Hangul_vert": "hang-vert", "HanS": "hans",
    "HanS_vert": "hans-vert", "HanT": "hant", "HanT_vert": "hant-vert", "Hebrew": "hebr",
    "Japanese": "jpan", "Japanese_vert": "jpan-vert", "Kannada": "knda", "Khmer": "khmr",
    "Lao": "laoo", "Latin": "latn", "Malayalam": "mlym", "Myanmar": "mymr", "Oriya": "orya",
    "Sinhala": "sinh", "Syriac": "syrc", "Tamil": "taml", "Telugu": "telu", "Thaana": "thaa",
    "Thai": "thai", "Tibetan": "tibt", "Vietnamese": "viet",
}  # fmt: skip


def debian_package(language: str) -> str:
    """The Debian package holding ``language``'s traineddata."""
    if language.startswith("script/"):
        script = language.removeprefix("script/")
        code = _SCRIPT_CODES.get(script, script.lower().replace("_", "-"))
        return f"tesseract-ocr-script-{code}"
    return "tesseract-ocr-" + language.lower().replace("_", "-")


def names(choices: Iterable[str]) -> list[str]:
    """Every language named by OCR language choices (``eng+deu``, ``hin``), in order."""
    return list(dict.fromkeys(part for choice in choices for part in choice.split("+")))


def _not_installed(absent: list[str], installed: Collection[str] | None) -> str:
    """The one wording of a missing pack: what is absent, what is there (when known), and the
    packages to install."""
    there = "" if installed is None else f" (installed: {', '.join(sorted(installed)) or 'none'})"
    packages = " ".join(debian_package(name) for name in absent)
    return (
        f"OCR language {', '.join(repr(name) for name in absent)} is not installed on this "
        f"host{there}; install the Debian package: apt-get install {packages}"
    )


def missing(choices: Iterable[str], installed: Collection[str]) -> str | None:
    """Why ``choices`` cannot be read with the ``installed`` languages, or None."""
    absent = [name for name in names(choices) if name not in installed]
    return _not_installed(absent, installed) if absent else None


def missing_from_complaint(stderr: bytes) -> str | None:
    """The language a tesseract run complained it has no data for, worded as :func:`missing`
    words it, or None when the complaint is about something else."""
    found = _MISSING_DATA.search(stderr)
    if found is None:
        return None
    parts = found.group(1).decode("ascii", errors="replace").split("/")
    # The script models live in a directory of their own: script/Latin.traineddata.
    language = "/".join(parts[-2:]) if len(parts) > 1 and parts[-2] == "script" else parts[-1]
    return _not_installed([language], None)
