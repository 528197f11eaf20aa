"""CSV and TSV read as tables through the real sandbox: csv-spectrum's expected parses cell by
cell, nothing of the corpus's delimited files lost, and the files that attack a CSV reader."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from sandbox.document import Block, Paragraph, Table
from sandbox.errors import CeilingExceeded
from sandbox.limits import ParseLimits
from sandbox.runner import SandboxRunner
from tests.conftest import CORPUS_DIR
from tests.sandbox.hostile_inputs import LIMITS, WALL_SECONDS

CSV, TSV = "text/csv", "text/tab-separated-values"
ROOMY = ParseLimits(max_text_chars=200_000)


@pytest.fixture(scope="module")
def runner() -> Iterator[SandboxRunner]:
    with SandboxRunner(LIMITS) as sandbox:
        yield sandbox


def _blocks(
    runner: SandboxRunner, media_type: str, payload: bytes, limits: ParseLimits = ROOMY
) -> list[Block]:
    document = runner.run("text", media_type, payload, limits).document
    assert document is not None
    return document.blocks


def _rows(runner: SandboxRunner, media_type: str, payload: bytes) -> list[list[str]]:
    [table] = [block for block in _blocks(runner, media_type, payload) if isinstance(block, Table)]
    assert table.header
    return table.rows


@pytest.mark.parametrize("name", ["csv-spectrum_quotes_and_newlines", "csv-spectrum_utf8"])
def test_a_csv_gives_csv_spectrums_expected_records(runner: SandboxRunner, name: str) -> None:
    records = json.loads((CORPUS_DIR / f"{name}.expected.json").read_text())
    header, *rows = _rows(runner, CSV, (CORPUS_DIR / f"{name}.csv").read_bytes())
    assert header == list(records[0])
    assert rows == [list(record.values()) for record in records]


@pytest.mark.parametrize(
    ("name", "media_type"),
    [
        ("tika_test-columnar.csv", CSV),
        ("tika_langdetect-text-test.tsv", TSV),
        ("tika_migration-overlay.tsv", TSV),
    ],
)
def test_nothing_of_a_delimited_file_is_lost(
    runner: SandboxRunner, name: str, media_type: str
) -> None:
    payload = (CORPUS_DIR / name).read_bytes()
    blocks = _blocks(runner, media_type, payload)
    read = " ".join(
        block.text if isinstance(block, Paragraph) else " ".join(" ".join(r) for r in block.rows)
        for block in blocks
        if isinstance(block, Paragraph | Table)
    ).split()
    truth = (CORPUS_DIR / name.rsplit(".", 1)[0]).with_suffix(".expected.txt").read_text()
    # A CSV's quotes and commas are syntax, not content (this one quotes no comma).
    syntax = str.maketrans('",', "  ")
    expected = truth.translate(syntax).split() if media_type == CSV else truth.split()
    assert read == expected


def test_a_tsvs_comment_lines_are_a_paragraph_above_its_table(runner: SandboxRunner) -> None:
    payload = (CORPUS_DIR / "tika_migration-overlay.tsv").read_bytes()
    first, table = _blocks(runner, TSV, payload)[:2]
    assert isinstance(first, Paragraph) and first.text.startswith("# Licensed to the Apache")
    assert isinstance(table, Table) and not table.rows[0][0].startswith("#")


def test_a_semicolon_csv_keeps_its_decimal_commas(runner: SandboxRunner) -> None:
    assert _rows(runner, CSV, b"name;amount\nrent;900,50\n") == [
        ["name", "amount"],
        ["rent", "900,50"],
    ]


def test_a_tsv_field_opening_with_a_quote_is_text_not_quoting(runner: SandboxRunner) -> None:
    payload = b'a\t"b\tc\nd\te\tf\n'
    assert _rows(runner, TSV, payload) == [["a", '"b', "c"], ["d", "e", "f"]]


def test_an_unclosed_quote_loses_nothing(runner: SandboxRunner) -> None:
    rows = _rows(runner, CSV, b'name,note\nrent,"due\nfood,late\n')
    assert " ".join(cell for row in rows for cell in row).split() == [
        "name", "note", "rent", "due", "food,late"
    ]  # fmt: skip


def test_a_100_mb_field_is_refused_by_its_length_within_the_wall(runner: SandboxRunner) -> None:
    payload = b'a,b\n1,"' + b"x" * 100_000_000 + b'"\n'
    started = time.monotonic()
    with pytest.raises(CeilingExceeded, match=r"50000-character ceiling \(one field, at line 2\)"):
        _blocks(runner, CSV, payload, ParseLimits())
    assert time.monotonic() - started < WALL_SECONDS


def test_a_row_wider_than_a_table_may_be_is_refused(runner: SandboxRunner) -> None:
    with pytest.raises(CeilingExceeded, match="line 1 has 1,025 fields, over the 1024 columns"):
        _blocks(runner, CSV, b"," * 1024 + b"\n")


def test_plain_text_stays_a_paragraph(runner: SandboxRunner) -> None:
    assert _blocks(runner, "text/plain", b"a,b\n1,2\n") == [Paragraph("a,b\n1,2\n")]
