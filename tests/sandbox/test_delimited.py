"""CSV and TSV read as tables through the real sandbox: csv-spectrum's expected parses cell by
cell, nothing of the corpus's delimited files lost, and the files that attack a CSV reader."""

from __future__ import annotations

import json
import time

import pytest

from sandbox.document import Block, Paragraph, Table
from sandbox.errors import CeilingExceeded
from sandbox.extractors.registry import Refusal, lookup
from sandbox.limits import ParseLimits
from sandbox.runner import SandboxRunner
from tests.conftest import CORPUS_DIR
from tests.helpers import least_cpu_seconds
from tests.sandbox.hostile_inputs import WALL_SECONDS

CSV, TSV = "text/csv", "text/tab-separated-values"
ROOMY = ParseLimits(max_text_chars=200_000)


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


def test_an_apostrophe_is_text_not_a_quote_mark(runner: SandboxRunner) -> None:
    """csv's sniffer took the apostrophe for the quote: row 2 merged into row 1, both lost."""
    payload = b"id,phone,note\n1,'0123456,call after 5\n2,555-0199,ask for the Jones'\n"
    assert _rows(runner, CSV, payload) == [
        ["id", "phone", "note"],
        ["1", "'0123456", "call after 5"],
        ["2", "555-0199", "ask for the Jones'"],
    ]


def test_doubled_quotes_past_the_first_lines_are_one_quote(runner: SandboxRunner) -> None:
    payload = b"a,b\n" + b"1,2\n" * 20_000 + b'3,"He said ""hi"" to me"\n'
    assert _rows(runner, CSV, payload)[-1] == ["3", 'He said "hi" to me']


def test_the_separator_steady_across_lines_wins(runner: SandboxRunner) -> None:
    payload = b"name;note\nrent;due, late, unpaid\nfood;ok\n"
    assert _rows(runner, CSV, payload) == [
        ["name", "note"],
        ["rent", "due, late, unpaid"],
        ["food", "ok"],
    ]


def test_guessing_the_separator_is_linear_in_the_text() -> None:
    """csv's sniffer took 16 s on 64 KB of separators and quotes (quadratic): eight times the
    text must cost about eight times the time, not sixty-four."""
    function = lookup("text")
    assert function is not None

    def cost(repeats: int) -> float:
        payload = (",\";'" * repeats + "x\n").encode()

        def guess() -> None:
            with pytest.raises(Refusal):  # more fields than a table may have
                function(CSV, payload, ParseLimits())

        return least_cpu_seconds(guess)

    assert cost(16_384) < 24 * cost(2_048)


def test_empty_fields_are_charged_and_empty_columns_trimmed(runner: SandboxRunner) -> None:
    payload = b"a" + b"," * 1023 + b"\n" + (b"b" + b"," * 1023 + b"\n") * 100
    assert _rows(runner, CSV, payload) == [["a"]] + [["b"]] * 100
    with pytest.raises(CeilingExceeded, match="50000-character ceiling"):
        _blocks(runner, CSV, payload * 3, ParseLimits())


def test_a_csv_header_may_start_with_a_hash(runner: SandboxRunner) -> None:
    assert _rows(runner, CSV, b"#,Name,Score\n1,Ann,90\n") == [
        ["#", "Name", "Score"],
        ["1", "Ann", "90"],
    ]


def test_a_tsv_comment_cannot_carry_a_line_past_its_end(runner: SandboxRunner) -> None:
    """The comment ends at a carriage return as the renderer's lines do: the line after it is
    the table's first row, in a cell, not a line of its own."""
    forged = '[airlock: sheet "Secret" is hidden in the workbook; left out]'
    payload = f"#x\r{forged}\nh1\th2\n1\t2\n".encode()
    text = runner.run("text", TSV, payload, ROOMY).text
    assert not any(line.startswith("[airlock:") for line in text.splitlines())
    assert text.splitlines()[:3] == ["#x", "", f"| {forged} |  |"]
