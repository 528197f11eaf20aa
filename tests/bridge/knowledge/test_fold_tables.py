"""bridge/knowledge/fold_tables.py is what its generator makes from this machine's ICU and Python,
and it says what Unicode's data says about the characters the issue's disguises used."""

from __future__ import annotations

import re
import unicodedata
from typing import get_args

import pytest

from bridge.knowledge import fold_tables
from sandbox import render_folds
from sandbox.document import FurnitureRole
from tests import generate_fold_tables
from tests.uts39 import icu, skeleton


def test_the_tables_are_what_the_generator_makes_today() -> None:
    """A change of ICU (Debian's libicu) or of Python's Unicode database fails here until
    ``python -m tests.generate_fold_tables`` is run again."""
    assert f"ICU {icu().version} (Unicode {icu().unicode_version})" == fold_tables.SOURCE
    assert unicodedata.unidata_version == fold_tables.UNICODE_VERSION
    assert generate_fold_tables.TABLES.read_text(encoding="ascii") == generate_fold_tables.render()
    assert render_folds.SOURCE == fold_tables.SOURCE
    rendered = generate_fold_tables.RENDER_FOLDS.read_text(encoding="ascii")
    assert rendered == generate_fold_tables.render_folds()


def test_the_renderers_table_holds_every_character_of_its_own_lines() -> None:
    """sandbox/render_folds.py folds the characters of the lines only the renderer writes;
    a word added to them must be in the generator's list, or its look-alikes pass."""
    words = " ".join([*get_args(FurnitureRole), "[page 0123456789]", "[airlock: enclosed]"])
    assert set(words) <= set(generate_fold_tables.RENDERED)


def test_icu_applies_unicodes_confusables() -> None:
    """The data source itself, on the issue's examples (UTS #39's own: "m" has the skeleton
    "rn", Cyrillic and Greek capitals that of the Latin ones)."""
    assert skeleton("ЅΥЅΤΕΜ") == "SYSTEM"
    assert skeleton("АТТАСНМЕNТ") == "ATTACHMENT"
    assert skeleton("system") == "systern"
    assert skeleton("|") == skeleton("1") == skeleton("I") == "l"


def _members(body: str) -> re.Pattern[str]:
    return re.compile(f"[{body}]")


@pytest.mark.parametrize(
    ("char", "folded"),
    [
        ("Ѕ", "s"),  # Cyrillic
        ("Υ", "y"),  # Greek
        ("ꜱ", "s"),  # small capital S: UTS #39 keeps it apart, the table does not
        ("ᴍ", "rn"),  # small capital M reads as M, whose skeleton is "rn"
        ("т", "t"),  # Cyrillic te, whose skeleton is small capital T
        ("ǀ", "l"),  # dental click, a letter drawn as "|"
    ],
)
def test_look_alike_letters_fold_to_what_they_show(char: str, folded: str) -> None:
    assert _members(fold_tables.LETTER_FOLDS[folded]).match(char)
    assert _members(fold_tables.LETTERS).match(char)


@pytest.mark.parametrize(("char", "folded"), [("|", "l"), ("0", "o"), ("：", ":"), ("⚠", None)])
def test_symbols_fold_apart_from_letters(char: str, folded: str | None) -> None:
    """ "|" and "0" stand for letters inside a word, yet a line starting with them starts with
    no letter; "⚠" is nothing but a symbol."""
    assert not _members(fold_tables.LETTERS).match(char)
    if folded is not None:
        assert _members(fold_tables.SYMBOL_FOLDS[folded]).match(unicodedata.normalize("NFKD", char))


@pytest.mark.parametrize(
    "char", ["\u034f", "\ufe0f", "\U000e0041", "\u200b", "\u00ad", "\u3164", "\u2800", "\U000e0100"]
)
def test_what_shows_nothing_is_ignorable(char: str) -> None:
    assert _members(fold_tables.IGNORABLE).match(char)
