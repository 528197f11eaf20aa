"""PDF text: airlock's CPU per page against pdftotext's, side by side in one run.

    .venv/bin/python bench/pdf_text_bench.py [--rounds N]

For every corpus PDF with a text layer (manifest categories pdf-text and pdf-form), the least
of N interleaved rounds of:

- airlock: ``extract_pdf`` in-process, as the sandbox child runs it (PDFium reading pypdf's
  checked text copy, pypdf reading the pages a rule sends it);
- pypdf only: the same with no text copy, every page read by pypdf as before PDFium read text;
- pdftotext: poppler's CLI on the file, its CPU from the kernel's accounting of the child
  (process start included: that is what calling it costs);
- PDFium alone: pypdfium2's text of every page of the upload, no guard at all (the floor).

Printed: ms of CPU per page and the ratios to pdftotext. The target (issue 21) is airlock
<= 1.5x pdftotext on every file. The machine is shared: read the columns as ratios.
"""

from __future__ import annotations

import io
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import pypdfium2  # noqa: E402
from pypdf import PdfReader  # noqa: E402

from sandbox.extractors import all as extractors  # noqa: E402
from sandbox.extractors import pdf  # noqa: E402
from sandbox.limits import ParseLimits  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"
LIMITS = ParseLimits(max_pages=500, max_text_chars=2_000_000)


def _cpu(work: Callable[[], object]) -> float:
    started = time.process_time()
    work()
    return time.process_time() - started


def _child_cpu(command: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _pypdf_only(payload: bytes) -> None:
    original = pdf._Pages.pdfium_text
    pdf._Pages.pdfium_text = lambda self, index: None  # type: ignore[method-assign]
    try:
        pdf.extract_pdf("application/pdf", payload, LIMITS)
    finally:
        pdf._Pages.pdfium_text = original  # type: ignore[method-assign]


def _pdfium_alone(payload: bytes) -> None:
    document = pypdfium2.PdfDocument(payload)
    try:
        for page in document:
            text_page = page.get_textpage()
            text_page.get_text_range()
            text_page.close()
            page.close()
    finally:
        document.close()


def _ways(path: Path, payload: bytes) -> dict[str, Callable[[], float]]:
    """Each way of reading the file, as a call that returns the CPU seconds it took."""
    return {
        "airlock": lambda: _cpu(lambda: pdf.extract_pdf("application/pdf", payload, LIMITS)),
        "pypdf": lambda: _cpu(lambda: _pypdf_only(payload)),
        "pdftotext": lambda: _child_cpu(
            ["pdftotext", "-q", "-enc", "UTF-8", str(path), "/dev/null"]
        ),
        "pdfium": lambda: _cpu(lambda: _pdfium_alone(payload)),
    }


def main() -> None:
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 7
    extractors.warm_up()
    documents = json.loads((CORPUS / "manifest.json").read_text())["documents"]
    files = [
        CORPUS / document["file"]
        for document in documents
        if document["category"] in ("pdf-text", "pdf-form")
    ]
    print(
        f"{'document':40} {'pages':>5} {'airlock':>8} {'pypdf':>7} {'pdftotext':>9} "
        f"{'PDFium':>7}   {'airlock/pt':>10} {'pypdf/pt':>8}"
    )
    worst = 0.0
    for path in files:
        payload = path.read_bytes()
        pages = len(PdfReader(io.BytesIO(payload)).pages)
        ways = _ways(path, payload)
        least = dict.fromkeys(ways, float("inf"))
        for _ in range(rounds):
            for name, way in ways.items():
                least[name] = min(least[name], way())
        per_page = {name: 1000 * seconds / pages for name, seconds in least.items()}
        ratio = least["airlock"] / least["pdftotext"]
        worst = max(worst, ratio)
        print(
            f"{path.name[:40]:40} {pages:5} {per_page['airlock']:8.1f} {per_page['pypdf']:7.1f} "
            f"{per_page['pdftotext']:9.1f} {per_page['pdfium']:7.1f}   {ratio:10.2f} "
            f"{least['pypdf'] / least['pdftotext']:8.2f}"
        )
    print(f"(ms of CPU per page; least of {rounds} rounds) worst airlock/pdftotext: {worst:.2f}")


if __name__ == "__main__":
    main()
