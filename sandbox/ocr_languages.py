"""tesseract's language names and the Debian packages that carry them.

A missing language pack is an operator's fix, so every message about one names the package
to install (``tesseract-ocr-chi-sim`` for ``chi_sim``, ``tesseract-ocr-script-latn`` for
``script/Latin``), not tesseract's "Error opening data file".
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Collection, Iterable

from sandbox import scripts

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


#: The choice that stands for every script model of :data:`SCRIPT_MODELS` installed on the
#: host (``AIRLOCK_OCR_LANGUAGE``'s default is ``eng,scripts``): a page the choices before it
#: read badly is read again with the models of the script tesseract's detection sees in it.
SCRIPTS = "scripts"
#: The script models ``scripts`` stands for, in the order they are tried. Traditional Chinese
#: comes before Simplified, and each vertical model after its horizontal one; the reading with
#: the best confidence wins, so the order only breaks ties.
SCRIPT_MODELS = (
    "HanT", "HanS", "Japanese", "Japanese_vert", "Hangul", "Cyrillic", "Greek", "Arabic",
    "Hebrew", "Devanagari", "Thai",
)  # fmt: skip


def script_package(script: str) -> str | None:
    """The Debian package of the script model made for ``script`` (``Han``:
    ``tesseract-ocr-script-hant``; :data:`SCRIPT_MODELS` first), or None for a script no model
    known here is made for."""
    for model in (*SCRIPT_MODELS, *_SCRIPT_CODES):
        if scripts.made_for(model, script):
            return debian_package(model)
    return None


def debian_package(language: str) -> str:
    """The Debian package holding ``language``'s traineddata (Debian installs the script
    models beside the languages, as ``HanT``; tesseract's own layout has ``script/HanT``)."""
    script = language.removeprefix("script/")
    if language.startswith("script/") or script in _SCRIPT_CODES:
        code = _SCRIPT_CODES.get(script, script.lower().replace("_", "-"))
        return f"tesseract-ocr-script-{code}"
    return "tesseract-ocr-" + language.lower().replace("_", "-")


def installed() -> tuple[str, ...] | None:
    """The languages this host's tesseract has data for; None when there is no tesseract or
    it cannot say."""
    tesseract = shutil.which("tesseract")
    if tesseract is None:
        return None
    try:
        listing = subprocess.run(
            [tesseract, "--list-langs"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    # The first line is a heading ("List of available languages in ...").
    return tuple(line.strip() for line in listing.splitlines()[1:] if line.strip())


@functools.cache
def _installed_once() -> frozenset[str]:
    """What is installed, asked once per process: it does not change under a running worker,
    and what ``scripts`` expands to is part of the result cache's key."""
    return frozenset(installed() or ())


def expanded(ocr_language: str) -> str:
    """``ocr_language`` with its :data:`SCRIPTS` choice replaced by the script models installed
    on this host (by none when none is). Not cached by its argument: a request names its own,
    and a cache of every one a worker was sent would grow for as long as it runs."""
    choices = ocr_language.split(",")
    if SCRIPTS not in choices:
        return ocr_language
    available = _installed_once()
    models = [model for model in SCRIPT_MODELS if model in available and model not in choices]
    named = (models if choice == SCRIPTS else [choice] for choice in choices)
    return ",".join(dict.fromkeys(name for names in named for name in names))


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
