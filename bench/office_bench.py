"""Office formats side by side: airlock, markitdown and pandoc on the same files, in one run.

    .venv/bin/python bench/office_bench.py [--rounds N] [--cells ROWSxCOLUMNS] [--slides N]

Three tables:

1. **Found**, per corpus file with a ground truth (spreadsheets, CSV, TSV, PPTX, ODT): of the
   truth's non-empty cells (or words, for slides and text), how many each tool's output holds
   (whitespace collapsed; a number compared by value, so "1.0" in a CSV truth matches "1",
   since the truths are CSV exports that format numbers their own way). A peer that fails on
   a file shows ``fail``, one without a reader for the format ``—``.
2. **CPU per cell**, on a generated workbook (default 5,000 rows by 10 columns of text and
   numbers, written as an XLSX) and on the same table as a CSV: the least CPU of ``--rounds``
   runs of each tool, divided by the cells. airlock in-process (the extractor and the renderer,
   the work a child does) and through the sandbox (wall time of a job on a warm child: fork,
   jail, transfer, answer, decode, render); markitdown in its own interpreter, timed inside it
   (no interpreter start counted); pandoc as a process (its start counted, which the large
   workbook amortises).
3. **CPU per slide**, on a generated deck (default 200 slides, each a title, three bullets and
   a 3 x 3 table), the same four ways.

Peers, each skipped (and said so) when missing:
  markitdown   XLSX, XLS, CSV, PPTX        AIRLOCK_PEERS_PYTHON=<a python with
                                           markitdown[xlsx,xls,pptx]>
  pandoc       XLSX, CSV, TSV, PPTX, ODT   on PATH, or the pypandoc_binary of
                                           AIRLOCK_PEERS_PYTHON

The machine is shared: read the speed columns as ratios between tools on the same run.
"""

from __future__ import annotations

import csv
import io
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import pptx  # noqa: E402
from pptx.util import Inches  # noqa: E402

from sandbox.extractors import all as extractors  # noqa: E402
from sandbox.extractors.registry import lookup  # noqa: E402
from sandbox.limits import ParseLimits, SandboxLimits  # noqa: E402
from sandbox.runner import SandboxRunner  # noqa: E402
from tests.in_process import rendered_by  # noqa: E402
from tests.sandbox.spreadsheet_builders import sheet, xlsx  # noqa: E402

CORPUS = Path(os.environ.get("AIRLOCK_CORPUS_DIR", REPO.parent / "shared" / "corpus"))
LIMITS = ParseLimits(max_pages=1000, max_text_chars=50_000_000)
CSV_TYPE, TSV_TYPE = "text/csv", "text/tab-separated-values"
# (file, airlock's kind and media type, the truth, how the truth is laid out)
FILES = (
    ("xlsx2csv_sheets.xlsx", "spreadsheet", "", "xlsx2csv_sheets.expected.txt", "sections"),
    ("xlsx2csv_utf8.xlsx", "spreadsheet", "", "xlsx2csv_utf8.expected.txt", "csv"),
    (
        "xlsx2csv_hyperlinks_continous.xlsm",
        "spreadsheet",
        "",
        "xlsx2csv_hyperlinks_continous.expected.txt",
        "csv",
    ),
    (
        "tika_test-columnar-biff8.xls",
        "spreadsheet",
        "",
        "tika_test-columnar-biff8.reference.txt",
        "csv",
    ),
    (
        "tika_test-columnar-odf.ods",
        "spreadsheet",
        "",
        "tika_test-columnar-odf.reference.txt",
        "csv",
    ),
    ("pango_hello-sheet.xlsx", "spreadsheet", "", "pango_hello-sheet.reference.txt", "lines"),
    (
        "csv-spectrum_quotes_and_newlines.csv",
        "text",
        CSV_TYPE,
        "csv-spectrum_quotes_and_newlines.expected.txt",
        "tsv",
    ),
    ("csv-spectrum_utf8.csv", "text", CSV_TYPE, "csv-spectrum_utf8.expected.txt", "tsv"),
    ("tika_test-columnar.csv", "text", CSV_TYPE, "tika_test-columnar.expected.txt", "csv"),
    (
        "tika_langdetect-text-test.tsv",
        "text",
        TSV_TYPE,
        "tika_langdetect-text-test.expected.txt",
        "tsv",
    ),
    ("pango_hello-slides.pptx", "presentation", "", "pango_hello-slides.expected.txt", "words"),
    ("pango_table.pptx", "presentation", "", "pango_table.expected.txt", "words"),
    ("tika_testOpenOffice2.odt", "odt", "", "tika_testOpenOffice2.expected.txt", "words"),
)
# What each peer reads, by suffix (markitdown has no ODS, TSV or ODT reader; pandoc no XLS or
# ODS). bench/web_bench.py uses the same peers for web pages and books.
MARKITDOWN_READS = {".xlsx", ".xlsm", ".xls", ".csv", ".pptx", ".html", ".epub", ".ipynb"}
MARKITDOWN_READS |= {".eml", ".xml", ".py", ".json"}  # as plain text
PANDOC_READS = {
    ".html": "html",
    ".epub": "epub",
    ".ipynb": "ipynb",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".csv": "csv",
    ".tsv": "tsv",
    ".pptx": "pptx",
    ".odt": "odt",
}

