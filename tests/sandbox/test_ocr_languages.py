"""A missing OCR language pack is named by the Debian package to install: at start by the
commands, and by a job's reason when a worker meets it anyway."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.errors import ParserError
from sandbox.limits import ParseLimits
from sandbox.ocr_languages import debian_package, missing, missing_from_complaint
from sandbox.runner import SandboxRunner


@pytest.mark.parametrize(
    ("language", "package"),
    [
        ("eng", "tesseract-ocr-eng"),
        ("chi_sim", "tesseract-ocr-chi-sim"),
        ("chi_sim_vert", "tesseract-ocr-chi-sim-vert"),
        ("script/Latin", "tesseract-ocr-script-latn"),
        ("script/Japanese_vert", "tesseract-ocr-script-jpan-vert"),
        ("script/HanT", "tesseract-ocr-script-hant"),
        ("HanT", "tesseract-ocr-script-hant"),  # as Debian installs the script models
        ("Japanese_vert", "tesseract-ocr-script-jpan-vert"),
    ],
)
def test_each_language_is_named_by_its_debian_package(language: str, package: str) -> None:
    assert debian_package(language) == package


def test_what_is_missing_is_named_with_what_is_installed() -> None:
    assert missing(["eng+hin", "hin"], ("eng", "hin", "osd")) is None
    assert missing(["eng+deu", "kor"], ("eng", "osd")) == (
        "OCR language 'deu', 'kor' is not installed on this host (installed: eng, osd); "
        "install the Debian package: apt-get install tesseract-ocr-deu tesseract-ocr-kor"
    )


def test_tesseracts_complaint_is_read_for_the_language_it_lacks() -> None:
    complaint = (
        b"Error opening data file /usr/share/tesseract-ocr/5/tessdata/script/Cyrillic"
        b".traineddata\nPlease make sure the TESSDATA_PREFIX environment variable is set"
    )
    assert missing_from_complaint(complaint) == (
        "OCR language 'script/Cyrillic' is not installed on this host; install the Debian "
        "package: apt-get install tesseract-ocr-script-cyrl"
    )
    assert missing_from_complaint(b"Error in pixReadMem: Unknown format") is None


def test_a_job_that_meets_a_missing_pack_names_it(runner: SandboxRunner, corpus_dir: Path) -> None:
    scan = (corpus_dir / "tesseract_phototest.tif").read_bytes()
    with pytest.raises(ParserError, match="apt-get install tesseract-ocr-zzz"):
        runner.run("image", "image/tiff", scan, ParseLimits(ocr_language="zzz"))


@pytest.mark.parametrize("ocr_language", ["eng+zzz", "zzz+eng"])
def test_a_pack_missing_from_models_read_together_fails_the_job_too(
    runner: SandboxRunner, corpus_dir: Path, ocr_language: str
) -> None:
    """tesseract reads with the models of a '+' group it could load and exits 0: the page was
    answered as read in a language it was not read in."""
    scan = (corpus_dir / "tesseract_phototest.tif").read_bytes()
    with pytest.raises(ParserError, match="OCR language 'zzz' is not installed on this host"):
        runner.run("image", "image/tiff", scan, ParseLimits(ocr_language=ocr_language))


def test_a_choice_named_twice_is_tried_once() -> None:
    assert ParseLimits(ocr_language="eng,hin,hin,eng").ocr_languages == ("eng", "hin")
