"""What the road to PDFium costs: each corpus PDF page copied alone and checked
(sandbox/extractors/pdf_decoders.py), against PDFium rendering it at 300 dpi.

Every page is timed as if it needed PDFium; in the service only a page without a usable text
layer does (a scan, a broken font map), so a text PDF pays nothing. In-process, no sandbox:
the child runs the same code. Usage: ``.venv/bin/python bench/pdf_decoders_bench.py [runs]``;
figures in docs/sandbox.md, "What PDFium opens".
"""

from __future__ import annotations

import io
import logging
import statistics
import sys
import time
from pathlib import Path

from pypdf import PdfReader

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The copy's two steps, private to pdf.py, are imported to time them apart from the check.
from sandbox.extractors.pdf import _page_alone, _written
from sandbox.extractors.pdf_decoders import refuse_hidden_decoders
from sandbox.extractors.pdfium import PdfiumPage
from sandbox.limits import ParseLimits

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


def _ms(started: float) -> float:
    return (time.process_time() - started) * 1000


def measure(path: Path) -> tuple[int, float, float, float]:
    """Pages, and CPU ms over the document for the copies, the checks and the renderings."""
    reader = PdfReader(io.BytesIO(path.read_bytes()))
    if reader.is_encrypted:
        reader.decrypt("")
    copying = checking = rendering = 0.0
    for page in reader.pages:
        page.extract_text()  # as the service reads the text layer before it opens PDFium
        started = time.process_time()
        writer = _page_alone(reader, page)
        copy = _written(writer)
        copying += _ms(started)
        started = time.process_time()
        refuse_hidden_decoders(writer)
        checking += _ms(started)
        started = time.process_time()
        pdfium = PdfiumPage(copy)
        pdfium.render(ParseLimits())
        pdfium.close()
        rendering += _ms(started)
    return len(reader.pages), copying, checking, rendering


def main() -> None:
    logging.disable(logging.WARNING)  # pypdf's notes on the corpus's own repairs
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print(f"{'document':44} pages  copy ms  check ms  render ms  (copy+check)/render")
    totals = [0.0, 0.0, 0.0]
    for path in sorted(CORPUS.glob("*.pdf")):
        samples = [measure(path) for _ in range(runs)]
        pages = samples[0][0]
        copy, check, render = (
            statistics.median(sample[i] for sample in samples) for i in (1, 2, 3)
        )
        totals = [totals[0] + copy, totals[1] + check, totals[2] + render]
        print(
            f"{path.name:44} {pages:5} {copy:8.1f} {check:9.1f} {render:10.1f}"
            f"  {(copy + check) / render:6.1%}"
        )
    copy, check, render = totals
    print(
        f"{'all':44} {'':5} {copy:8.1f} {check:9.1f} {render:10.1f}  {(copy + check) / render:6.1%}"
    )


if __name__ == "__main__":
    main()