_MARKITDOWN_DRIVER = textwrap.dedent(
    """
    import sys, time
    from markitdown import MarkItDown
    converter = MarkItDown()
    path, rounds = sys.argv[1], int(sys.argv[2])
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        text = converter.convert(path).text_content
        best = min(best, time.process_time() - started)
    sys.stdout.write(f"{best!r}\\n{text}")
    """
)


def _number(cell: str) -> str:
    """A cell compared by value when it is a number: "1.0", "1" and "1.00" are one cell."""
    try:
        value = float(cell.replace(",", ""))
    except ValueError:
        return cell
    if not math.isfinite(value):
        return cell
    return repr(value) if value != int(value) else str(int(value))


def _normal(cell: str) -> str:
    return _number(" ".join(cell.split()))


def _truth_cells(path: Path, layout: str) -> list[str]:
    text = path.read_text()
    if layout == "words":
        rows = [text.split()]
    elif layout == "lines":
        rows = [[line] for line in text.splitlines()]
    elif layout == "tsv":
        rows = [line.split("\t") for line in text.splitlines()]
    else:
        body = "\n".join(line for line in text.splitlines() if not line.startswith("-------- "))
        rows = list(csv.reader(io.StringIO(body)))
    return [_normal(cell) for row in rows for cell in row if cell.strip()]


def _found(cells: list[str], output: str) -> int:
    """How many of ``cells`` are in ``output``: each cell of a table, or a line of plain text."""
    pieces = {_normal(piece) for line in output.splitlines() for piece in line.split("|")}
    flat = " ".join(output.split())
    return sum(1 for cell in cells if cell in pieces or " ".join(cell.split()) in flat)


def _cpu_of_children(command: list[str]) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    completed = subprocess.run(command, capture_output=True, check=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, completed.stdout.decode()


def _pandoc_binary() -> str | None:
    found = shutil.which("pandoc")
    python = os.environ.get("AIRLOCK_PEERS_PYTHON")
    if found is None and python:
        probe = subprocess.run(
            [python, "-c", "import pypandoc; print(pypandoc.get_pandoc_path())"],
            capture_output=True,
            text=True,
            check=False,
        )
        found = probe.stdout.strip() or None
    return found


Peer = Callable[[Path, int], tuple[float, str]]


def _peers() -> dict[str, Peer]:
    peers: dict[str, Peer] = {}
    python = os.environ.get("AIRLOCK_PEERS_PYTHON")
    if python and subprocess.run([python, "-c", "import markitdown"], check=False).returncode == 0:
        driver = Path(tempfile.mkdtemp()) / "markitdown_driver.py"
        driver.write_text(_MARKITDOWN_DRIVER)

        def markitdown(path: Path, rounds: int) -> tuple[float, str]:
            if path.suffix not in MARKITDOWN_READS:
                raise LookupError("not read")
            completed = subprocess.run(
                [python, str(driver), str(path), str(rounds)],
                capture_output=True,
                check=True,
                timeout=1200,
            )
            best, _, text = completed.stdout.decode().partition("\n")
            return float(best), text

        peers["markitdown"] = markitdown
    else:
        print("# markitdown not found: set AIRLOCK_PEERS_PYTHON (see this script's docstring)")
    pandoc = _pandoc_binary()
    if pandoc:

        def run_pandoc(path: Path, rounds: int) -> tuple[float, str]:
            source = PANDOC_READS.get(path.suffix)
            if source is None:
                raise LookupError("not read")
            runs = [
                _cpu_of_children([pandoc, "-f", source, "-t", "gfm", "--wrap=none", str(path)])
                for _ in range(rounds)
            ]
            return min(cpu for cpu, _ in runs), runs[0][1]

        peers["pandoc"] = run_pandoc
    else:
        print("# pandoc not found: skipped")
    return peers


def _airlock_in_process(kind: str, media_type: str, path: Path, rounds: int) -> tuple[float, str]:
    function = lookup(kind)
    assert function is not None
    payload = path.read_bytes()
    best, text = float("inf"), ""
    for _ in range(rounds):
        started = time.process_time()
        text = rendered_by(function)(media_type or "application/octet-stream", payload, LIMITS)
        best = min(best, time.process_time() - started)
    return best, text


def _airlock_jailed(
    runner: SandboxRunner, kind: str, media_type: str, path: Path, rounds: int
) -> float:
    payload = path.read_bytes()
    best = float("inf")
    for _ in range(rounds):
        started = time.monotonic()
        runner.run(kind, media_type or "application/octet-stream", payload, LIMITS)
        best = min(best, time.monotonic() - started)
    return best


def _generated(rows: int, columns: int, directory: Path) -> tuple[Path, Path]:
    """One table of text and numbers, as an XLSX (shared by no string: inline, as exporters
    write) and as a CSV."""
    table = [
        [
            f"item {row}-{column}" if column % 2 else str(row * columns + column)
            for column in range(columns)
        ]
        for row in range(rows)
    ]
    cells = "".join(
        f'<row r="{r + 1}">'
        + "".join(
            f'<c r="{_column(c)}{r + 1}" t="inlineStr"><is><t>{value}</t></is></c>'
            if c % 2
            else f'<c r="{_column(c)}{r + 1}"><v>{value}</v></c>'
            for c, value in enumerate(row)
        )
        + "</row>"
        for r, row in enumerate(table)
    )
    workbook = directory / "generated.xlsx"
    workbook.write_bytes(xlsx({"Data": sheet(cells)}))
    text = io.StringIO()
    csv.writer(text).writerows(table)
    delimited = directory / "generated.csv"
    delimited.write_text(text.getvalue())
    return workbook, delimited


def _deck(slides: int, directory: Path) -> Path:
    """A deck of ``slides`` slides, each a title, three bullets and a 3 x 3 table."""
    deck = pptx.Presentation()
    for number in range(slides):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide {number}: quarterly review"
        slide.placeholders[1].text = "revenue up\ncosts down\nhiring paused"
        table = slide.shapes.add_table(3, 3, Inches(1), Inches(5), Inches(6), Inches(1)).table
        for row in range(3):
            for column in range(3):
                table.cell(row, column).text = f"r{row}c{column} {number}"
    path = directory / "generated.pptx"
    deck.save(str(path))
    return path


def _column(index: int) -> str:
    name = ""
    index += 1
    while index:
        index, remainder = divmod(index - 1, 26)
        name = chr(65 + remainder) + name
    return name


def main() -> None:
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
    shape = sys.argv[sys.argv.index("--cells") + 1] if "--cells" in sys.argv else "5000x10"
    slides = int(sys.argv[sys.argv.index("--slides") + 1]) if "--slides" in sys.argv else 200
    rows, columns = (int(part) for part in shape.split("x"))
    extractors.warm_up()
    peers = _peers()
    print(f"\n{'file':40} {'truth':>6} {'airlock':>8}" + "".join(f" {name:>10}" for name in peers))
    for name, kind, media_type, truth, layout in FILES:
        path = CORPUS / name
        cells = _truth_cells(CORPUS / truth, layout)
        _, text = _airlock_in_process(kind, media_type, path, 1)
        line = f"{name:40} {len(cells):>6} {_found(cells, text):>8}"
        for peer in peers.values():
            try:
                _, output = peer(path, 1)
                line += f" {_found(cells, output):>10}"
            except LookupError:
                line += f" {'—':>10}"
            except subprocess.CalledProcessError:
                line += f" {'fail':>10}"
        print(line)

    total = rows * columns
    with (
        tempfile.TemporaryDirectory() as scratch,
        SandboxRunner(
            SandboxLimits(cpu_seconds=600, wall_seconds=900.0, memory_bytes=4 << 30),
            warm_children=1,
        ) as runner,
    ):
        workbook, delimited = _generated(rows, columns, Path(scratch))
        print(f"\nCPU per cell, µs ({rows:,} rows x {columns} columns, least of {rounds} rounds)")
        print(f"{'file':16} {'airlock':>9} {'jailed*':>9}" + "".join(f" {n:>10}" for n in peers))
        for path, kind, media_type in (
            (workbook, "spreadsheet", ""),
            (delimited, "text", CSV_TYPE),
        ):
            own, _ = _airlock_in_process(kind, media_type, path, rounds)
            jailed = _airlock_jailed(runner, kind, media_type, path, rounds)
            line = f"{path.suffix:16} {own / total * 1e6:>9.2f} {jailed / total * 1e6:>9.2f}"
            for peer in peers.values():
                try:
                    cpu, _ = peer(path, rounds)
                    line += f" {cpu / total * 1e6:>10.2f}"
                except LookupError:
                    line += f" {'—':>10}"
            print(line)
        print("* wall time of a sandbox job on a warm child, per cell")
        deck = _deck(slides, Path(scratch))
        print(f"\nCPU per slide, ms ({slides} slides, least of {rounds} rounds)")
        print(f"{'file':16} {'airlock':>9} {'jailed*':>9}" + "".join(f" {n:>10}" for n in peers))
        own, _ = _airlock_in_process("presentation", "", deck, rounds)
        jailed = _airlock_jailed(runner, "presentation", "", deck, rounds)
        line = f"{deck.suffix:16} {own / slides * 1e3:>9.2f} {jailed / slides * 1e3:>9.2f}"
        for peer in peers.values():
            cpu, _ = peer(deck, rounds)
            line += f" {cpu / slides * 1e3:>10.2f}"
        print(line)


if __name__ == "__main__":
    main()
